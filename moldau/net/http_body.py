"""Reading an HTTP request body into memory with a bound, for Moldau's HTTP services (the schema registry, the
Connect REST API): memory must not follow what a client declares or sends."""

from __future__ import annotations

import json

from starlette.requests import ClientDisconnect, Request

from moldau.text import ascii_digits

__all__ = ["BodyIncomplete", "BodyTooLarge", "json_document", "read_bounded"]


class BodyTooLarge(Exception):
    """The body says (Content-Length) or shows (as it streams in) that it is larger than the limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit


class BodyIncomplete(ValueError):
    """The client went away before sending the whole body (a truncated request): nothing to act on."""


async def read_bounded(request: Request, limit: int) -> bytes:
    """The whole body, refused with BodyTooLarge as soon as it declares or exceeds `limit` bytes, and with
    BodyIncomplete when the client disconnects before it is all there."""
    declared = request.headers.get("content-length", "")
    if ascii_digits(declared) and int(declared) > limit:
        raise BodyTooLarge(limit)
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        raise BodyIncomplete(f"the client disconnected after {size} bytes of the request body") from None
    return b"".join(chunks)


def json_document(raw: bytes) -> object:
    """The body as JSON; ValueError when it is not JSON, or nests deeper than the decoder can follow (which
    would otherwise escape as RecursionError)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("the JSON document nests too deeply") from None
