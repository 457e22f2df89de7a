"""`/topics` and a topic's pages: the list (with a name filter, an internal-topics toggle and the create form),
`/topics/<name>` (partitions, refreshed live from `/topics/<name>/partitions`; add partitions; delete with
confirmation) and `/topics/<name>/configs` (every config with its source; set or delete one). Changes are POSTs
that redirect back on success (so a reload does not repeat them) and re-render the page with the error beside
the form, and its HTTP status, on failure."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from confluent_kafka import KafkaError, KafkaException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from moldau.console import topic_view as view
from moldau.console.clients import ConsoleClients
from moldau.console.context import ConsoleContext
from moldau.console.errors import ConsoleError, kafka_error_status
from moldau.console.forms import form_fields

__all__ = ["routes"]

RATE_WINDOW_S = 10.0  # the message rate column averages over this much of the newest samples


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def topic_list(request: Request) -> Response:
        return await _render_list(ctx, request, view.CreateTopicForm(), None)

    async def create(request: Request) -> Response:
        form = view.CreateTopicForm.from_form(await form_fields(request))
        try:
            topic = form.parse()
            await view.create_topic(ctx.clients_for(request), topic)
        except (ConsoleError, KafkaException) as exc:
            return await _render_list(ctx, request, form, _failure(exc))
        return _see_other(f"/topics?{urlencode({'created': topic.topic})}")

    async def partitions(request: Request) -> Response:
        name = request.path_params["name"]
        return await _render_partitions(ctx, request, name, {})

    async def partitions_fragment(request: Request) -> Response:
        rows = await _partition_rows(ctx.clients_for(request), request.path_params["name"])
        return ctx.render(request, "topics/_partitions_table.html", partitions=rows)

    async def add_partitions(request: Request) -> Response:
        name = request.path_params["name"]
        clients = ctx.clients_for(request)
        topic = _find(await clients.metadata(), name)
        form = await form_fields(request)
        try:
            total = await view.add_partitions(clients, name, len(topic.partitions), str(form.get("total", "")))
        except (ConsoleError, KafkaException) as exc:
            return await _render_partitions(ctx, request, name, {"add": _failure(exc)})
        return _see_other(f"/topics/{quote(name)}?{urlencode({'partitions': total})}")

    async def delete(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_fields(request)
        try:
            await view.delete_topic(ctx.clients_for(request), name, str(form.get("confirm", "")))
        except (ConsoleError, KafkaException) as exc:
            return await _render_partitions(ctx, request, name, {"delete": _failure(exc)})
        return _see_other(f"/topics?{urlencode({'deleted': name})}")

    async def configs(request: Request) -> Response:
        return await _render_configs(ctx, request, request.path_params["name"], None, {})

    async def alter(request: Request) -> Response:
        name = request.path_params["name"]
        form = await form_fields(request)
        config, value = str(form.get("config", "")), str(form.get("value", ""))
        delete = form.get("operation") == "delete"
        try:
            await view.alter_config(ctx.clients_for(request), name, config, value, delete)
        except (ConsoleError, KafkaException) as exc:
            return await _render_configs(ctx, request, name, _failure(exc), {"config": config, "value": value})
        done = "deleted" if delete else "set"
        return _see_other(f"/topics/{quote(name)}/configs?{urlencode({done: config.strip()})}")

    return [
        Route("/topics", topic_list, methods=["GET"]),
        Route("/topics", create, methods=["POST"]),
        Route("/topics/{name}", partitions, methods=["GET"]),
        Route("/topics/{name}/partitions", partitions_fragment, methods=["GET"]),
        Route("/topics/{name}/partitions", add_partitions, methods=["POST"]),
        Route("/topics/{name}/delete", delete, methods=["POST"]),
        Route("/topics/{name}/configs", configs, methods=["GET"]),
        Route("/topics/{name}/configs", alter, methods=["POST"]),
    ]


async def _render_list(ctx: ConsoleContext, request: Request, form: view.CreateTopicForm,
                       failure: tuple[int, str] | None) -> Response:
    clients = ctx.clients_for(request)
    show_internal = request.query_params.get("internal") == "1"
    name_filter = request.query_params.get("q", "")
    metadata = await clients.metadata()
    shown = [t for t in metadata.topics.values()
             if (show_internal or not view.is_internal(t.topic)) and name_filter.lower() in t.topic.lower()]
    sizes = await view.gather_replica_sizes(clients, metadata)
    offsets = await view.gather_offsets(clients, [(t.topic, p) for t in shown for p in t.partitions])
    rows = view.topic_rows(metadata, sizes, offsets, show_internal, name_filter)
    # Messages in per second from the user's throughput sampler, which this page keeps sampling while open.
    rates = ctx.throughput.watched(clients).history.recent_rates("messages_in", RATE_WINDOW_S)
    if request.headers.get("hx-request") and failure is None:
        return ctx.render(request, "topics/_rows.html", topics=rows, rates=rates, name_filter=name_filter)
    status, error = failure or (200, None)
    return ctx.render(request, "topics/list.html", status_code=status, topics=rows, rates=rates,
                      show_internal=show_internal,
                      name_filter=name_filter, form=form, form_error=error,
                      created=request.query_params.get("created"), deleted=request.query_params.get("deleted"))


async def _render_partitions(ctx: ConsoleContext, request: Request, name: str,
                             errors: dict[str, tuple[int, str]]) -> Response:
    rows = await _partition_rows(ctx.clients_for(request), name)
    status = max((s for s, _ in errors.values()), default=200)
    return ctx.render(request, "topics/partitions.html", status_code=status, topic=name, tab="partitions",
                      partitions=rows, errors={k: m for k, (_, m) in errors.items()},
                      grown_to=request.query_params.get("partitions"))


async def _partition_rows(clients: ConsoleClients, name: str) -> list[view.PartitionRow]:
    metadata = await clients.metadata()
    topic = _find(metadata, name)
    sizes = await view.gather_replica_sizes(clients, metadata)
    offsets = await view.gather_offsets(clients, [(name, p) for p in topic.partitions])
    return view.partition_rows(topic, sizes, offsets)


async def _render_configs(ctx: ConsoleContext, request: Request, name: str, failure: tuple[int, str] | None,
                          typed: dict[str, str]) -> Response:
    clients = ctx.clients_for(request)
    _find(await clients.metadata(), name)
    rows = await view.describe_topic_configs(clients, name)
    status, error = failure or (200, None)
    return ctx.render(request, "topics/configs.html", status_code=status, topic=name, tab="configs",
                      configs=rows, form_error=error, typed=typed,
                      changed=request.query_params.get("set"), removed=request.query_params.get("deleted"))


def _find(metadata: Any, name: str) -> Any:
    """The topic's metadata from the whole cluster's (asking for one topic by name could create it where
    auto.create.topics.enable is on)."""
    topic = metadata.topics.get(name)
    if topic is None:
        raise ConsoleError(404, f"UNKNOWN_TOPIC_OR_PARTITION: there is no topic {name}")
    if topic.error is not None:
        raise KafkaException(topic.error)
    return topic


def _failure(exc: ConsoleError | KafkaException) -> tuple[int, str]:
    if isinstance(exc, ConsoleError):
        return exc.status, exc.message
    error = exc.args[0]
    if not isinstance(error, KafkaError):
        return 502, str(exc)
    return kafka_error_status(error), f"{error.name()}: {error.str()}"


def _see_other(url: str) -> Response:
    return RedirectResponse(url, status_code=303)
