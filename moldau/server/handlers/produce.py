"""Produce (key 0): append record batches to partition logs.

`record_batch.split_batches` checks each batch's header, sizes and CRC; the log then walks every record
(`moldau.protocol.record_validation`, as Kafka's LogValidator) and refuses a batch with CORRUPT_MESSAGE,
INVALID_RECORD or INVALID_TIMESTAMP and its per-record `record_errors`, appending nothing of it. Valid
batches are stored as they came: offsets are assigned by rewriting the base offset, records are not
re-encoded, unless the topic's `compression.type` names a codec other than the batch's: then its records are
recompressed in that codec first (`moldau.protocol.recompression`). Each partition succeeds or fails on its own,
with Kafka's error code. With acks=0 no response is sent.

acks=all (-1): refused up front with NOT_ENOUGH_REPLICAS when the ISR is smaller than min.insync.replicas;
otherwise the answer waits (up to the request's timeout) until every ISR member has the records, that is until
the high watermark passes them (`ReplicaManager.wait_for_acks`). Partitions of one request wait together. The
wait is the response's (`DeferredBody`), not the connection's: the producer's next requests on the connection
are appended meanwhile, and the responses go out in request order.

Transactional batches need the request's transactional id. Before a producer's first transactional write to a
partition, the transaction coordinator is asked whether the partition is in the producer's open transaction
(KIP-890, `TxnLinks.verify`); a "no" is INVALID_TXN_STATE, so a write retried after its transaction ended cannot
slip into the next one. The log keeps a verification guard for the time of the question: a marker written meanwhile
voids it and the write is refused. Control batches from clients are refused by the log (INVALID_RECORD).

Topics with Confluent's broker-side schema validation on (`confluent.key|value.schema.validation`) have each batch's
records also checked against the schema registry (`moldau.registry.produce_validation`, run by the log after its
record walk): a failing batch is refused with INVALID_RECORD and its `record_errors`.

From v13 topics are named by id (KIP-516), before that by name.

With an authorizer, each topic needs WRITE (else TOPIC_AUTHORIZATION_FAILED for its partitions) and a
transactional produce WRITE on its transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for all).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from moldau.protocol.codec import CloseConnection, DeferredBody, EncodedBody
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.leader_hints import NodeEndpoint
from moldau.protocol.produce_request import ProduceRequest, parse_produce_request
from moldau.protocol.produce_response import (
    FIRST_LEADER_HINT_VERSION,
    FIRST_TOPIC_ID_VERSION,
    PartitionResponse,
    TopicResponse,
    encode_produce_response,
)
from moldau.protocol.recompression import recompress
from moldau.protocol.record_batch import BatchHeader, split_batches
from moldau.protocol.record_validation import RecordErrors
from moldau.registry.produce_validation import UnknownSchemaIds, records_check, schema_validation
from moldau.replication.replica_manager import HostedPartition
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.quotas import NO_QUOTA, PRODUCER_BYTE_RATE
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.leader_hints import PRODUCE_ERRORS, add_leader_hints

_VALID_ACKS = (-1, 0, 1)
Appended = list[tuple[HostedPartition, PartitionResponse, int]]


@dataclass(slots=True)
class _Pending:
    """A partition whose append waits: for the transaction coordinator's KIP-890 answer (`verify`), or for this
    broker's registry to catch up with schema ids its records use that it has not replayed yet (`schema_ids`)."""

    hosted: HostedPartition
    batches: list[tuple[BatchHeader, memoryview]]
    response: PartitionResponse
    guard: object | None
    verify: bool = True
    schema_ids: frozenset[int] = frozenset()


async def handle(ctx: RequestContext, request: ProduceRequest) -> EncodedBody | DeferredBody | None:
    acks = request.acks
    topics = []
    names: list[str | None] = []
    appended: Appended = []
    pending: list[_Pending] = []
    txn_code = _authorize_transactional_id(ctx, request)
    for topic_data in request.topic_data:
        name, code = _topic_name(ctx, topic_data)
        if code == ErrorCode.none and name is not None:
            code = txn_code if txn_code != ErrorCode.none else _authorize_topic(ctx, name)
        results = [_produce_partition(ctx, name, code, request, p, appended, pending)
                   for p in topic_data.partition_data]
        names.append(name)
        topics.append(TopicResponse(name=topic_data.name if ctx.version < FIRST_TOPIC_ID_VERSION else None,
                                    topic_id=getattr(topic_data, "topic_id", None), partitions=results))
    if pending:
        await asyncio.gather(*(_complete(ctx, request, p, appended) for p in pending))
    endpoints = _leader_hints(ctx, names, topics) if ctx.version >= FIRST_LEADER_HINT_VERSION else []
    # Client quotas: the produced bytes count against producer_byte_rate (dispatch mutes the connection).
    throttle_ms = 0 if ctx.quota is NO_QUOTA else ctx.quota.record(PRODUCER_BYTE_RATE, sum(
        len(p.records) for t in request.topic_data for p in t.partition_data if p.records is not None))
    if acks == 0:
        failed = [p.error_code for t in topics for p in t.partitions if p.error_code != ErrorCode.none.value]
        if failed:
            # The client expects no response; closing is the only way to tell it to refresh metadata (Kafka too).
            raise CloseConnection(f"acks=0 produce failed: {ErrorCode(failed[0]).name}")
        return None
    if acks == -1 and appended:
        codes = [ack for hosted, _, end in appended if (ack := hosted.acks_now(end)) is not None]
        if len(codes) < len(appended):
            # Answered once the followers have the records; the connection serves its next requests meanwhile.
            return DeferredBody(_answer_after_acks(ctx, appended, request.timeout_ms, throttle_ms, topics,
                                                   endpoints))
        # Every partition answers at once (a single replica, say): no task, the answer written as acks=1's is.
        _set_ack_codes(appended, codes)
    return EncodedBody(encode_produce_response(ctx.version, throttle_ms, topics, endpoints))


def _leader_hints(ctx: RequestContext, names: list[str | None], topics: list[TopicResponse]) -> list[NodeEndpoint]:
    """KIP-951: partitions refused with NOT_LEADER_OR_FOLLOWER name their leader; the leaders' addresses."""
    for topic in topics:  # looked at for every request: plain loops, no list unless a partition was refused
        for p in topic.partitions:
            if p.error_code in PRODUCE_ERRORS:
                return add_leader_hints(ctx, [(name, q) for name, t in zip(names, topics, strict=True)
                                              for q in t.partitions if q.error_code in PRODUCE_ERRORS])
    return []


async def _answer_after_acks(ctx: RequestContext, appended: Appended, timeout_ms: int, throttle_ms: int,
                             topics: list[TopicResponse], endpoints: list[NodeEndpoint]) -> EncodedBody:
    await _wait_for_acks(ctx, appended, timeout_ms)
    return EncodedBody(encode_produce_response(ctx.version, throttle_ms, topics, endpoints))


async def _wait_for_acks(ctx: RequestContext, appended: list[tuple[HostedPartition, PartitionResponse, int]],
                         timeout_ms: int) -> None:
    replicas = ctx.broker.replicas
    if len(appended) == 1:  # the usual case: awaited here, without a task and a gathering future around it
        hosted, _, end = appended[0]
        codes = [await replicas.wait_for_acks(hosted, end, timeout_ms)]
    else:
        codes = await asyncio.gather(*(replicas.wait_for_acks(hosted, end, timeout_ms)
                                       for hosted, _, end in appended))
    _set_ack_codes(appended, codes)


def _set_ack_codes(appended: Appended, codes: list[ErrorCode]) -> None:
    """Put each partition's acks=all outcome in its response."""
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


def _authorize_transactional_id(ctx: RequestContext, request: ProduceRequest) -> ErrorCode:
    """A transactional produce needs WRITE on its transactional id; every partition fails without it."""
    txn_id = request.transactional_id
    if txn_id is not None and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
        return ErrorCode.transactional_id_authorization_failed
    return ErrorCode.none


def _authorize_topic(ctx: RequestContext, name: str) -> ErrorCode:
    if ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name):
        return ErrorCode.none
    return ErrorCode.topic_authorization_failed


def _topic_name(ctx: RequestContext, topic_data: Any) -> tuple[str | None, ErrorCode]:
    if ctx.version < FIRST_TOPIC_ID_VERSION:
        return topic_data.name, ErrorCode.none
    topic_id: uuid.UUID | None = topic_data.topic_id
    topic = ctx.broker.image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        return None, ErrorCode.unknown_topic_id
    return topic.name, ErrorCode.none


def _produce_partition(ctx: RequestContext, name: str | None, topic_error: ErrorCode, request: ProduceRequest,
                       partition_data: Any, appended: Appended, pending: list[_Pending]) -> PartitionResponse:
    index = partition_data.index
    acks = request.acks
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
        first = batches[0][0]
        if first.is_transactional:
            if request.transactional_id is None:
                raise KafkaError(ErrorCode.invalid_txn_state, "transactional records need a transactional id")
            if hosted.log.needs_verification(first):
                response = PartitionResponse(index, ErrorCode.none.value)
                pending.append(_Pending(hosted, batches, response, hosted.log.verification_guard(first.producer_id)))
                return response
        return _append(ctx, hosted, batches, PartitionResponse(index, ErrorCode.none.value), acks, appended)
    except UnknownSchemaIds as exc:  # registered through another broker a moment ago? Ask again once caught up.
        response = PartitionResponse(index, ErrorCode.none.value)
        pending.append(_Pending(hosted, batches, response, None, verify=False, schema_ids=exc.schema_ids))
        return response
    except RecordErrors as exc:
        return PartitionResponse(index, exc.code.value, error_message=exc.message,
                                 record_errors=list(exc.record_errors))
    except KafkaError as exc:
        return PartitionResponse(index, exc.code.value, error_message=exc.message)


def _append(ctx: RequestContext, hosted: HostedPartition, batches: list[tuple[BatchHeader, memoryview]],
            response: PartitionResponse, acks: int, appended: Appended, guard: object | None = None
            ) -> PartitionResponse:
    """Append and fill in `response`. Raises KafkaError (RecordErrors for records that do not decompress)."""
    # The topic's compression.type: only batches in another codec are rewritten; "producer" costs nothing.
    batches = recompress(batches, hosted.log.config.compression) or batches
    schemas = schema_validation(hosted.log.config)  # confluent.key|value.schema.validation, checked by the log
    check = None if schemas is None else records_check(hosted.topic, schemas, ctx.broker.schema_lookup)
    result = ctx.broker.replicas.append_as_leader(hosted, batches, acks, guard, check)
    nbytes = 0
    for _, data in batches:
        nbytes += len(data)
    ctx.broker.counters.produced(hosted.topic, result.last_offset - result.first_offset + 1, nbytes)
    response.base_offset, response.log_append_time_ms = result.first_offset, result.log_append_time_ms
    response.log_start_offset = result.log_start_offset
    # A duplicate is waited for too: its original may not be replicated yet.
    appended.append((hosted, response, result.last_offset + 1))
    return response


async def _complete(ctx: RequestContext, request: ProduceRequest, pending: _Pending, appended: Appended) -> None:
    response = pending.response
    try:
        if pending.verify:
            await _verify(ctx, request, pending)
        if pending.schema_ids:
            await ctx.broker.catch_up_schemas(pending.schema_ids)
        try:
            _append_if_leader(ctx, request, pending, appended)
        except UnknownSchemaIds as exc:
            if pending.schema_ids:
                raise  # caught up once already: the ids are unknown
            await ctx.broker.catch_up_schemas(exc.schema_ids)
            _append_if_leader(ctx, request, pending, appended)
    except KafkaError as exc:
        response.error_code, response.error_message = exc.code.value, exc.message
        if isinstance(exc, RecordErrors):
            response.record_errors = list(exc.record_errors)


async def _verify(ctx: RequestContext, request: ProduceRequest, pending: _Pending) -> None:
    """Raise KafkaError unless the transaction coordinator confirms the partition is in the open transaction."""
    hosted, header = pending.hosted, pending.batches[0][0]
    assert request.transactional_id is not None
    code = await ctx.broker.txn_links.verify(request.transactional_id, header.producer_id, header.producer_epoch,
                                             (hosted.topic, hosted.partition))
    if code != ErrorCode.none:
        raise KafkaError(code, "the partition is not part of the producer's open transaction"
                         if code == ErrorCode.invalid_txn_state else "")


def _append_if_leader(ctx: RequestContext, request: ProduceRequest, pending: _Pending, appended: Appended) -> None:
    # Leadership may have moved while the coordinator or the registry answered.
    hosted = pending.hosted
    if ctx.broker.replicas.leader_partition(hosted.topic, hosted.partition) is not hosted:
        raise KafkaError(ErrorCode.not_leader_or_follower)
    _append(ctx, hosted, pending.batches, pending.response, request.acks, appended, pending.guard)


API = Api(key=0, name="Produce", min_version=3, max_version=13, handle=handle, decode=parse_produce_request)
