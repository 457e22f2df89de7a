"""One client connection: frames in, responses out, in order.

Like Kafka, a connection has one request being processed at a time; the next is read from the buffer only
after the previous response was queued, so responses always go out in request order. Frames that arrive
meanwhile wait in a bounded queue: past `max_queued_requests` the socket stops being read (TCP backpressure
then slows the client). Writes that outrun the client pause processing until the transport drains.

Anything that cannot be answered (a malformed frame, an unknown API, an oversized size prefix) closes this one
connection, which is Kafka's behaviour; other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Protocol

from moldau.protocol.codec import InvalidRequest
from moldau.protocol.framing import Frame, FrameReader, FrameTooLarge, frame

log = logging.getLogger(__name__)


class FrameHandler(Protocol):
    async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[bytes | memoryview] | None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, handler: FrameHandler, max_request_bytes: int, max_queued_requests: int,
                 connections: set[KafkaConnection], listener: str = "PLAINTEXT",
                 is_controller_listener: bool = False) -> None:
        self._handler = handler
        self.listener = listener
        self.is_controller_listener = is_controller_listener
        self._reader = FrameReader(max_request_bytes)
        self._max_queued = max_queued_requests
        self._queue: collections.deque[Frame] = collections.deque()
        self._wakeup: asyncio.Event = asyncio.Event()
        self._can_write: asyncio.Event = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self._connections = connections
        self.peer: str = "?"

    # -- asyncio.BufferedProtocol ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self._connections.add(self)
        self._task = asyncio.get_running_loop().create_task(self._process())

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameTooLarge as exc:
            self.abort(str(exc))
            return
        if frames:
            self._queue.extend(frames)
            self._wakeup.set()
            if len(self._queue) >= self._max_queued and not self._reading_paused and self._transport:
                self._reading_paused = True
                self._transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self._connections.discard(self)
        self._can_write.set()
        if self._task is not None:
            self._task.cancel()

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # -- processing --------------------------------------------------------------------------------------------

    async def _process(self) -> None:
        try:
            while True:
                if not self._queue:
                    self._wakeup.clear()
                    await self._wakeup.wait()
                    continue
                request = self._queue.popleft()
                self._maybe_resume_reading()
                response = await self._handler.handle_frame(request, self)
                if self._transport is None or self._transport.is_closing():
                    return
                if response is not None:
                    self._transport.writelines(frame(response))
                    if not self._can_write.is_set():
                        await self._can_write.wait()
        except InvalidRequest as exc:
            self.abort(f"invalid request: {exc}")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection from %s after an unexpected error", self.peer)
            self.abort("internal error")

    def _maybe_resume_reading(self) -> None:
        if self._reading_paused and len(self._queue) < self._max_queued // 2 and self._transport:
            self._reading_paused = False
            self._transport.resume_reading()

    def abort(self, reason: str) -> None:
        log.info("closing connection from %s: %s", self.peer, reason)
        if self._transport is not None:
            self._transport.abort()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
