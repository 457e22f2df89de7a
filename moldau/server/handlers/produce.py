"""Produce (key 0): append record batches to partition logs.

Batches stay opaque: `record_batch.split_batches` checks each batch's header, sizes and CRC, and the log
assigns offsets by rewriting the base offset, without decompressing records. Each partition succeeds or fails
on its own, with Kafka's error code. With acks=0 no response is sent.

acks=all (-1): refused up front with NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas;
otherwise the answer waits (up to the request's timeout) until every ISR member has the records, that is until
the high watermark passes them (`ReplicaManager.wait_for_acks`). Partitions of one request wait together.

From v13 topics are named by id (KIP-516), before that by name.
"""

from __future__ import annotations

import asyncio
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
    appended: list[tuple[HostedPartition, PartitionResponse, int]] = []
    for topic_data in request.topic_data:
        name, code = _topic_name(ctx, topic_data)
        results = [_produce_partition(ctx, name, code, acks, p, appended) for p in topic_data.partition_data]
        topics.append(TopicResponse(name=topic_data.name if ctx.version < FIRST_TOPIC_ID_VERSION else None,
                                    topic_id=getattr(topic_data, "topic_id", None), partitions=results))
    if acks == 0:
        failed = [p.error_code for t in topics for p in t.partitions if p.error_code != ErrorCode.none.value]
        if failed:
            # The client expects no response; closing is the only way to tell it to refresh metadata (Kafka too).
            raise CloseConnection(f"acks=0 produce failed: {ErrorCode(failed[0]).name}")
        return None
    if acks == -1 and appended:
        await _wait_for_acks(ctx, appended, request.timeout_ms)
    return EncodedBody(encode_produce_response(ctx.version, 0, topics))


async def _wait_for_acks(ctx: RequestContext, appended: list[tuple[HostedPartition, PartitionResponse, int]],
                         timeout_ms: int) -> None:
    replicas = ctx.broker.replicas
    codes = await asyncio.gather(*(replicas.wait_for_acks(hosted, end, timeout_ms) for hosted, _, end in appended))
    for (_, response, _), code in zip(appended, codes, strict=True):
        if code == ErrorCode.not_leader_or_follower:
            # The records are written and may survive on the new leader. NOT_LEADER_OR_FOLLOWER would tell the
            # client they were not (librdkafka then re-sends them under a new producer epoch, which no broker can
            # deduplicate); a timeout says "possibly written", and the retry is deduplicated by sequence number.
            code = ErrorCode.request_timed_out
            response.error_message = "leadership moved before the write was replicated; it may have been kept"
        elif code != ErrorCode.none:
            response.error_message = _ACK_ERRORS.get(code)
        if code != ErrorCode.none:
            response.error_code, response.base_offset = code.value, -1


_ACK_ERRORS = {
    ErrorCode.not_enough_replicas_after_append: "written, but the ISR shrank below min.insync.replicas",
    ErrorCode.request_timed_out: "not replicated to every in-sync replica within the request timeout",
}


def _topic_name(ctx: RequestContext, topic_data: Any) -> tuple[str | None, ErrorCode]:
    if ctx.version < FIRST_TOPIC_ID_VERSION:
        return topic_data.name, ErrorCode.none
    topic_id: uuid.UUID | None = topic_data.topic_id
    topic = ctx.broker.image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        return None, ErrorCode.unknown_topic_id
    return topic.name, ErrorCode.none


def _produce_partition(ctx: RequestContext, name: str | None, topic_error: ErrorCode, acks: int,
                       partition_data: Any, appended: list[tuple[HostedPartition, PartitionResponse, int]]
                       ) -> PartitionResponse:
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
        result = ctx.broker.replicas.append_as_leader(hosted, batches, acks)
    except KafkaError as exc:
        return PartitionResponse(index, exc.code.value, error_message=exc.message)
    response = PartitionResponse(index, ErrorCode.none.value, result.first_offset, result.log_append_time_ms,
                                 result.log_start_offset)
    # A duplicate is waited for too: its original may not be replicated yet.
    appended.append((hosted, response, result.last_offset + 1))
    return response


API = Api(key=0, name="Produce", min_version=3, max_version=13, handle=handle, decode=parse_produce_request)
