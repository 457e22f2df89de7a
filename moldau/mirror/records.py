"""MirrorMaker 2's internal record formats, byte for byte, so that tools reading MirrorMaker 2's topics read
Moldau's and the other way round.

Kafka writes them with its protocol type system: a STRING is a big-endian int16 length then that many UTF-8
bytes; INT16, INT32 and INT64 are big-endian. Offset syncs (`mm2-offset-syncs.<alias>.internal`) carry no
version; checkpoint values (`<alias>.checkpoints.internal`) and heartbeat values (`heartbeats`) start with an
INT16 version, 0 being the only one defined.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["Checkpoint", "Heartbeat", "MalformedRecord", "OffsetSync"]

VERSION = 0
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class MalformedRecord(ValueError):
    """A key or value that is not in the format its topic holds (truncated, trailing bytes, bad version)."""


class _Writer:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def string(self, value: str) -> _Writer:
        encoded = value.encode()
        if len(encoded) > 0x7FFF:
            raise ValueError(f"string of {len(encoded)} bytes is longer than Kafka's STRING allows")
        self._parts += [_INT16.pack(len(encoded)), encoded]
        return self

    def int16(self, value: int) -> _Writer:
        self._parts.append(_INT16.pack(value))
        return self

    def int32(self, value: int) -> _Writer:
        self._parts.append(_INT32.pack(value))
        return self

    def int64(self, value: int) -> _Writer:
        self._parts.append(_INT64.pack(value))
        return self

    def bytes(self) -> bytes:
        return b"".join(self._parts)


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(data)
        self._at = 0
        self._what = what

    def _take(self, size: int) -> memoryview:
        if size < 0 or self._at + size > len(self._data):
            raise MalformedRecord(f"{self._what} is truncated")
        chunk = self._data[self._at:self._at + size]
        self._at += size
        return chunk

    def string(self) -> str:
        length = self.int16()
        try:
            return bytes(self._take(length)).decode()
        except UnicodeDecodeError as e:
            raise MalformedRecord(f"{self._what} holds a string that is not UTF-8") from e

    def int16(self) -> int:
        return int(_INT16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_INT32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_INT64.unpack(self._take(8))[0])

    def version(self) -> None:
        version = self.int16()
        if version != VERSION:
            raise MalformedRecord(f"{self._what} has version {version}; only {VERSION} is known")

    def end(self) -> None:
        if self._at != len(self._data):
            raise MalformedRecord(f"{self._what} has {len(self._data) - self._at} bytes past its end")


def _reader(data: bytes | None, what: str) -> _Reader:
    if data is None:
        raise MalformedRecord(f"{what} is missing")
    return _Reader(data, what)


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """Upstream offset `upstream_offset` of `topic`-`partition` was written at `downstream_offset` on the target."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _Writer().string(self.topic).int32(self.partition).bytes()

    def value(self) -> bytes:
        return _Writer().int64(self.upstream_offset).int64(self.downstream_offset).bytes()

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k = _reader(key, "offset sync key")
        topic, partition = k.string(), k.int32()
        k.end()
        v = _reader(value, "offset sync value")
        upstream, downstream = v.int64(), v.int64()
        v.end()
        return cls(topic, partition, upstream, downstream)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Consumer group `group` had committed `upstream_offset` of the source's `topic`-`partition`, which is
    `downstream_offset` on the target. `topic` is the target's (remote) topic name."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _Writer().string(self.group).string(self.topic).int32(self.partition).bytes()

    def value(self) -> bytes:
        return (_Writer().int16(VERSION).int64(self.upstream_offset).int64(self.downstream_offset)
                .string(self.metadata).bytes())

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        k = _reader(key, "checkpoint key")
        group, topic, partition = k.string(), k.string(), k.int32()
        k.end()
        v = _reader(value, "checkpoint value")
        v.version()
        upstream, downstream, metadata = v.int64(), v.int64(), v.string()
        v.end()
        return cls(group, topic, partition, upstream, downstream, metadata)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Emitted on `source_alias` at `timestamp_ms` by the flow towards `target_alias`; replicated like any
    topic, it shows a flow is alive and lets clients discover the topology."""

    source_alias: str
    target_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _Writer().string(self.source_alias).string(self.target_alias).bytes()

    def value(self) -> bytes:
        return _Writer().int16(VERSION).int64(self.timestamp_ms).bytes()

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        k = _reader(key, "heartbeat key")
        source, target = k.string(), k.string()
        k.end()
        v = _reader(value, "heartbeat value")
        v.version()
        timestamp = v.int64()
        v.end()
        return cls(source, target, timestamp)
