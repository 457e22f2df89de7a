"""`/topics/<name>/messages`: the message browser and the produce form.

A GET shows the records its query string names (moldau.console.records.query: partition, where to start, count,
search), read by moldau.console.records.reader in a worker thread with a consumer made for the request's user and
closed after it. A POST produces the form's record as that user; on success it redirects to the newest records with
a note of where the record went (so reloading does not produce it again), on failure it shows the page again with
the form as it was and the error beside it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError, kafka_error_status
from moldau.console.forms import form_fields
from moldau.console.records.decoding import SchemaDecoder
from moldau.console.records.producing import ProduceForm, parse_form, produce
from moldau.console.records.query import COUNT_MAX, SEARCH_SCAN_MAX, BrowseQuery, parse_query
from moldau.console.records.reader import browse
from moldau.text import ascii_digits

__all__ = ["routes"]


async def topic_partitions(clients: ConsoleClients, topic: str) -> list[int]:
    """The topic's partition ids; ConsoleError 404 when the topic does not exist."""
    metadata = await clients.metadata(topic)
    described = metadata.topics.get(topic)
    if described is None or (described.error is not None and described.error.code() != KafkaError.NO_ERROR):
        if described is not None and described.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            raise KafkaException(described.error)
        raise ConsoleError(404, f"there is no topic {topic!r}")
    return sorted(described.partitions)


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    decoder = SchemaDecoder(ctx.registry_url)  # schemas by id, cached across requests

    async def page(request: Request, topic: str, query: BrowseQuery, form: ProduceForm | None = None,
                   produce_error: str | None = None, status: int = 200) -> Response:
        clients = ctx.clients_for(request)
        partitions = await topic_partitions(clients, topic)
        result = await asyncio.to_thread(browse, clients.config(), topic, partitions, query, decoder)
        values: dict[str, Any] = {
            "topic": topic, "tab": "messages", "query": query, "result": result, "partitions": partitions,
            "form": form or ProduceForm(), "produce_error": produce_error, "produced": _produced(request),
            "registry": ctx.registry_url is not None, "count_max": COUNT_MAX, "scan_max": SEARCH_SCAN_MAX,
        }
        return ctx.render(request, "messages/browse.html", status_code=status, **values)

    async def show(request: Request) -> Response:
        return await page(request, request.path_params["name"], parse_query(request.query_params))

    async def produce_record(request: Request) -> Response:
        topic = request.path_params["name"]
        form = parse_form(await form_fields(request))
        await topic_partitions(ctx.clients_for(request), topic)  # a mistyped path must not create a topic
        try:
            produced = await asyncio.to_thread(produce, ctx.clients_for(request).config(), topic, form)
        except ConsoleError as exc:
            return await page(request, topic, BrowseQuery(), form, exc.message, exc.status)
        except KafkaException as exc:
            error = exc.args[0]
            message = f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(exc)
            status = kafka_error_status(error) if isinstance(error, KafkaError) else 502
            return await page(request, topic, BrowseQuery(), form, message, status)
        target = f"{request.url.path}?from=end&produced={produced.partition}:{produced.offset}"
        return RedirectResponse(target, status_code=303)

    return [Route("/topics/{name}/messages", show, methods=["GET"]),
            Route("/topics/{name}/messages", produce_record, methods=["POST"])]


def _produced(request: Request) -> tuple[int, int] | None:
    """Where the record produced just before went (the redirect after a POST says it in the query string)."""
    partition, _, offset = request.query_params.get("produced", "").partition(":")
    if ascii_digits(partition) and ascii_digits(offset):
        return int(partition), int(offset)
    return None
