"""Length-prefixed framing of the Kafka protocol, without I/O.

Every request and response is a 4-byte big-endian size followed by that many bytes. `FrameDecoder` is fed
whatever the socket produced and hands back complete frames. It refuses a size prefix that is negative or
larger than the configured maximum (`socket.request.max.bytes`) before buffering any of it, so a client
cannot make the broker allocate memory it announced but never sent.
"""

from __future__ import annotations

import struct

_SIZE = struct.Struct(">i")
SIZE_PREFIX_BYTES = 4


class FrameTooLarge(Exception):
    """A size prefix over the limit, or negative; the connection must be closed."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Splits a byte stream into frames. `feed` returns the frames completed by the new data."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._expected: int | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        frames: list[bytes] = []
        if not self._buffer and self._expected is None:
            # Fast path: whole frames arriving in one read need no buffer copy of their own.
            data = self._take_whole_frames(data, frames)
        self._buffer += data
        while True:
            if self._expected is None:
                if len(self._buffer) < SIZE_PREFIX_BYTES:
                    return frames
                self._expected = self._check_size(_SIZE.unpack_from(self._buffer)[0])
                del self._buffer[:SIZE_PREFIX_BYTES]
            if len(self._buffer) < self._expected:
                return frames
            frames.append(bytes(self._buffer[: self._expected]))
            del self._buffer[: self._expected]
            self._expected = None

    def _take_whole_frames(self, data: bytes, frames: list[bytes]) -> bytes:
        pos, end = 0, len(data)
        while end - pos >= SIZE_PREFIX_BYTES:
            size = self._check_size(_SIZE.unpack_from(data, pos)[0])
            if end - pos - SIZE_PREFIX_BYTES < size:
                break
            start = pos + SIZE_PREFIX_BYTES
            frames.append(data[start : start + size] if (pos or start + size != end) else data[start:])
            pos = start + size
        return data[pos:] if pos else data

    def _check_size(self, size: int) -> int:
        if size < 0 or size > self.max_frame_bytes:
            raise FrameTooLarge(size, self.max_frame_bytes)
        return size


def frame(payload_parts: list[bytes]) -> list[bytes]:
    """Prefix a response (given as parts, to avoid concatenation) with its size."""
    size = sum(len(p) for p in payload_parts)
    return [_SIZE.pack(size), *payload_parts]
