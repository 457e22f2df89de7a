"""Relaying a write to the writer's registry: one HTTP/1.1 request on a fresh connection, answer read to EOF.

Forwarded requests are rare (writes only) and small, so a connection per request keeps this simple; the header
`FORWARDED_HEADER` marks a relayed request, so a broker that is not the writer either refuses it rather than
relaying it again. The header grants nothing: the client's `Authorization` header is relayed with it, and an
https writer is reached over TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from urllib.parse import urlsplit

__all__ = ["FORWARDED_HEADER", "forward"]

FORWARDED_HEADER = "X-Moldau-Registry-Forwarded"


async def forward(base_url: str, method: str, path: str, query: str, body: bytes, timeout_s: float,
                  authorization: str | None = None, tls: ssl.SSLContext | None = None) -> tuple[int, str, bytes]:
    """The writer's answer to the request: (status, content type, body). Raises OSError (ssl.SSLError among
    them), TimeoutError or ValueError (an answer that is not HTTP)."""
    target = urlsplit(base_url)
    https = target.scheme == "https"
    host, port = target.hostname or "127.0.0.1", target.port or (443 if https else 80)
    if https and tls is None:
        tls = ssl.create_default_context()
    credentials = f"Authorization: {authorization}\r\n" if authorization else ""
    async with asyncio.timeout(timeout_s):
        reader, writer = await asyncio.open_connection(host, port, ssl=tls if https else None)
        try:
            head = (f"{method} {path}{'?' + query if query else ''} HTTP/1.1\r\nHost: {host}:{port}\r\n"
                    f"Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {len(body)}\r\n"
                    f"{credentials}{FORWARDED_HEADER}: 1\r\nConnection: close\r\n\r\n")
            writer.write(head.encode() + body)
            await writer.drain()
            answer = await reader.read()  # to EOF: the writer closes after its answer
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return _parse_answer(answer)


def _parse_answer(answer: bytes) -> tuple[int, str, bytes]:
    head, sep, content = answer.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError("the answer has no end of headers")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/"):
        raise ValueError(f"not an HTTP answer: {lines[0]!r}")
    headers = {name.strip().lower(): value.strip() for name, _, value in (h.partition(":") for h in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        content = _unchunk(content)
    elif "content-length" in headers:
        content = content[:int(headers["content-length"])]
    return int(parts[1]), headers.get("content-type", ""), content


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2:]
    return bytes(out)
