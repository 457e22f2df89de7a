"""Produce (key 0): append record batches to partition logs.

Batches stay opaque: `record_batch.split_batches` checks each batch's header, sizes and CRC, and the log
assigns offsets by rewriting the base offset, without decompressing records. Each partition succeeds or fails
on its own, with Kafka's error code. With acks=0 no response is sent.

From v13 topics are named by id (KIP-516), before that by name.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.protocol.codec import CloseConnection, EncodedBody
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.produce_request import ProduceRequest, parse_produce_request
from moldau.protocol.produce_response import (
    FIRST_TOPIC_ID_VERSION,
    PartitionResponse,
    TopicResponse,
    encode_produce_response,
)
from moldau.protocol.record_batch import split_batches
from moldau.replication.replica_manager import HostedPartition
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api

_VALID_ACKS = (-1, 0, 1)


async def handle(ctx: RequestContext, request: ProduceRequest) -> EncodedBody | None:
    acks = request.acks
    topics = []
    appended: list[HostedPartition] = []
    for topic_data in request.topic_data:
        name, code = _topic_name(ctx, topic_data)
        results = [_produce_partition(ctx, name, code, acks, p, appended) for p in topic_data.partition_data]
        topics.append(TopicResponse(name=topic_data.name if ctx.version < FIRST_TOPIC_ID_VERSION else None,
                                    topic_id=getattr(topic_data, "topic_id", None), partitions=results))
    for hosted in appended:
        hosted.wake_waiters()
    if acks == 0:
        failed = [p.error_code for t in topics for p in t.partitions if p.error_code != ErrorCode.none.value]
        if failed:
            # The client expects no response; closing is the only way to tell it to refresh metadata (Kafka too).
            raise CloseConnection(f"acks=0 produce failed: {ErrorCode(failed[0]).name}")
        return None
    return EncodedBody(encode_produce_response(ctx.version, 0, topics))


def _topic_name(ctx: RequestContext, topic_data: Any) -> tuple[str | None, ErrorCode]:
    if ctx.version < FIRST_TOPIC_ID_VERSION:
        return topic_data.name, ErrorCode.none
    topic_id: uuid.UUID | None = topic_data.topic_id
    topic = ctx.broker.image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        return None, ErrorCode.unknown_topic_id
    return topic.name, ErrorCode.none


def _produce_partition(ctx: RequestContext, name: str | None, topic_error: ErrorCode, acks: int,
                       partition_data: Any, appended: list[HostedPartition]) -> PartitionResponse:
    index = partition_data.index
    try:
        if topic_error != ErrorCode.none or name is None:
            raise KafkaError(topic_error)
        if acks not in _VALID_ACKS:
            raise KafkaError(ErrorCode.invalid_required_acks, f"acks must be -1, 0 or 1, not {acks}")
        hosted = ctx.broker.replicas.leader_partition(name, index)
        records = partition_data.records
        if not records:
            raise KafkaError(ErrorCode.corrupt_message, "produce request carries no record batch")
        batches = split_batches(records)
        if any(header.is_transactional or header.is_control for header, _ in batches):
            raise KafkaError(ErrorCode.invalid_txn_state, "transactional produce is not supported yet")
        result = hosted.log.append(batches, hosted.leader_epoch)
    except KafkaError as exc:
        return PartitionResponse(index, exc.code.value, error_message=exc.message)
    if not result.duplicate:
        appended.append(hosted)
    return PartitionResponse(index, ErrorCode.none.value, result.first_offset, result.log_append_time_ms,
                             result.log_start_offset)


API = Api(key=0, name="Produce", min_version=3, max_version=13, handle=handle, decode=parse_produce_request)
