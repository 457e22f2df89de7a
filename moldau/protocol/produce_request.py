"""A direct parser for ProduceRequest that leaves record batches where they arrived.

kio decodes the `records` field into a new bytes object, a copy of every produced byte. This parser returns
memoryviews into the request frame instead, so batches go from the receive buffer to the segment file with
no copy in between. It reads exactly the fields the broker serves (v3-v13), skips every tagged field (the
request defines none the broker needs), and raises `InvalidRequest` for anything malformed.
`tests/unit/protocol/test_produce_request.py` checks it against kio's decoder.

The objects mimic kio's attribute names (`acks`, `topic_data[].partition_data[].records`, ...), so the
Produce handler reads either.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from moldau.protocol.codec import InvalidRequest

FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")
_MAX_ARRAY_LENGTH = 1_000_000


@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class TopicProduceData:
    name: str | None
    topic_id: uuid.UUID | None
    partition_data: list[PartitionProduceData]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


def parse_produce_request(frame: bytes | memoryview, pos: int, version: int) -> ProduceRequest:
    """Parse the body starting at `pos` (after the request header)."""
    reader = _Reader(memoryview(frame), pos, flexible=version >= FIRST_FLEXIBLE_VERSION)
    try:
        transactional_id = reader.nullable_string()
        acks, timeout_ms = reader.fixed(_ACKS_TIMEOUT)
        topics = [_topic(reader, version) for _ in range(reader.array_length())]
        reader.skip_tags()
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidRequest(f"malformed ProduceRequest v{version}: {exc}") from exc
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


def _topic(reader: _Reader, version: int) -> TopicProduceData:
    if version >= FIRST_TOPIC_ID_VERSION:
        name, topic_id = None, uuid.UUID(bytes=reader.take(16).tobytes())
    else:
        name, topic_id = reader.string(), None
    partitions = []
    for _ in range(reader.array_length()):
        (index,) = reader.fixed(_I32)
        partitions.append(PartitionProduceData(index, reader.nullable_bytes()))
        reader.skip_tags()
    reader.skip_tags()
    return TopicProduceData(name, topic_id, partitions)


class _Reader:
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
        return values  # type: ignore[no-any-return]

    def uvarint(self) -> int:
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
