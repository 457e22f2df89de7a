"""The request bounds every HTTP listener puts in front of its app (moldau.net.http_server), driven through the
ASGI interface directly: bodies over the limit by their declared length or as they stream in, and oversized
headers, are answered 413 and 431 whatever the app would have said; bodies within it reach the app whole."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse
from starlette.types import Message, Receive, Scope, Send

from moldau.net.http_server import MAX_HEADER_BYTES, _bounded_bodies

LIMIT = 100


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """An app that reads the whole body and answers its length (400 if the client went away)."""
    try:
        body = await Request(scope, receive).body()
    except ClientDisconnect:
        await PlainTextResponse("gone", status_code=400)(scope, receive, send)
        return
    await PlainTextResponse(str(len(body)))(scope, receive, send)


def call(chunks: list[bytes], headers: list[tuple[bytes, bytes]] | None = None) -> tuple[int, Any]:
    scope: dict[str, Any] = {"type": "http", "method": "POST", "path": "/", "headers": headers or [],
                             "query_string": b""}
    incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[Message] = []

    async def receive() -> Message:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    async def serve() -> None:
        await _bounded_bodies(echo_length, LIMIT)(scope, receive, send)

    asyncio.run(serve())
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, sent
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return starts[0]["status"], body


def test_a_body_within_the_limit_reaches_the_app() -> None:
    assert call([b"a" * 60, b"b" * 40]) == (200, b"100")


def test_a_body_that_grows_over_the_limit_is_answered_413_instead_of_the_app() -> None:
    status, body = call([b"a" * 60, b"b" * 41])
    assert status == 413 and json.loads(body)["error_code"] == 413


def test_a_declared_length_over_the_limit_is_refused_before_reading() -> None:
    assert call([b"small"], [(b"content-length", b"101")])[0] == 413


def test_oversized_headers_are_refused() -> None:
    assert call([b""], [(b"x-big", b"a" * MAX_HEADER_BYTES)])[0] == 431
