"""Produce (key 0): append record batches to partition logs.

Batches stay opaque: `record_batch.split_batches` checks each batch's header, sizes and CRC, and the log
assigns offsets by rewriting the base offset, without decompressing records. Each partition succeeds or fails
on its own, with Kafka's error code. With acks=0 no response is sent.

From v13 topics are named by id (KIP-516), before that by name.
"""

from __future__ import annotations

import uuid
from typing import Any

from moldau.protocol.codec import CloseConnection, make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import split_batches
from moldau.replication.replica_manager import HostedPartition
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, datetime_from_ms

_VALID_ACKS = (-1, 0, 1)


async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    topics = []
    appended: list[HostedPartition] = []
    for topic_data in request.topic_data:
        name, code = _topic_name(ctx, topic_data)
        results = tuple(
            _produce_partition(ctx, name, code, acks, p, appended) for p in topic_data.partition_data
        )
        topics.append(make(ctx.nested("TopicProduceResponse"), name=topic_data.name if ctx.version < 13 else None,
                           topic_id=getattr(topic_data, "topic_id", None), partition_responses=results))
    for hosted in appended:
        hosted.wake_waiters()
    if acks == 0:
        failed = [p.error_code for t in topics for p in t.partition_responses if p.error_code != ErrorCode.none]
        if failed:
            # The client expects no response; closing is the only way to tell it to refresh metadata (Kafka too).
            raise CloseConnection(f"acks=0 produce failed: {failed[0].name}")
        return None
    return make(ctx.schema.response_type, responses=tuple(topics), throttle_time=NO_THROTTLE, node_endpoints=())


def _topic_name(ctx: RequestContext, topic_data: Any) -> tuple[str | None, ErrorCode]:
    if ctx.version < 13:
        return topic_data.name, ErrorCode.none
    topic_id: uuid.UUID | None = topic_data.topic_id
    topic = ctx.broker.image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        return None, ErrorCode.unknown_topic_id
    return topic.name, ErrorCode.none


def _produce_partition(ctx: RequestContext, name: str | None, topic_error: ErrorCode, acks: int,
                       partition_data: Any, appended: list[HostedPartition]) -> Any:
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
        return _partition_response(ctx, index, exc.code, exc.message)
    if not result.duplicate:
        appended.append(hosted)
    return _partition_response(ctx, index, ErrorCode.none, None, result.first_offset,
                               result.log_append_time_ms, result.log_start_offset)


def _partition_response(ctx: RequestContext, index: int, code: ErrorCode, message: str | None,
                        base_offset: int = -1, log_append_time_ms: int = -1, log_start_offset: int = -1) -> Any:
    return make(ctx.nested("PartitionProduceResponse"), index=index, error_code=code, base_offset=base_offset,
                log_append_time=datetime_from_ms(log_append_time_ms), log_start_offset=log_start_offset,
                record_errors=(), error_message=message)


API = Api(key=0, name="Produce", min_version=3, max_version=13, handle=handle)
