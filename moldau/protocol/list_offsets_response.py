"""A direct encoder for ListOffsetsResponse.

A consumer group's offsets tool, or a monitor asking for the end of every partition, lists thousands of
partitions in one request: kio's generated encoder, which checks the type of every field at run time, took
25-35 µs a partition. This encoder covers every version the broker serves (1-11) and is checked byte for byte
against kio's for each of them (`tests/unit/protocol/test_list_offsets_response.py`).

Layout (Kafka's ListOffsetsResponse schema, from v1): throttle_time_ms (v2+); topics: name, partitions (index,
error code, timestamp, offset, leader epoch (v4+)). From v6 the message is flexible (compact lengths, an empty
tagged-field section after each struct).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.codec import DirectBody
from moldau.protocol.wire import I32, ResponsePart, array_length, string

FIRST_FLEXIBLE_VERSION = 6
_PARTITION_V1 = struct.Struct(">ihqq")  # index, error code, timestamp, offset
_PARTITION_V4 = struct.Struct(">ihqqi")  # ... and leader epoch


@dataclass(slots=True)
class ListOffsetsPartition:
    partition_index: int
    error_code: int
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(slots=True)
class ListOffsetsTopic:
    name: str
    partitions: Sequence[ListOffsetsPartition]


@dataclass(slots=True)
class ListOffsetsResponse(DirectBody):
    throttle_time_ms: int
    topics: Sequence[ListOffsetsTopic]

    def encode(self, version: int) -> list[ResponsePart]:
        return [encode_list_offsets_response(version, self)]


def encode_list_offsets_response(version: int, response: ListOffsetsResponse) -> bytes:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    tags = b"\x00" if flexible else b""
    out = bytearray()
    if version >= 2:
        out += I32.pack(response.throttle_time_ms)
    out += array_length(len(response.topics), flexible)
    for topic in response.topics:
        out += string(topic.name, flexible)
        out += array_length(len(topic.partitions), flexible)
        if version >= 4:
            for p in topic.partitions:
                out += _PARTITION_V4.pack(p.partition_index, p.error_code, p.timestamp, p.offset, p.leader_epoch)
                out += tags
        else:
            for p in topic.partitions:
                out += _PARTITION_V1.pack(p.partition_index, p.error_code, p.timestamp, p.offset)
        out += tags
    out += tags
    return bytes(out)
