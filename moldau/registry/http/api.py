"""What every route shares: JSON in and out, errors as Confluent shapes them, reads that catch up on a miss,
and writes that go to the writer (forwarded over HTTP when this broker is not it).

Responses are `application/vnd.schemaregistry.v1+json`. Request bodies are read as JSON whatever their content
type (Confluent's clients send `application/vnd.schemaregistry.v1+json`; curl users send `application/json` or
nothing). A read that finds nothing (a 404) first catches up with `_schemas` and asks again, so a schema
registered through another broker is found as soon as its id was returned.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response

from moldau.net.http_body import BodyIncomplete, BodyTooLarge, json_document, read_bounded
from moldau.registry.core import NotWriter, RegistryCore, Store
from moldau.registry.errors import RegistryError
from moldau.registry.http.forward import FORWARDED_HEADER, forward
from moldau.registry.operations import Plan
from moldau.registry.requests import parse_bool
from moldau.registry.serialized import SERIALIZED, serialized_form

__all__ = ["CONTENT_TYPE", "Api", "json_response"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 16 * 1024 * 1024
FORWARD_TIMEOUT_S = 30.0
READ_CATCH_UP_S = 3.0  # a miss waits at most this long for writes made elsewhere
WRITE_CATCH_UP_S = 10.0

T = TypeVar("T")


def json_response(content: Any, status: int = 200) -> Response:
    return Response(json.dumps(content, separators=(",", ":")), status, media_type=CONTENT_TYPE)


def error_response(error: RegistryError) -> Response:
    return json_response(error.body(), error.status)


class Api:
    def __init__(self, core: RegistryCore, store: Store, relay_tls: ssl.SSLContext | None = None) -> None:
        self.core = core
        self.store = store
        self.relay_tls = relay_tls

    @staticmethod
    def flag(request: Request, name: str, default: bool = False) -> bool:
        return parse_bool(request.query_params.get(name), default)

    @staticmethod
    async def raw_body(request: Request) -> bytes:
        """The request's body, read at most MAX_BODY_BYTES into memory (a larger one is refused with 413 as
        soon as it says or shows so), kept for a relay to the writer."""
        kept = getattr(request.state, "raw_body", None)
        if isinstance(kept, bytes):
            return kept
        try:
            raw = await read_bounded(request, MAX_BODY_BYTES)
        except BodyTooLarge as exc:
            raise RegistryError(413, 413, str(exc)) from None
        except BodyIncomplete as exc:
            raise RegistryError.bad_json(str(exc)) from None
        request.state.raw_body = raw
        return raw

    @classmethod
    async def body(cls, request: Request) -> object:
        raw = await cls.raw_body(request)
        if not raw.strip():
            return {}
        try:
            return json_document(raw)
        except ValueError as exc:  # UnicodeDecodeError is one
            raise RegistryError.bad_json(str(exc)) from exc

    @staticmethod
    def page(request: Request, items: list[T]) -> list[T]:
        """`offset` and `limit` (negative: no limit) applied to a listing."""
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
            limit = int(request.query_params.get("limit", "-1"))
        except ValueError:
            raise RegistryError.unprocessable("offset and limit must be integers") from None
        return items[offset:] if limit < 0 else items[offset:offset + limit]

    def schema_text(self, request: Request, schema_id: int, schema_type: str, text: str) -> str:
        """The schema's text as the request's `format` asks: a Protobuf one may be asked for `serialized`."""
        if request.query_params.get("format") != SERIALIZED or schema_type != "PROTOBUF":
            return text
        parsed = self.core.parsed.schema_by_id(schema_id)
        return (serialized_form(parsed) if parsed is not None else None) or text

    async def read(self, answer: Callable[[], T]) -> T:
        """`answer()`, asked again after catching up when it found nothing (when catching up fails, what this
        broker knows is the answer)."""
        try:
            return answer()
        except RegistryError as exc:
            if exc.status != 404:
                raise
        with contextlib.suppress(RegistryError):
            await self.store.catch_up(READ_CATCH_UP_S)
        return answer()

    async def write(self, request: Request, plan: Callable[[], Plan]) -> Response:
        """Run the write here when this broker is the writer, else relay the request to the writer's registry."""
        try:
            return json_response(await self.store.write(plan))
        except NotWriter as not_writer:
            if request.headers.get(FORWARDED_HEADER) or not_writer.url is None:
                raise RegistryError.forwarding_failed("the registry's writer is not known yet; retry") from None
            return await self._forward(request, not_writer.url)

    async def _forward(self, request: Request, url: str) -> Response:
        body = await self.raw_body(request)
        try:
            # The path as the client encoded it: a subject's %2F must stay encoded.
            path = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
            # The writer authenticates the client again: its credentials travel with the request.
            status, content_type, content = await forward(url, request.method, path, request.url.query, body,
                                                          FORWARD_TIMEOUT_S, request.headers.get("authorization"),
                                                          self.relay_tls)
        except (OSError, TimeoutError, ValueError) as exc:
            raise RegistryError.forwarding_failed(f"{url}: {exc}") from exc
        if 200 <= status < 300:
            with contextlib.suppress(RegistryError):  # the write is done either way
                await self.store.catch_up(WRITE_CATCH_UP_S)  # so reads here see it as soon as it is answered
        return Response(content, status, media_type=content_type or CONTENT_TYPE)


def handler(api: Api, route: Callable[[Api, Request], Awaitable[Response]]
            ) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint running `route`, with RegistryError answered in Confluent's shape."""
    async def endpoint(request: Request) -> Response:
        try:
            return await route(api, request)
        except RegistryError as exc:
            return error_response(exc)
    return endpoint
