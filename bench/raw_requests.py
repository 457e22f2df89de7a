"""Pre-encoded Produce and Fetch requests for the raw-protocol driver (``bench/raw_driver.py``).

Everything the driver sends is encoded here once, before a measurement: an uncompressed v2 record batch (built
by the same builder the coordinators use, so its CRC-32C is right and the broker's record walk accepts it),
wrapped in a Produce v9 request, or a Fetch v12 request at a given offset. A request is kept as the bytes after
its correlation id, so that sending one costs a 12-byte prefix (size, api key, version, correlation id) and a
vectored write, with no encoding in the driver's loop.

Responses are not decoded either: for a request naming one topic and one partition, the partition's error code
sits at a fixed position in the response, which ``error_position`` gives.
"""

from __future__ import annotations

import datetime
import io
import struct
import time
from dataclasses import dataclass
from typing import Any

from kio.schema.fetch.v12 import request as fetch_v12
from kio.schema.offset_commit.v8 import request as offset_commit_v8
from kio.schema.produce.v9 import request as produce_v9
from kio.serial import entity_writer

from moldau.coordinator.internal_topic import build_batch
from moldau.protocol.codec import make

PRODUCE_KEY, PRODUCE_VERSION = 0, 9
OFFSET_COMMIT_KEY, OFFSET_COMMIT_VERSION = 8, 8
FETCH_KEY, FETCH_VERSION = 1, 12
CLIENT_ID = b"raw-driver"
_PREFIX = struct.Struct(">ihhi")  # frame size, api key, api version, correlation id
_CORRELATION = struct.Struct(">i")
# Record overhead in an uncompressed v2 batch for a small record with no key and no headers (length, attributes,
# timestamp and offset deltas, key length, value length, header count): a handful of varint bytes.
_RECORD_OVERHEAD = 12
BATCH_HEADER_BYTES = 61


@dataclass(frozen=True, slots=True)
class Encoded:
    """One request without its frame size and correlation id: ``parts(cid)`` is what goes on the wire."""

    api_key: int
    version: int
    rest: bytes  # client id, header tagged fields, body

    def prefix(self, correlation_id: int) -> bytes:
        return _PREFIX.pack(8 + len(self.rest), self.api_key, self.version, correlation_id)

    @property
    def wire_bytes(self) -> int:
        return 12 + len(self.rest)


def record_batch(records: int, value_bytes: int) -> bytes:
    """An uncompressed v2 batch of ``records`` values of ``value_bytes`` bytes (no key, no producer id)."""
    value = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (value_bytes // 36 + 1))[:value_bytes]
    return build_batch([(b"", value)] * records, int(time.time() * 1000))


def records_for(batch_bytes: int, value_bytes: int) -> int:
    """How many records of ``value_bytes`` make a batch of about ``batch_bytes`` (at least one)."""
    return max(1, (batch_bytes - BATCH_HEADER_BYTES) // (value_bytes + _RECORD_OVERHEAD))


def _encode(request: Any) -> bytes:
    header = struct.pack(">h", len(CLIENT_ID)) + CLIENT_ID + b"\x00"  # client id, no header tagged fields
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    return header + body.getvalue()


def produce(topic: str, partition: int, batch: bytes, acks: int, timeout_ms: int = 30_000) -> Encoded:
    """Produce v9 of ``batch`` to one partition."""
    data = make(produce_v9.PartitionProduceData, index=partition, records=batch)
    request = make(produce_v9.ProduceRequest, transactional_id=None, acks=acks,
                   timeout=datetime.timedelta(milliseconds=timeout_ms),
                   topic_data=(make(produce_v9.TopicProduceData, name=topic, partition_data=(data,)),))
    return Encoded(PRODUCE_KEY, PRODUCE_VERSION, _encode(request))


def fetch(topic: str, partition: int, offset: int, max_bytes: int, max_wait_ms: int = 0) -> Encoded:
    """Fetch v12 (by topic name, no session) of up to ``max_bytes`` from one partition at ``offset``."""
    part = make(fetch_v12.FetchPartition, partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)
    request = make(fetch_v12.FetchRequest, cluster_id=None, replica_id=-1,
                   max_wait=datetime.timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
                   isolation_level=0, session_id=0, session_epoch=-1,
                   topics=(make(fetch_v12.FetchTopic, topic=topic, partitions=(part,)),),
                   forgotten_topics_data=(), rack_id="")
    return Encoded(FETCH_KEY, FETCH_VERSION, _encode(request))


def offset_commit(group: str, topic: str, partition: int, offset: int) -> Encoded:
    """OffsetCommit v8 of ``offset`` for one partition: a "simple" commit (generation -1, no member), as a tool or
    a consumer that assigns its partitions itself sends."""
    committed = make(offset_commit_v8.OffsetCommitRequestPartition, partition_index=partition, committed_offset=offset,
                     committed_leader_epoch=-1, committed_metadata="")
    request = make(offset_commit_v8.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=-1,
                   member_id="", group_instance_id=None,
                   topics=(make(offset_commit_v8.OffsetCommitRequestTopic, name=topic, partitions=(committed,)),))
    return Encoded(OFFSET_COMMIT_KEY, OFFSET_COMMIT_VERSION, _encode(request))


def error_position(api_key: int, topic: str) -> int:
    """Where the error code of the only partition sits in a response frame (after the size) to a request for one
    topic (a name under 127 bytes) and one partition."""
    name = 1 + len(topic.encode())  # compact string
    header = 4 + 1  # correlation id, tagged fields (flexible response header)
    if api_key == PRODUCE_KEY:
        return header + 1 + name + 1 + 4  # topics array, name, partitions array, index
    if api_key == OFFSET_COMMIT_KEY:
        return header + 4 + 1 + name + 1 + 4  # throttle, topics array, name, partitions array, partition index
    # throttle, error, session id, topics array, name, partitions array, partition index
    return header + 4 + 2 + 4 + 1 + name + 1 + 4


def correlation_of(frame: bytes | bytearray | memoryview) -> int:
    return int(_CORRELATION.unpack_from(frame)[0])
