"""A direct encoder for ProduceResponse.

Every produce request gets one, so its cost is per request: kio's generated encoder checks the type of every
field at run time and took about 40 µs for a one-partition response, a large share of a small request. This
encoder covers the versions the broker serves and is checked byte for byte against kio's for each of them
(`tests/unit/protocol/test_produce_response.py`).

Layout (Kafka's ProduceResponse schema): per topic its name (v<13) or id (v13+), per partition: index, error
code, base offset, log append time (v2+), log start offset (v5+), record errors (batch index, message) and
error message (v8+); then throttle_time_ms. From v9 the message is flexible (compact lengths, tagged-field
sections). From v10 a partition refused with NOT_LEADER_OR_FOLLOWER may name its current leader (tag 0) and the
response those leaders' addresses (tag 0), KIP-951 (`moldau.protocol.leader_hints`).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.protocol.leader_hints import NodeEndpoint, current_leader_field, node_endpoints_field
from moldau.protocol.wire import I32, ResponsePart, ResponseWriter, uvarint

FIRST_FLEXIBLE_VERSION = 9
FIRST_TOPIC_ID_VERSION = 13
FIRST_LEADER_HINT_VERSION = 10  # KIP-951
_CURRENT_LEADER_TAG = 0
_NODE_ENDPOINTS_TAG = 0
_PARTITION_FIXED = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_I64 = struct.Struct(">q")
# A flexible version's partition without record errors nor message: the fixed fields, log start offset, an empty
# compact array, a null compact string and an empty tagged-field section.
_PARTITION_PLAIN_FLEXIBLE = struct.Struct(">ihqqqBBB")


@dataclass(slots=True)
class PartitionResponse:
    partition: int
    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    # (index of the record in its batch, message): why a batch was refused, record by record (v8+).
    record_errors: list[tuple[int, str | None]] = field(default_factory=list)
    current_leader: tuple[int, int] | None = None  # (leader id, leader epoch), v10+, with NOT_LEADER_OR_FOLLOWER


@dataclass(slots=True)
class TopicResponse:
    name: str | None  # versions before 13
    topic_id: uuid.UUID | None  # versions 13 and later
    partitions: list[PartitionResponse]


def encode_produce_response(version: int, throttle_time_ms: int, topics: Sequence[TopicResponse],
                            node_endpoints: Sequence[NodeEndpoint] = ()) -> list[ResponsePart]:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    hints = version >= FIRST_LEADER_HINT_VERSION
    writer = ResponseWriter(flexible)
    writer.array_length(len(topics))
    for topic in topics:
        if version >= FIRST_TOPIC_ID_VERSION:
            writer.out += (topic.topic_id or uuid.UUID(int=0)).bytes
        else:
            writer.string(topic.name or "")
        writer.array_length(len(topic.partitions))
        for p in topic.partitions:
            if flexible and not p.record_errors and p.error_message is None and p.current_leader is None:
                # The common answer, in one pack: no record errors (compact array of 0), no message, no tags.
                writer.out += _PARTITION_PLAIN_FLEXIBLE.pack(p.partition, p.error_code, p.base_offset,
                                                             p.log_append_time_ms, p.log_start_offset, 1, 0, 0)
                continue
            writer.out += _PARTITION_FIXED.pack(p.partition, p.error_code, p.base_offset, p.log_append_time_ms)
            if version >= 5:
                writer.out += _I64.pack(p.log_start_offset)
            if version >= 8:
                writer.array_length(len(p.record_errors))
                for batch_index, message in p.record_errors:
                    writer.out += I32.pack(batch_index)
                    writer.nullable_string(message)
                    writer.tags()
                writer.nullable_string(p.error_message)
            if hints and p.current_leader is not None:
                writer.out += uvarint(1) + current_leader_field(_CURRENT_LEADER_TAG, p.current_leader)
            else:
                writer.tags()
        writer.tags()
    writer.out += I32.pack(throttle_time_ms)
    if hints and node_endpoints:
        writer.out += uvarint(1) + node_endpoints_field(_NODE_ENDPOINTS_TAG, node_endpoints)
    else:
        writer.tags()
    return writer.finish()
