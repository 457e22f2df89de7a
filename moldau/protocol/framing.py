"""Length-prefixed framing of the Kafka protocol, without I/O.

Every request and response is a 4-byte big-endian size followed by that many bytes. `FrameReader` is the
receiving side, shaped for `asyncio.BufferedProtocol`: the transport asks `get_buffer()` where to put the
next bytes and reports how many arrived with `buffer_updated(n)`, which returns the frames completed.

Memory follows what a client has sent, never what it declares:
- reads land in one receive buffer shared by every connection of the thread's event loop (the loop calls
  `get_buffer` and `buffer_updated` back to back, so no two connections use it at once; brokers run in
  threads of their own in tests, hence one per thread); an idle connection holds no buffer at all;
- complete frames are copied out of it as `bytes`; an incomplete small frame's bytes are kept in a
  per-connection buffer holding exactly what arrived;
- a frame larger than `LARGE_FRAME_BYTES` gets a buffer of its own that the socket reads into directly. It is
  taken from the thread's `FrameBufferPool` when one there is free and large enough: then the frame's bytes go
  from the socket into it with no allocation and no copy (a 1 MiB produce request otherwise costs 2 MiB of
  fresh, zeroed memory and 1 MiB of copies as its buffer grows, about a fifth of the broker's CPU at full
  ingest). Otherwise a new buffer is grown geometrically (doubling, capped at the declared size) as its bytes
  arrive, so a client that declares 100 MiB and sends 10 bytes costs 64 KiB; completed, it joins the pool.
  The pool holds at most `POOL_BUFFERS` buffers of at most `POOL_MAX_BUFFER_BYTES` each: at most 64 MiB per
  event loop (16 MiB with 1 MiB requests), whatever clients declare. A pooled buffer is charged to its
  connection for the bytes that arrived in it (`buffered_bytes`), a grown one for its whole size.
- after a large frame, the next read asks for the size prefix alone: a connection that sent one large frame
  usually sends another, and its first bytes would otherwise land in the receive buffer and be copied into the
  frame's own buffer (up to `RECEIVE_BUFFER_BYTES` of every 1 MiB produce request). One small read instead;
  the first small frame ends the expectation.

A size prefix that is negative or larger than `max_frame_bytes` (`socket.request.max.bytes`) is refused
before any of it is buffered.
"""

from __future__ import annotations

import struct
import threading

from moldau.protocol.wire import ResponsePart

SIZE = _SIZE = struct.Struct(">i")  # the size prefix
SIZE_PREFIX_BYTES = 4
RECEIVE_BUFFER_BYTES = 256 * 1024
# Frames above this read straight into a buffer of their own; smaller ones gather in the pending buffer.
LARGE_FRAME_BYTES = 64 * 1024

# A complete frame: bytes, or a read-only view of a large frame's own buffer.
Frame = bytes | memoryview

# The pool of large-frame buffers: enough for a few requests in flight on each of a handful of producer
# connections; buffers above the size bound (rare, very large requests) are not kept.
POOL_BUFFERS = 16
POOL_MAX_BUFFER_BYTES = 4 * 1024 * 1024

_per_thread = threading.local()


def shared_receive_buffer() -> memoryview:
    """This thread's one receive buffer (an event loop runs on one thread), made on first use."""
    buffer: memoryview | None = getattr(_per_thread, "receive_buffer", None)
    if buffer is None:
        buffer = _per_thread.receive_buffer = memoryview(bytearray(RECEIVE_BUFFER_BYTES))
    return buffer


def shared_frame_pool() -> FrameBufferPool:
    """This thread's pool of large-frame buffers, made on first use."""
    pool: FrameBufferPool | None = getattr(_per_thread, "frame_pool", None)
    if pool is None:
        pool = _per_thread.frame_pool = FrameBufferPool()
    return pool


def _in_use(buffer: bytearray) -> bool:
    """Whether some memoryview of `buffer` is still alive (a frame, or a slice of one kept by a request).

    A bytearray refuses to change size while it has exports, and every view or slice of a frame holds one, so a
    buffer that can be resized is referenced by nothing but the pool: reusing it cannot overwrite bytes that
    anyone still reads. Shrinking by one byte and growing back stays within the allocation (no copy)."""
    try:
        del buffer[-1]
    except BufferError:
        return True
    buffer.append(0)
    return False


class FrameBufferPool:
    """Buffers of completed large frames, kept for reuse once nothing references their frame any more."""

    def __init__(self, max_buffers: int = POOL_BUFFERS, max_buffer_bytes: int = POOL_MAX_BUFFER_BYTES) -> None:
        self._max_buffers = max_buffers
        self._max_buffer_bytes = max_buffer_bytes
        self._buffers: list[bytearray] = []  # oldest first; some may still back frames being processed

    def take(self, size: int) -> bytearray | None:
        """A free buffer of at least `size` bytes (and at most twice that, so small frames leave the large
        buffers to large frames), or None. The most recently given one first: cycling through few buffers keeps
        them in the CPU cache, where the socket read and the segment write copy faster."""
        for i in range(len(self._buffers) - 1, -1, -1):
            buffer = self._buffers[i]
            if size <= len(buffer) <= 2 * size and not _in_use(buffer):
                del self._buffers[i]
                return buffer
        return None

    def give(self, buffer: bytearray) -> None:
        """Keep `buffer` (its frame may still be in use; `take` checks). Past the bounds the oldest is dropped."""
        if len(buffer) > self._max_buffer_bytes:
            return
        self._buffers.append(buffer)
        if len(self._buffers) > self._max_buffers:
            del self._buffers[0]

    def __len__(self) -> int:
        return len(self._buffers)


class FrameTooLarge(Exception):
    """A size prefix over the limit, or negative; the connection must be closed."""

    def __init__(self, size: int, limit: int, limit_name: str = "socket.request.max.bytes") -> None:
        super().__init__(f"frame of {size} bytes exceeds {limit_name}={limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    def __init__(self, max_frame_bytes: int, receive_buffer: memoryview | None = None,
                 large_frame_bytes: int = LARGE_FRAME_BYTES, pool: FrameBufferPool | None = None) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.limit_name = "socket.request.max.bytes"  # the config that sets max_frame_bytes, for the error
        self._large_frame_bytes = large_frame_bytes
        self._receive = receive_buffer if receive_buffer is not None else shared_receive_buffer()
        self._pool = pool if pool is not None else shared_frame_pool()
        self._pending = bytearray()  # the start of an incomplete small frame (or of a size prefix)
        self._large: bytearray | None = None  # the body of an incomplete large frame, as allocated so far
        self._large_size = 0  # its declared size
        self._large_filled = 0
        self._pooled = False  # whether _large came from the pool (whole-size already, charged as filled)
        self._direct = False  # whether the last get_buffer() handed out the large frame's buffer
        self._expect_large = False  # the last frame was large: read the next one's size prefix on its own

    @property
    def buffered_bytes(self) -> int:
        """Bytes of memory this reader holds for incomplete frames: a pooled buffer is the pool's memory (bounded
        whatever clients do), so only the bytes that arrived in it count."""
        if self._large is None:
            return len(self._pending)
        return len(self._pending) + (self._large_filled if self._pooled else len(self._large))

    @property
    def frame_in_progress(self) -> bool:
        """Whether part of a frame (or of its size prefix) has arrived and the rest has not."""
        return bool(self._pending) or self._large is not None

    def get_buffer(self) -> memoryview:
        """Where the transport should write the next bytes (never empty)."""
        if self._large is None:
            self._direct = False
            if self._expect_large and not self._pending:
                return self._receive[:SIZE_PREFIX_BYTES]
            return self._receive
        if self._large_filled == len(self._large):
            self._grow_large()
        self._direct = True
        # A pooled buffer may be longer than the frame: the socket must not read the next frame's bytes into it.
        return memoryview(self._large)[self._large_filled : self._large_size]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """Account for `nbytes` written into the last buffer; return the frames now complete."""
        if self._direct:
            self._direct = False
            return self._large_received(nbytes)
        arrived = self._receive[:nbytes]
        if self._pending:
            self._pending += arrived
            data: memoryview = memoryview(self._pending)
        else:
            data = arrived
        try:
            frames, used = self._parse(data)
            rest = bytes(data[used:]) if used < len(data) else b""
        finally:
            data.release()  # a view of _pending blocks resizing it
        self._pending = bytearray(rest)
        return frames

    def feed(self, data: bytes) -> list[Frame]:
        """Convenience for tests and plain protocols: copy `data` in through the buffer interface."""
        frames: list[Frame] = []
        pos = 0
        while pos < len(data):
            target = self.get_buffer()
            n = min(len(target), len(data) - pos)
            target[:n] = data[pos : pos + n]
            pos += n
            frames += self.buffer_updated(n)
        return frames

    def release(self) -> None:
        """Drop every buffered byte (the connection is gone)."""
        self._pending = bytearray()
        if self._large is not None:
            self._pool.give(self._large)
        self._large = None
        self._large_filled = self._large_size = 0

    def _parse(self, data: memoryview) -> tuple[list[Frame], int]:
        """Complete frames in `data`, and how many bytes they (and a started large frame) used."""
        frames: list[Frame] = []
        pos, end = 0, len(data)
        while end - pos >= SIZE_PREFIX_BYTES:
            size = self._check_size(_SIZE.unpack_from(data, pos)[0])
            body = pos + SIZE_PREFIX_BYTES
            if end - body >= size:
                frames.append(bytes(data[body : body + size]))
                pos = body + size
                self._expect_large = False
            elif size > self._large_frame_bytes:
                self._start_large(size, data[body:end])
                pos = end
            else:
                break
        return frames, pos

    def _start_large(self, size: int, arrived: memoryview) -> None:
        pooled = self._pool.take(size)
        self._pooled = pooled is not None
        if pooled is None:
            pooled = bytearray(min(size, max(self._large_frame_bytes, 2 * len(arrived))))
        self._large = pooled
        # Through a memoryview: a bytearray slice assigned a memoryview first copies it into a temporary bytearray.
        memoryview(pooled)[: len(arrived)] = arrived
        self._large_size, self._large_filled = size, len(arrived)

    def _grow_large(self) -> None:
        assert self._large is not None
        grown = bytearray(min(self._large_size, 2 * len(self._large)))
        grown[: self._large_filled] = self._large
        self._large = grown

    def _large_received(self, nbytes: int) -> list[Frame]:
        assert self._large is not None
        self._large_filled += nbytes
        if self._large_filled < self._large_size:
            return []
        # A read-only view, not a copy: kio decodes from it (it refuses writable buffers).
        frame = memoryview(self._large)[: self._large_size].toreadonly()
        self._pool.give(self._large)  # reused once the frame and every slice of it are gone
        self._large, self._large_filled, self._large_size = None, 0, 0
        self._expect_large = True
        return [frame]

    def _check_size(self, size: int) -> int:
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes, self.limit_name)
        return size


def frame(payload_parts: list[ResponsePart]) -> list[ResponsePart]:
    """Prefix a response (given as parts, to avoid concatenation) with its size."""
    size = sum(len(p) for p in payload_parts)
    return [_SIZE.pack(size), *payload_parts]
