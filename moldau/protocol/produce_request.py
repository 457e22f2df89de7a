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
from moldau.protocol.request_reader import RequestReader as _Reader

FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13
_I32 = struct.Struct(">i")
_ACKS_TIMEOUT = struct.Struct(">hi")


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
