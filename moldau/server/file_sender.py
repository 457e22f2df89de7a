"""Sending a response that holds file regions: its bytes written and its regions sendfile'd on the socket itself.

uvloop's transports have no sendfile, and the standard loop's `loop.sendfile` would mean giving up uvloop. So a
connection that sends files writes such a response itself, on its socket's descriptor: first it waits until the
transport has nothing buffered (nothing of an earlier response may come after this one's bytes), then it writes
the byte parts with `os.writev` and the regions with `os.sendfile`, all non-blocking. While the socket's send
buffer is full it waits for the socket to be writable through a duplicate descriptor, because uvloop refuses a
writer callback on a descriptor its transport owns. The transport writes nothing meanwhile: the connection sends
every response in order, and the next only after this one is out.

A region whose file ends before it (a segment truncated after the fetch read it) cannot be sent whole, and the
response's size is already on the wire: `RegionGone` is raised and the connection must close. A client that
goes away mid-send shows as an `OSError` (broken pipe, reset), and the connection closes too.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from moldau.protocol.wire import FileRegion, ResponsePart

# os.writev takes at most this many buffers; a response has a handful.
_MAX_BUFFERS = 64


class RegionGone(Exception):
    """A file region could not be read whole: its file is shorter than the region now."""


def has_regions(parts: Sequence[ResponsePart]) -> bool:
    for part in parts:  # noqa: SIM110 - asked of every response: a loop costs less than any() over a generator
        if type(part) is FileRegion:
            return True
    return False


class FileSender:
    """Writes responses with file regions on one connection's socket (see the module docstring)."""

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._fd: int = transport.get_extra_info("socket").fileno()

    async def send(self, parts: Sequence[ResponsePart]) -> None:
        """Write `parts` (a whole response frame) after whatever the transport still holds."""
        await self._drained()
        pending: list[bytes | memoryview] = []
        for part in parts:
            if isinstance(part, FileRegion):
                if pending:
                    await self._write(pending)
                    pending = []
                await self._sendfile(part)
            else:
                pending.append(part)
        if pending:
            await self._write(pending)

    async def _drained(self) -> None:
        while self._transport.get_write_buffer_size() > 0:
            await self._writable()
            await asyncio.sleep(0)  # the transport writes its buffer on its own writability callback

    async def _write(self, buffers: list[bytes | memoryview]) -> None:
        views = [memoryview(b) for b in buffers if len(b)]
        while views:
            try:
                sent = os.writev(self._fd, views[:_MAX_BUFFERS])
            except BlockingIOError:
                sent = 0
            while sent and views:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0
            if views:
                await self._writable()

    async def _sendfile(self, region: FileRegion) -> None:
        position, end = region.position, region.position + region.size
        while position < end:
            try:
                sent = os.sendfile(self._fd, region.fd, position, end - position)
            except BlockingIOError:
                await self._writable()
                continue
            if sent == 0:
                raise RegionGone(f"file ends at {position}, before the {region.size} bytes from {region.position}")
            position += sent

    async def _writable(self) -> None:
        # The duplicate lives only for the wait: one kept open would keep the socket open after the transport
        # closed it, and the peer would see no end of the connection.
        waiting_fd = os.dup(self._fd)
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_writer(waiting_fd, _set_done, ready)
        try:
            await ready
        finally:
            loop.remove_writer(waiting_fd)
            os.close(waiting_fd)


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
