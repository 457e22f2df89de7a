"""FileSender on a real uvloop transport over loopback: bytes and file regions arrive whole and in order after
what the transport still held, a region past the end of its file raises RegionGone, a reset peer an OSError."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import uvloop

from moldau.protocol.wire import FileRegion
from moldau.server.file_sender import FileSender, RegionGone


class Slow:
    """A loopback client that reads everything after a pause (so the sender meets a full socket), or resets."""

    def __init__(self, port: int, pause_s: float, reset_after: int = 0) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
        self.sock.connect(("127.0.0.1", port))
        self.received = bytearray()
        self._pause_s, self._reset_after = pause_s, reset_after
        self.thread = threading.Thread(target=self._run)
        self.thread.start()

    def _run(self) -> None:
        time.sleep(self._pause_s)
        while True:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                break
            self.received += chunk
            if self._reset_after and len(self.received) >= self._reset_after:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
        self.sock.close()


def run_with_transport(pause_s: float, reset_after: int,
                       body: Callable[[asyncio.Transport], Awaitable[None]]) -> bytes:
    """Serve one connection on uvloop, run `body` with its transport, close it; what the client received."""
    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        connected: asyncio.Future[asyncio.Transport] = loop.create_future()

        class Accept(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                connected.set_result(transport)  # type: ignore[arg-type]

        server = await loop.create_server(Accept, "127.0.0.1", 0)
        client = await asyncio.to_thread(Slow, server.sockets[0].getsockname()[1], pause_s, reset_after)
        transport = await connected
        try:
            await body(transport)
        finally:
            transport.close()
            server.close()
            await asyncio.to_thread(client.thread.join, 30)
        return bytes(client.received)

    return uvloop.run(main())


def test_bytes_and_regions_arrive_whole_in_order_after_what_the_transport_held(tmp_path: Path) -> None:
    data = random.Random(1).randbytes(12 << 20)
    (tmp_path / "segment").write_bytes(data)
    earlier = b"earlier" * 1_200_000  # more than the socket takes at once: the transport buffers the rest
    fd = os.open(tmp_path / "segment", os.O_RDONLY)
    try:
        async def body(transport: asyncio.Transport) -> None:
            transport.write(earlier)
            assert transport.get_write_buffer_size() > 0
            await FileSender(transport).send([b"head", FileRegion(fd, 5, 8 << 20), b"middle",
                                              FileRegion(fd, 9 << 20, 3 << 20), b"tail"])

        received = run_with_transport(0.3, 0, body)
    finally:
        os.close(fd)
    assert received == earlier + b"head" + data[5:(8 << 20) + 5] + b"middle" + data[9 << 20:] + b"tail"


def test_a_region_past_the_end_of_its_file_cannot_be_sent(tmp_path: Path) -> None:
    (tmp_path / "segment").write_bytes(bytes(1000))
    fd = os.open(tmp_path / "segment", os.O_RDONLY)
    try:
        async def body(transport: asyncio.Transport) -> None:
            with pytest.raises(RegionGone):
                await FileSender(transport).send([b"head", FileRegion(fd, 500, 1000)])

        assert run_with_transport(0, 0, body) == b"head" + bytes(500)
    finally:
        os.close(fd)


def test_a_peer_that_resets_mid_send_raises_oserror(tmp_path: Path) -> None:
    (tmp_path / "segment").write_bytes(bytes(32 << 20))
    fd = os.open(tmp_path / "segment", os.O_RDONLY)
    try:
        async def body(transport: asyncio.Transport) -> None:
            with pytest.raises(OSError):
                await FileSender(transport).send([FileRegion(fd, 0, 32 << 20)])

        assert len(run_with_transport(0.1, 1 << 20, body)) < 32 << 20
    finally:
        os.close(fd)
