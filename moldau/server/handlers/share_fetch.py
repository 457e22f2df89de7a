"""ShareFetch (key 78): a share group member's acknowledgements, then records acquired for it (KIP-932).

The request runs in the member's share session on this broker (`moldau.share.sessions`): epoch 0 opens one with
the partitions named, a positive epoch continues it (partitions added, forgotten topics removed), -1 closes it
after applying the acknowledgements, releasing whatever the member still holds here. Acknowledgements
piggy-backed on the request are applied first (epoch 0 may carry none: INVALID_REQUEST); each partition's
answer carries their result in `acknowledge_error_code`.

Then up to `max_records` records are acquired across the session's partitions, and the whole stored batches
holding them are returned with the `acquired_records` ranges (and each range's delivery count); the consumer
keeps only the acquired offsets. When nothing can be acquired the request waits up to `max_wait_ms` for an
append to one of its partitions or for records released by someone else, a future completed by either, not a
sleep loop. Likewise it waits while fewer than `min_bytes` could be acquired (measured in the log from the first
acquirable offset of each partition); once records are acquired they are returned at once, since holding them
back would only run their locks down.

With `share.isolation.level=read_committed` records are acquired only below the last stable offset, and the
batches of aborted transactions and the transaction markers among them are archived as soon as they are acquired
(`moldau.share.isolation`): they are never handed to a member.

Errors per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TOPIC_OR_PARTITION; for the session: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import iter_batch_headers
from moldau.replication.replica_manager import HostedPartition
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, error_message, ms_from_timedelta
from moldau.server.handlers.share_common import (
    PartitionOutcome,
    acknowledge,
    leader_field,
    leader_hints,
    leader_of,
    led_partition,
)
from moldau.share.isolation import AbortedTxn, StoredBatch, undeliverable, without
from moldau.share.partition import AcquiredRange, SharePartition
from moldau.share.sessions import CLOSE_EPOCH, OPEN_EPOCH

DEFAULT_MAX_RECORDS = 500
Key = tuple[uuid.UUID, int]


@dataclass(slots=True)
class _Answer(PartitionOutcome):
    records: bytes = b""  # the response's records are not nullable
    acquired: list[AcquiredRange] = field(default_factory=list)
    acknowledged: bool = False


async def handle(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    acks = {(t.topic_id, p.partition_index): p.acknowledgement_batches
            for t in request.topics for p in t.partitions if p.acknowledgement_batches}
    if not group_id or not member_id:
        return _failed(ctx, ErrorCode.invalid_request, "group id and member id must be set")
    if epoch == OPEN_EPOCH and acks:
        return _failed(ctx, ErrorCode.invalid_request, "acknowledgements cannot open a share session")
    named = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in request.forgotten_topics_data for p in t.partitions]
    try:
        session = share.sessions.fetch(group_id, member_id, epoch, named, forgotten, share.now_ms(), ctx.peer)
    except KafkaError as exc:
        return _failed(ctx, exc.code, exc.message)
    answers: dict[Key, _Answer] = {}
    for (topic_id, partition), batches in acks.items():
        outcome = await acknowledge(ctx, group_id, member_id, topic_id, partition, batches)
        answers[(topic_id, partition)] = _Answer(ErrorCode.none, None, outcome.ack_error, outcome.ack_message,
                                                 outcome.leader, acknowledged=True)
    if epoch == CLOSE_EPOCH:
        share.sessions.close(group_id, member_id)
        share.release(group_id, member_id)
        return _response(ctx, answers)
    max_records = request.max_records if request.max_records > 0 else DEFAULT_MAX_RECORDS
    max_bytes = min(request.max_bytes, ctx.broker.fetch_max_bytes)  # as Fetch: fetch.max.bytes caps it
    min_bytes = min(request.min_bytes, max_bytes)
    deadline = ctx.broker.clock.monotonic_ms() + ms_from_timedelta(request.max_wait)
    while True:
        remaining = deadline - ctx.broker.clock.monotonic_ms()
        if (min_bytes > 1 and remaining > 0
                and await _acquirable_bytes(ctx, group_id, session.partitions, min_bytes) < min_bytes):
            await share.wait(_names(ctx, session.partitions), min(remaining, _until_next_lock_expiry(ctx)))
            continue
        fetched = await _acquire_all(ctx, group_id, member_id, sorted(session.partitions, key=str), max_records,
                                     max_bytes)
        for key, answer in fetched.items():
            if key in answers:
                answer.ack_error, answer.ack_message = answers[key].ack_error, answers[key].ack_message
            answers[key] = answer
        remaining = deadline - ctx.broker.clock.monotonic_ms()
        if any(a.acquired or a.error != ErrorCode.none for a in fetched.values()) or remaining <= 0:
            return _response(ctx, answers)
        await share.wait(_names(ctx, session.partitions), min(remaining, _until_next_lock_expiry(ctx)))


async def _acquire_all(ctx: RequestContext, group_id: str, member_id: str, partitions: list[Key], max_records: int,
                 max_bytes: int) -> dict[Key, _Answer]:
    out: dict[Key, _Answer] = {}
    left = max_records
    for topic_id, partition in partitions:
        try:
            name, hosted = led_partition(ctx, topic_id, partition)
        except KafkaError as exc:
            out[(topic_id, partition)] = _Answer(exc.code, exc.message)
            continue
        if left <= 0:
            continue
        try:
            answer = await _acquire(ctx, group_id, member_id, name, hosted, left, max_bytes)
        except KafkaError:
            continue  # the share coordinator cannot be reached yet: nothing to hand out from here this time
        left -= sum(r.last_offset - r.first_offset + 1 for r in answer.acquired)
        if answer.acquired:
            out[(topic_id, partition)] = answer
    return out


async def _acquire(ctx: RequestContext, group_id: str, member_id: str, topic: str, hosted: HostedPartition,
             max_records: int, max_bytes: int) -> _Answer:
    share = ctx.broker.share
    plog = hosted.log
    found = await share.share_partition(group_id, topic, hosted.partition, hosted.topic_id, hosted.leader_epoch,
                                        plog.log_start_offset, plog.high_watermark)
    key = (group_id, topic, hosted.partition)
    if found.expire(share.now_ms()):
        share.persist_later(key)
    answer = _Answer(leader=leader_of(ctx, hosted))
    while True:
        acquired = found.acquire(member_id, max_records, _readable_end(found, hosted), share.now_ms())
        if not acquired:
            return answer
        records = _read(hosted, acquired[0].first_offset, acquired[-1].last_offset, max_bytes)
        if found.settings.read_committed:
            skipped = _undeliverable(hosted, records)
            if found.archive_acquired(member_id, skipped):
                share.persist_later(key)
                acquired = without(acquired, skipped)
                if not acquired:
                    continue  # all of it was aborted or markers: what follows may be deliverable
        answer.acquired, answer.records = acquired, records
        return answer


def _readable_end(found: SharePartition, hosted: HostedPartition) -> int:
    """Where acquisition stops: the high watermark, or for read_committed the last stable offset (every
    transaction below it is decided)."""
    return hosted.log.last_stable_offset if found.settings.read_committed else hosted.log.high_watermark


def _undeliverable(hosted: HostedPartition, records: bytes) -> list[tuple[int, int]]:
    """The offset ranges of the read batches a read_committed member must not get."""
    headers = [h for _, h in iter_batch_headers(records, 0, len(records))]
    if not headers:
        return []
    aborted = hosted.log.aborted_transaction_entries(headers[0].base_offset, headers[-1].next_offset)
    return undeliverable(
        (StoredBatch(h.base_offset, h.last_offset, h.producer_id, h.is_transactional, h.is_control) for h in headers),
        (AbortedTxn(e.producer_id, e.first_offset, e.last_offset) for e in aborted))


async def _acquirable_bytes(ctx: RequestContext, group_id: str, partitions: set[Key], min_bytes: int) -> int:
    """About how many bytes a fetch could acquire now, counted up to `min_bytes` (from one segment per partition,
    so possibly fewer than there are); `min_bytes` when a partition has an error to answer at once."""
    share = ctx.broker.share
    total = 0
    for topic_id, partition in partitions:
        try:
            name, hosted = led_partition(ctx, topic_id, partition)
            plog = hosted.log
            found = await share.share_partition(group_id, name, partition, hosted.topic_id, hosted.leader_epoch,
                                                plog.log_start_offset, plog.high_watermark)
            if found.expire(share.now_ms()):
                share.persist_later((group_id, name, partition))
            start = found.first_acquirable(_readable_end(found, hosted))
            if start is not None:
                total += plog.read(start, min_bytes - total, True).size_bytes
        except KafkaError:
            return min_bytes
        if total >= min_bytes:
            break
    return total


def _read(hosted: HostedPartition, first: int, last: int, max_bytes: int) -> bytes:
    """The whole batches holding offsets first..last: every acquired record must reach the member, whatever
    `max_bytes` says, or it would stay locked to it until its lock expires."""
    plog = hosted.log
    chunks: list[bytes] = []
    offset = first
    while offset <= last:
        data = plog.read(offset, max(max_bytes, 1), True).read_bytes()
        if not data:
            break
        chunks.append(data)
        *_, (_, header) = iter_batch_headers(data, 0, len(data))
        offset = header.next_offset
    return b"".join(chunks)


def _names(ctx: RequestContext, partitions: set[Key]) -> list[tuple[str, int]]:
    image = ctx.broker.image
    return [(t.name, p) for topic_id, p in partitions if (t := image.topics_by_id.get(topic_id)) is not None]


def _until_next_lock_expiry(ctx: RequestContext) -> float:
    """Expired locks make records available without an append: wake up for the next one."""
    share = ctx.broker.share
    deadlines = [d for p in share.partitions.values() if (d := p.next_deadline_ms()) is not None]
    return max(1.0, min(deadlines) - share.now_ms()) if deadlines else float("inf")


def _failed(ctx: RequestContext, code: ErrorCode, message: str) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                acquisition_lock_timeout=_lock_timeout(ctx), responses=(), node_endpoints=())


def _lock_timeout(ctx: RequestContext) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ctx.broker.share.settings.partition.record_lock_duration_ms)


def _response(ctx: RequestContext, answers: dict[Key, _Answer]) -> Any:
    endpoints = leader_hints(ctx, answers)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), a in sorted(answers.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        acquired = tuple(make(ctx.nested("AcquiredRecords"), first_offset=r.first_offset, last_offset=r.last_offset,
                              delivery_count=r.delivery_count) for r in a.acquired)
        by_topic.setdefault(topic_id, []).append(make(
            ctx.nested("PartitionData"), partition_index=partition, error_code=a.error,
            error_message=error_message(a.error.name, a.message), acknowledge_error_code=a.ack_error,
            acknowledge_error_message=error_message(a.ack_error.name, a.ack_message),
            current_leader=leader_field(ctx, a), records=a.records, acquired_records=acquired))
    responses = tuple(make(ctx.nested("ShareFetchableTopicResponse"), topic_id=t, partitions=tuple(ps))
                      for t, ps in by_topic.items())
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                acquisition_lock_timeout=_lock_timeout(ctx), responses=responses, node_endpoints=endpoints)


API = Api(key=78, name="ShareFetch", min_version=1, max_version=2, handle=handle)
