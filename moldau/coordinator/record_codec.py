"""The primitives of the records coordinators keep in their internal topics, and where a key is placed.

`__consumer_offsets` and `__transaction_state` hold records in Kafka's own format: every key and value starts
with an int16 schema version; strings are int16-length-prefixed UTF-8 (-1 for null), bytes int32-length-prefixed,
arrays int32-counted. A coordinator key (group id, transactional id) is placed on partition
`abs(javaStringHashCode(key)) % partitions`, exactly as Kafka does, so tools agree on where it lives.
"""

from __future__ import annotations

import struct

from moldau.java_hash import cached_java_string_hash, kafka_abs

__all__ = ["Reader", "RecordFormatError", "Writer", "partition_for"]

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value that is not one of the known schemas."""


def partition_for(key: str, partitions: int) -> int:
    """The internal-topic partition of a coordinator key: Kafka's `Utils.abs(key.hashCode()) % partitions`."""
    return kafka_abs(cached_java_string_hash(key)) % partitions


class Writer:
    def __init__(self, version: int) -> None:
        self.buf = bytearray(_I16.pack(version))

    def i8(self, v: int) -> Writer:
        self.buf += _I8.pack(v)
        return self

    def i16(self, v: int) -> Writer:
        self.buf += _I16.pack(v)
        return self

    def i32(self, v: int) -> Writer:
        self.buf += _I32.pack(v)
        return self

    def i64(self, v: int) -> Writer:
        self.buf += _I64.pack(v)
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.i16(-1)
        data = v.encode()
        self.i16(len(data))
        self.buf += data
        return self

    def bytes_(self, v: bytes) -> Writer:
        self.i32(len(v))
        self.buf += v
        return self


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise RecordFormatError("record ends early")
        (v,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(v)

    def i8(self) -> int:
        return self._take(_I8)

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def _raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError("record ends early")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self._raw(n).decode()

    def string(self) -> str:
        v = self.nullable_string()
        if v is None:
            raise RecordFormatError("null where a string is required")
        return v

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else self._raw(n)

    def array_length(self) -> int:
        """An int32 element count; -1 (null) reads as 0."""
        n = self.i32()
        if n < -1 or n > len(self.data):
            raise RecordFormatError(f"bad array length {n}")
        return max(n, 0)
