"""A direct parser for OffsetCommitRequest and a direct encoder for its response (v2-v10).

Consumers commit after every poll or every few seconds, each commit a request of its own, so what kio's generic
reader and writer cost (a type check of every field at run time, an object per field) is paid per commit. The
parser reads the common request (no tagged fields) into slotted objects with kio's attribute names; anything
else (tagged fields, a malformed body) returns None and the caller decodes with kio, so such requests get the
answers the generic path gives. Both directions are checked against kio for every version
(`tests/unit/protocol/test_offset_commit_codec.py`).

Layout (Kafka's OffsetCommit schema): group id, generation id or member epoch, member id, group instance id
(v7+), retention time (v2-v4), then per topic its name (v<10) or id (v10+) and per partition: index, committed
offset, committed leader epoch (v6+), metadata. The response: throttle time (v3+), then per topic its name or
id and per partition its index and error code. From v8 both are flexible.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.codec import DirectBody, InvalidRequest
from moldau.protocol.request_reader import RequestReader
from moldau.protocol.wire import I32, I64, ResponsePart, ResponseWriter

FIRST_FLEXIBLE_VERSION = 8
FIRST_TOPIC_ID_VERSION = 10
_INDEX_OFFSET = struct.Struct(">iq")
_INDEX_OFFSET_EPOCH = struct.Struct(">iqi")
_INDEX_ERROR = struct.Struct(">ih")


@dataclass(slots=True)
class OffsetCommitRequestPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None


@dataclass(slots=True)
class OffsetCommitRequestTopic:
    name: str | None  # versions before 10
    topic_id: uuid.UUID | None  # versions 10 and later
    partitions: list[OffsetCommitRequestPartition]


@dataclass(slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None
    topics: list[OffsetCommitRequestTopic]


def parse_offset_commit_request(frame: bytes | memoryview, pos: int, version: int) -> OffsetCommitRequest | None:
    """The body starting at `pos`, or None when it is not one this parser reads (decode it with kio then)."""
    view = memoryview(frame)
    if version >= FIRST_FLEXIBLE_VERSION:
        try:
            short = _parse_short_flexible(view, pos, version)
        except (struct.error, IndexError, UnicodeDecodeError, ValueError):
            short = None
        if short is not None:
            return short
    return _parse(view, pos, version)


def _parse(view: memoryview, pos: int, version: int) -> OffsetCommitRequest | None:
    reader = RequestReader(view, pos, flexible=version >= FIRST_FLEXIBLE_VERSION)
    try:
        group_id = reader.string()
        (generation,) = reader.fixed(I32)
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 7 else None
        if version <= 4:
            reader.fixed(I64)  # retention time: ignored, see the handler
        topics = [_topic(reader, version) for _ in range(reader.array_length())]
        reader.expect_no_tags()
        reader.expect_end()
    except (InvalidRequest, struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None
    return OffsetCommitRequest(group_id, generation, member_id, instance_id, topics)


def _parse_short_flexible(view: memoryview, pos: int, version: int) -> OffsetCommitRequest | None:
    """A flexible request whose lengths and counts are all one-byte varints (strings under 127 bytes, under 127
    topics and partitions: what consumers send), read inline; None for anything else, which `_parse` reads.

    The same fields as `_parse` without a method call per field: a commit's decoding is paid per commit. A length
    that runs past the body moves `pos` past it, so the next read fails (IndexError, struct.error) or the final
    length check does."""
    b = view[pos]
    if not 0 < b < 0x80:
        return None
    group_id = str(view[pos + 1 : pos + b], "utf-8")
    pos += b
    (generation,) = I32.unpack_from(view, pos)
    b = view[pos + 4]
    if not 0 < b < 0x80:
        return None
    member_id = str(view[pos + 5 : pos + 4 + b], "utf-8")
    pos += 4 + b
    b = view[pos]  # the group instance id, nullable
    if b >= 0x80:
        return None
    instance_id = str(view[pos + 1 : pos + b], "utf-8") if b else None
    pos += b or 1
    count = view[pos] - 1
    if not 0 <= count < 0x7F:
        return None
    pos += 1
    topics = []
    for _ in range(count):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if version >= FIRST_TOPIC_ID_VERSION:
            topic_id = uuid.UUID(bytes=bytes(view[pos : pos + 16]))
            pos += 16
        else:
            b = view[pos]
            if not 0 < b < 0x80:
                return None
            name = str(view[pos + 1 : pos + b], "utf-8")
            pos += b
        partition_count = view[pos] - 1
        if not 0 <= partition_count < 0x7F:
            return None
        pos += 1
        partitions = []
        for _ in range(partition_count):
            index, offset, epoch = _INDEX_OFFSET_EPOCH.unpack_from(view, pos)
            b = view[pos + 16]
            if b >= 0x80:
                return None
            metadata = str(view[pos + 17 : pos + 16 + b], "utf-8") if b else None
            pos += 16 + (b or 1)
            if view[pos] != 0:  # tagged fields: kio's
                return None
            pos += 1
            partitions.append(OffsetCommitRequestPartition(index, offset, epoch, metadata))
        if view[pos] != 0:
            return None
        pos += 1
        topics.append(OffsetCommitRequestTopic(name, topic_id, partitions))
    if view[pos] != 0 or pos + 1 != len(view):
        return None
    return OffsetCommitRequest(group_id, generation, member_id, instance_id, topics)


def _topic(reader: RequestReader, version: int) -> OffsetCommitRequestTopic:
    if version >= FIRST_TOPIC_ID_VERSION:
        name, topic_id = None, uuid.UUID(bytes=reader.take(16).tobytes())
    else:
        name, topic_id = reader.string(), None
    partitions = []
    for _ in range(reader.array_length()):
        index, offset = reader.fixed(_INDEX_OFFSET)
        epoch = reader.fixed(I32)[0] if version >= 6 else -1
        partitions.append(OffsetCommitRequestPartition(index, offset, epoch, reader.nullable_string()))
        reader.expect_no_tags()
    reader.expect_no_tags()
    return OffsetCommitRequestTopic(name, topic_id, partitions)


@dataclass(slots=True)
class OffsetCommitResponseTopic:
    name: str | None  # versions before 10
    topic_id: uuid.UUID | None  # versions 10 and later
    partitions: Sequence[tuple[int, int]]  # (partition index, error code)


@dataclass(slots=True)
class OffsetCommitResponse(DirectBody):
    throttle_time_ms: int
    topics: list[OffsetCommitResponseTopic]

    def encode(self, version: int) -> list[ResponsePart]:
        writer = ResponseWriter(flexible=version >= FIRST_FLEXIBLE_VERSION)
        if version >= 3:
            writer.out += I32.pack(self.throttle_time_ms)
        writer.array_length(len(self.topics))
        for topic in self.topics:
            if version >= FIRST_TOPIC_ID_VERSION:
                writer.out += (topic.topic_id or uuid.UUID(int=0)).bytes
            else:
                writer.string(topic.name or "")
            writer.array_length(len(topic.partitions))
            for index, error in topic.partitions:
                writer.out += _INDEX_ERROR.pack(index, error)
                writer.tags()
            writer.tags()
        writer.tags()
        return writer.finish()
