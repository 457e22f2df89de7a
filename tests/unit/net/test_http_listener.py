"""An HTTP listener (moldau.net.http_server) on a real loopback socket: it keeps uvicorn's behaviour where it
replaces uvicorn's polling loop (a Date header renewed every second, graceful stops that let a request in flight
finish) and stops whether or not anyone is connected."""

from __future__ import annotations

import asyncio
import email.utils

import pytest
from starlette.types import Receive, Scope, Send

from moldau.net.http_server import HttpListener, ListenerUrl


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["path"] == "/slow":
        await asyncio.sleep(0.5)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def started() -> HttpListener:
    listener = HttpListener("test", ListenerUrl("127.0.0.1", 0))
    listener.bind()
    listener.start(app)
    await asyncio.sleep(0.05)  # the server task starts serving on the bound socket
    return listener


async def get(port: int, path: str = "/") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def response(reader: asyncio.StreamReader) -> dict[str, str]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    status, *lines = head.strip().split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines)
    fields["status"] = status
    fields["body"] = (await reader.readexactly(int(fields["content-length"]))).decode()
    return fields


def test_the_date_header_is_renewed_every_second() -> None:
    async def run() -> tuple[str, str]:
        listener = await started()
        try:
            reader, writer = await get(listener.port)
            first = (await response(reader))["date"]
            await asyncio.sleep(2.1)
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            second = (await response(reader))["date"]
            writer.close()
            return first, second
        finally:
            await listener.stop()

    first, second = asyncio.run(run())
    first_time, second_time = email.utils.parsedate_to_datetime(first), email.utils.parsedate_to_datetime(second)
    assert 1 <= (second_time - first_time).total_seconds() <= 4


def test_a_stop_lets_a_request_in_flight_finish_and_closes_the_port() -> None:
    async def run() -> dict[str, str]:
        listener = await started()
        port = listener.port
        reader, writer = await get(port, "/slow")
        await asyncio.sleep(0.1)  # the request is being served
        stopping = asyncio.create_task(listener.stop())
        answer = await response(reader)
        await stopping
        writer.close()
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        return answer

    answer = asyncio.run(run())
    assert answer["status"].startswith("HTTP/1.1 200") and answer["body"] == "ok"


@pytest.mark.parametrize("idle_client", [False, True])
def test_a_stop_ends_with_or_without_idle_connections(idle_client: bool) -> None:
    async def run() -> bytes:
        listener = await started()
        reader, writer = await get(listener.port)
        await response(reader)
        if not idle_client:
            writer.close()
            await writer.wait_closed()
            await asyncio.sleep(0.05)
        await asyncio.wait_for(listener.stop(), 5)
        rest = await asyncio.wait_for(reader.read(), 5)  # the server closed the kept-alive connection
        writer.close()
        return rest

    assert asyncio.run(run()) == b""
