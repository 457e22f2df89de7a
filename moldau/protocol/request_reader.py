"""The field reader shared by the direct request parsers (Produce, OffsetCommit, Heartbeat).

It reads from a memoryview of the request frame, so that byte fields (record batches) are views, not copies.
"""

from __future__ import annotations

import struct

from moldau.protocol.codec import InvalidRequest

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_MAX_ARRAY_LENGTH = 1_000_000


class RequestReader:
    """Reads a request body's fields in either style (flexible: compact lengths and tagged-field sections).

    Raises `InvalidRequest` for lengths that run past the frame; `struct.error`, `IndexError`,
    `UnicodeDecodeError` and `ValueError` may escape from truncated or undecodable fields, and callers turn
    those into `InvalidRequest` too."""

    def __init__(self, view: memoryview, pos: int, flexible: bool) -> None:
        self.view = view
        self.pos = pos
        self.flexible = flexible

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.view):
            raise InvalidRequest(f"field of {n} bytes runs past the end of the request")
        out = self.view[self.pos : self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt: struct.Struct) -> tuple[int, ...]:
        values = fmt.unpack_from(self.view, self.pos)
        self.pos += fmt.size
        return values

    def uvarint(self) -> int:
        first = self.view[self.pos]
        if first < 0x80:  # one byte: lengths, counts and tag sections of small requests, nearly every call
            self.pos += 1
            return first
        value = shift = 0
        while True:
            byte = self.view[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise InvalidRequest("varint longer than 5 bytes")


    def array_length(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I32)[0]
        if n < 0 or n > _MAX_ARRAY_LENGTH:
            raise InvalidRequest(f"invalid array length {n}")
        return n

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise InvalidRequest("null where a string is required")
        return value

    def nullable_string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I16)[0]
        return None if n < 0 else str(self.take(n), "utf-8")

    def nullable_bytes(self) -> memoryview | None:
        n = self.uvarint() - 1 if self.flexible else self.fixed(_I32)[0]
        return None if n < 0 else self.take(n)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.take(self.uvarint())

    def expect_no_tags(self) -> None:
        """A tagged-field section that must be empty (a direct parser hands anything else to kio)."""
        if self.flexible and self.uvarint() != 0:
            raise InvalidRequest("tagged fields present")

    def expect_end(self) -> None:
        if self.pos != len(self.view):
            raise InvalidRequest(f"{len(self.view) - self.pos} bytes after the end of the request body")
