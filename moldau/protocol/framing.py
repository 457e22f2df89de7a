"""Length-prefixed framing of the Kafka protocol, without I/O.

Every request and response is a 4-byte big-endian size followed by that many bytes. `FrameReader` is the
receiving side, shaped for `asyncio.BufferedProtocol`: the transport asks `get_buffer()` where to put the
next bytes and reports how many arrived with `buffer_updated(n)`, which returns the frames completed.

Two buffers keep copies to a minimum:
- small frames are parsed out of one reusable receive buffer, so many requests arrive in one read;
- a frame too large for that buffer gets a buffer of its own, allocated once at its exact size, into which
  the socket reads directly (no growing, no re-slicing: a 1 MiB produce request is not copied on arrival).

A size prefix that is negative or larger than `max_frame_bytes` (`socket.request.max.bytes`) is refused
before any of it is buffered, so a client cannot make the broker allocate memory it never sends.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = 4
DEFAULT_RECEIVE_BUFFER_BYTES = 256 * 1024

# A complete frame: bytes, or a read-only view of a large frame's own buffer.
Frame = bytes | memoryview


class FrameTooLarge(Exception):
    """A size prefix over the limit, or negative; the connection must be closed."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class FrameReader:
    def __init__(self, max_frame_bytes: int, receive_buffer_bytes: int = DEFAULT_RECEIVE_BUFFER_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray(receive_buffer_bytes)
        self._view = memoryview(self._buffer)
        self._start = 0  # first unparsed byte in _buffer
        self._end = 0  # end of received bytes in _buffer
        self._large: bytearray | None = None  # the body of a frame larger than _buffer
        self._large_filled = 0

    @property
    def buffered_bytes(self) -> int:
        return self._end - self._start + self._large_filled

    def get_buffer(self) -> memoryview:
        """Where the transport should write the next bytes (never empty)."""
        if self._large is not None:
            return memoryview(self._large)[self._large_filled :]
        if self._end == len(self._buffer):
            self._compact()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """Account for `nbytes` written into the last buffer; return the frames now complete."""
        if self._large is not None:
            self._large_filled += nbytes
            if self._large_filled < len(self._large):
                return []
            # A read-only view, not a copy: kio decodes from it (it refuses writable buffers).
            frame = memoryview(self._large).toreadonly()
            self._large, self._large_filled = None, 0
            return [frame]
        self._end += nbytes
        return self._parse()

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

    def _parse(self) -> list[Frame]:
        frames: list[Frame] = []
        buf, start, end = self._buffer, self._start, self._end
        while end - start >= SIZE_PREFIX_BYTES:
            size = self._check_size(_SIZE.unpack_from(buf, start)[0])
            body_start = start + SIZE_PREFIX_BYTES
            if end - body_start >= size:
                frames.append(bytes(self._view[body_start : body_start + size]))
                start = body_start + size
                continue
            if size > len(buf) - SIZE_PREFIX_BYTES:
                # Too large to ever fit: give it a buffer of its own and move what arrived of it there.
                self._large = bytearray(size)
                self._large_filled = end - body_start
                self._large[: self._large_filled] = self._view[body_start:end]
                start = end
            break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def _compact(self) -> None:
        pending = self._end - self._start
        self._buffer[:pending] = self._view[self._start : self._end]
        self._start, self._end = 0, pending

    def _check_size(self, size: int) -> int:
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        return size


def frame(payload_parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    """Prefix a response (given as parts, to avoid concatenation) with its size."""
    size = sum(len(p) for p in payload_parts)
    return [_SIZE.pack(size), *payload_parts]
