"""ListOffsets (key 2): find offsets by time, or the log's earliest and latest.

Special timestamps: -1 latest (the high watermark), -2 earliest (log start offset), -3 the record with the
largest timestamp (KIP-734), -4 earliest local (KIP-405; all data is local, so the log start offset),
-5 latest tiered (KIP-1005; nothing is tiered, so "not found"), and from v11 -6 earliest pending upload (KIP-1023;
nothing is ever uploaded to remote storage, so "not found" as well).

Isolation (v2+, KIP-98): for read_committed (`isolation_level` 1) "latest" is the last stable offset, and, as
in Kafka, an offset found by timestamp at or beyond what the consumer may read (the last stable offset for
read_committed, else the high watermark) answers "not found".
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.list_offsets_response import ListOffsetsPartition, ListOffsetsResponse, ListOffsetsTopic
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import reads_committed

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6


async def handle(ctx: RequestContext, request: Any) -> ListOffsetsResponse:
    read_committed = reads_committed(request)
    topics = [ListOffsetsTopic(t.name, [_partition(ctx, t.name, p, read_committed) for p in t.partitions])
              for t in request.topics]
    return ListOffsetsResponse(0, topics)


def _partition(ctx: RequestContext, topic: str, request: Any, read_committed: bool) -> ListOffsetsPartition:
    index = request.partition_index
    try:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            raise KafkaError(ErrorCode.topic_authorization_failed, f"{ctx.principal} may not describe {topic}")
        replicas = ctx.broker.replicas
        hosted = replicas.leader_partition(topic, index)
        replicas.check_leader_epoch(hosted, getattr(request, "current_leader_epoch", -1))
        offset, timestamp = _lookup(hosted.log, request.timestamp, read_committed)
    except KafkaError as exc:
        return ListOffsetsPartition(index, exc.code)
    return ListOffsetsPartition(index, ErrorCode.none, timestamp, offset, hosted.leader_epoch)


def _lookup(plog: Any, timestamp: int, read_committed: bool) -> tuple[int, int]:
    fetchable_end = plog.last_stable_offset if read_committed else plog.high_watermark
    if timestamp == LATEST:
        return fetchable_end, -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    elif timestamp < 0:
        raise KafkaError(ErrorCode.invalid_request, f"unknown special timestamp {timestamp}")
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable_end:
        return -1, -1
    return found[0], found[1]


API = Api(key=2, name="ListOffsets", min_version=1, max_version=11, handle=handle)
