"""Primitives for the hand-written encoders of hot-path responses (Fetch, Produce).

Both encoders are checked byte for byte against kio's generated encoders in the unit tests; this module only
knows how Kafka writes lengths and strings in its two styles: "flexible" versions use compact forms (unsigned
varint of length + 1, 0 for null) and a tagged-field section after each struct; older versions use fixed
int16/int32 lengths (-1 for null).
"""

from __future__ import annotations

import struct

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
_NO_TAGS = b"\x00"

Part = bytes | memoryview


class ResponseWriter:
    """Accumulates small fields in `out` and cuts it wherever a large payload goes in as its own part.

    Always write through `self.out`: `payload` replaces that buffer, so callers must keep no alias to it.
    """

    def __init__(self, flexible: bool, inline_below_bytes: int = 4096) -> None:
        self.flexible = flexible
        self.inline_below_bytes = inline_below_bytes
        self.out = bytearray()
        self.parts: list[Part] = []

    def array_length(self, n: int) -> None:
        self.out += uvarint(n + 1) if self.flexible else I32.pack(n)

    def null_array(self) -> None:
        self.out += b"\x00" if self.flexible else I32.pack(-1)

    def string(self, value: str) -> None:
        data = value.encode()
        self.out += uvarint(len(data) + 1) if self.flexible else I16.pack(len(data))
        self.out += data

    def nullable_string(self, value: str | None) -> None:
        if value is None:
            self.out += b"\x00" if self.flexible else I16.pack(-1)
        else:
            self.string(value)

    def payload(self, data: Part | None) -> None:
        """Nullable bytes (e.g. records); a large payload becomes a part of its own, not copied."""
        if data is None:
            self.out += b"\x00" if self.flexible else I32.pack(-1)
            return
        self.out += uvarint(len(data) + 1) if self.flexible else I32.pack(len(data))
        if len(data) < self.inline_below_bytes:
            self.out += data  # small: one copy is cheaper than another part
            return
        self.parts.append(bytes(self.out))
        self.parts.append(data)
        self.out = bytearray()

    def tags(self) -> None:
        if self.flexible:
            self.out += _NO_TAGS

    def finish(self) -> list[Part]:
        if self.out:
            self.parts.append(bytes(self.out))
        return self.parts


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
