"""Primitives for the hand-written encoders of hot-path responses (Fetch, Produce, Metadata, ListOffsets).

Both encoders are checked byte for byte against kio's generated encoders in the unit tests; this module only
knows how Kafka writes lengths and strings in its two styles: "flexible" versions use compact forms (unsigned
varint of length + 1, 0 for null) and a tagged-field section after each struct; older versions use fixed
int16/int32 lengths (-1 for null).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

I16 = struct.Struct(">h")
I32 = struct.Struct(">i")
I64 = struct.Struct(">q")
NO_TAGS = b"\x00"  # an empty tagged-field section

Part = bytes | memoryview


@dataclass(frozen=True, slots=True)
class FileRegion:
    """`size` bytes at `position` of an open file, sent as they are (sendfile) by a connection that can.

    Only a response for a plaintext connection carries these; every other one holds the bytes themselves.
    """

    fd: int
    position: int
    size: int
    keep: object = None  # whatever keeps `fd` open until the region is sent (the storage's pinned descriptor)

    def __len__(self) -> int:
        return self.size


# What a response body is made of: bytes, or regions of files a plaintext connection sends with sendfile.
ResponsePart = bytes | memoryview | FileRegion
_ONE_BYTE = [bytes((i,)) for i in range(0x80)]  # the unsigned varints of one byte


class ResponseWriter:
    """Accumulates small fields in `out` and cuts it wherever a large payload goes in as its own part.

    Always write through `self.out`: `payload` replaces that buffer, so callers must keep no alias to it.
    """

    def __init__(self, flexible: bool, inline_below_bytes: int = 4096) -> None:
        self.flexible = flexible
        self.inline_below_bytes = inline_below_bytes
        self.out = bytearray()
        self.parts: list[ResponsePart] = []

    def array_length(self, n: int) -> None:
        self.out += array_length(n, self.flexible)

    def null_array(self) -> None:
        self.out += b"\x00" if self.flexible else I32.pack(-1)

    def string(self, value: str) -> None:
        self.out += string(value, self.flexible)

    def nullable_string(self, value: str | None) -> None:
        self.out += nullable_string(value, self.flexible)

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

    def file_payload(self, regions: Sequence[FileRegion]) -> None:
        """Bytes (records) that stay in their files: each region is a part of its own, sent with sendfile."""
        self.out += uvarint(sum(r.size for r in regions) + 1) if self.flexible else I32.pack(
            sum(r.size for r in regions))
        self.parts.append(bytes(self.out))
        self.parts.extend(regions)
        self.out = bytearray()

    def tags(self) -> None:
        if self.flexible:
            self.out += NO_TAGS

    def finish(self) -> list[ResponsePart]:
        if self.out:
            self.parts.append(bytes(self.out))
        return self.parts


def array_length(n: int, flexible: bool) -> bytes:
    """An array's element count."""
    return uvarint(n + 1) if flexible else I32.pack(n)


def string(value: str, flexible: bool) -> bytes:
    """A non-null string, length first."""
    data = value.encode()
    return (uvarint(len(data) + 1) if flexible else I16.pack(len(data))) + data


def nullable_string(value: str | None, flexible: bool) -> bytes:
    if value is None:
        return b"\x00" if flexible else I16.pack(-1)
    return string(value, flexible)


def tagged_field(tag: int, body: bytes) -> bytes:
    """One entry of a tagged-field section: the tag, the size, then the encoded value."""
    return uvarint(tag) + uvarint(len(body)) + body


def uvarint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]  # lengths and counts of small responses: most calls
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
