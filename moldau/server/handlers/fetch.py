"""Fetch (key 1): read record batches from partition logs, waiting for data when asked to.

The response holds whole stored batches, byte for byte as they are on disk. Limits: `max_bytes` for the
response (lowered to the broker's `fetch.max.bytes`, as Kafka does) and `partition_max_bytes` per partition,
except that the first partition with data always gets at least one whole batch, so a consumer can never be stuck
behind a batch larger than its limits (as in Kafka).

Long poll: when fewer than `min_bytes` are available, the request waits up to `max_wait_ms` for more to read in
any of its partitions, then reads again: a consumer for the high watermark to move, a follower for an append.
Waiting is a future completed by the append or the high watermark advance, not a sleep loop.

Followers fetch with their broker id (`replica_state.replica_id` from v15, `replica_id` before): they read up to
the log end rather than the high watermark, their fetch offset reports their position to the replica manager
(which moves the high watermark and the ISR), and a follower whose last fetched epoch ends earlier in this log
is told where to truncate (`diverging_epoch`, KIP-320) instead of getting records.

Fetch from the closest replica (KIP-392): from v11 a consumer may fetch from a follower, which serves it up to its
own high watermark. With `replica.selector.class` set to the rack-aware selector, the leader answers a consumer
whose rack (`rack_id`, the client's `client.rack`) holds an in-sync follower with that follower's id
(`preferred_read_replica`) and no records; the consumer then fetches there. Followers then also get each high
watermark advance of that partition at once (`moldau.replication.replica_selector`, docs/replication.md).

Isolation (KIP-98): a read_committed consumer (`isolation_level` 1) reads up to the last stable offset and
gets the aborted transactions overlapping what it fetched (producer id, first offset), so it can drop their
records; read_uncommitted consumers read up to the high watermark and get none (null). Every partition answer
carries the last stable offset.

Fetch sessions (KIP-227, `moldau.server.fetch_sessions`): a full fetch with session epoch 0 makes a session in the
broker's cache when it has room, and its response carries the session's id. Incremental fetches of the session list
only the partitions whose position changed (and forget those no longer fetched); they read every partition of the
session, wait on every one of them, and answer only those with records, an error, a diverging epoch or a high
watermark, last stable offset or log start offset other than the last one sent. A session error (unknown id, wrong
epoch) is answered at top level with no partitions, and the fetcher starts over with a full fetch.

Replication quotas (KIP-73, `moldau.replication.throttle`): a follower out of the ISR fetching a partition whose
`leader.replication.throttled.replicas` names this broker gets no records for it while the broker's
`leader.replication.throttled.rate` is exceeded; what such followers are sent counts against that rate.

Zero-copy: on a connection that sends files (`RequestContext.sends_files`: a plaintext listener, with
`fetch.zero.copy.enable` on), a partition's records of at least `SENDFILE_MIN_BYTES` are answered as
`FileRegion`s of the segment files, which the connection sends with sendfile; the bytes never enter the process.
Smaller reads, read_committed consumers (whose aborted transactions are looked up from the batches read) and TLS
connections get the bytes, read with pread as before.

With an authorizer, a consumer needs READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions), a
follower CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.protocol.codec import EncodedBody
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.fetch_metadata import FINAL_EPOCH, INVALID_SESSION_ID
from moldau.protocol.fetch_response import (
    FIRST_FLEXIBLE_VERSION,
    FIRST_TOPIC_ID_VERSION,
    PartitionResult,
    TopicResult,
    encode_fetch_response,
)
from moldau.protocol.record_batch import iter_batch_headers
from moldau.protocol.wire import FileRegion
from moldau.replication.leader_state import diverging_epoch
from moldau.replication.replica_manager import HostedPartition, TopicPartition
from moldau.replication.replica_selector import RACK_AWARE_SELECTOR
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.security.quotas import CONSUMER_BYTE_RATE
from moldau.server.context import RequestContext
from moldau.server.fetch_sessions import (
    CachedPartition,
    FetchSession,
    PartitionKey,
    SessionStart,
)
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import ms_from_timedelta, reads_committed
from moldau.server.handlers.leader_hints import FETCH_ERRORS, add_leader_hints
from moldau.storage.log import PartitionLog
from moldau.storage.log_common import ReadResult

# Below this, one pread and a copy cost less than the sendfile path (measured in docs/benchmarks.md: at 128 KiB
# per fetch both cost the same broker CPU per GB).
SENDFILE_MIN_BYTES = 128 * 1024

Records = bytes | tuple[FileRegion, ...]


@dataclass(slots=True)
class _PartitionRead:
    topic_key: Any  # name (v < 13) or topic id (v13+), echoed back
    partition: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: Records | None = None
    diverging_epoch: tuple[int, int] | None = None
    last_stable_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    throttled: bool = False  # a follower's read held to the leader's replication quota

    @property
    def cannot_wait(self) -> bool:
        """An error, a diverging epoch or a replica to read from instead: the fetcher must hear of it at once."""
        return self.error != ErrorCode.none or self.diverging_epoch is not None or self.preferred_read_replica >= 0


def _no_records(key: Any, partition: int, plog: PartitionLog, preferred_read_replica: int = -1) -> _PartitionRead:
    """A partition answered without records, with the log's offsets."""
    return _PartitionRead(key, partition, ErrorCode.none, plog.high_watermark, plog.log_start_offset, b"", None,
                          plog.last_stable_offset, preferred_read_replica=preferred_read_replica)


@dataclass(frozen=True, slots=True)
class _Fetcher:
    """Who fetches: a follower (`replica_id` >= 0, at broker epoch `replica_epoch`) or a consumer (-1), which
    from v11 (KIP-392) says its rack and may read from a follower."""

    replica_id: int
    replica_epoch: int
    read_committed: bool
    client_rack: str
    may_read_followers: bool
    max_bytes: int  # the request's, at most fetch.max.bytes
    min_bytes: int  # the request's, at most max_bytes


    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


_SESSIONLESS = SessionStart()


async def handle(ctx: RequestContext, request: Any) -> Any:
    start = _session_start(ctx, request)
    if start.error != ErrorCode.none:
        return _response(ctx, start.error, [])
    fetcher = _fetcher(ctx, request)
    replica_id = fetcher.replica_id
    session = start.session
    if session is not None:
        session.apply(_listed(ctx, request), _forgotten(ctx, request))
        wanted = _session_partitions(ctx, session)
    else:
        wanted = _wanted_partitions(ctx, request)
    refused_names = _refused_topics(ctx, wanted, replica_id)
    refused = {key for name, _, key in wanted if name in refused_names}
    if refused:
        wanted = [(None if name in refused_names else name, p, key) for name, p, key in wanted]
    max_wait_ms = ms_from_timedelta(request.max_wait)
    deadline = ctx.broker.clock.monotonic_ms() + max_wait_ms
    while True:
        reads, total_bytes = _read_all(ctx, request, wanted, fetcher, refused)
        remaining_ms = deadline - ctx.broker.clock.monotonic_ms()
        if (total_bytes >= fetcher.min_bytes or remaining_ms <= 0 or _answers_now(reads) or ctx.broker.closing
                or _follower_lacks_high_watermark(ctx, fetcher, session, wanted, reads)):
            _count_bytes_out(ctx, wanted, reads, replica_id >= 0)
            session_id = 0
            if session is not None:
                reads = _changed_only(session, wanted, reads)
                session_id = session.id
            elif start.create:
                session_id = _create_session(ctx, wanted, reads, replica_id >= 0)
            return _response(ctx, ErrorCode.none, reads, replica_id < 0, session_id)
        keys: list[TopicPartition] = [(name, p.partition) for name, p, _ in wanted if name is not None]
        await ctx.broker.replicas.wait_for_data(keys, remaining_ms, replica=replica_id >= 0)


def _count_bytes_out(ctx: RequestContext, wanted: list[tuple[str | None, Any, Any]], reads: list[_PartitionRead],
                     replica: bool) -> None:
    """BytesOut (consumers) or ReplicationBytesOut (followers) per topic; `reads` line up with `wanted`."""
    counters = ctx.broker.counters
    throttled_bytes = 0
    for (name, _, _), read in zip(wanted, reads, strict=True):
        if name is not None and read.records:
            size = _size(read.records)
            counters.fetched(name, size, replica)
            throttled_bytes += size if read.throttled else 0
    if throttled_bytes:
        ctx.broker.replicas.quotas.leader.record(throttled_bytes, ctx.broker.clock.monotonic_ms())


def _session_start(ctx: RequestContext, request: Any) -> SessionStart:
    """What the request's session id and epoch ask for; requests before v7 have neither (sessionless)."""
    if ctx.version < 7 or (request.session_id == INVALID_SESSION_ID and request.session_epoch == FINAL_EPOCH):
        return _SESSIONLESS
    return ctx.broker.fetch_sessions.begin(request.session_id, request.session_epoch,
                                           ctx.version >= FIRST_TOPIC_ID_VERSION, ctx.broker.clock.monotonic_ms())


def _listed(ctx: RequestContext, request: Any) -> list[CachedPartition]:
    """The partitions an incremental request adds to its session or moves."""
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    return [CachedPartition.from_request(topic.topic_id if by_id else topic.topic, p)
            for topic in request.topics for p in topic.partitions]


def _forgotten(ctx: RequestContext, request: Any) -> list[PartitionKey]:
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    return [(topic.topic_id if by_id else topic.topic, p)
            for topic in request.forgotten_topics_data for p in topic.partitions]


def _session_partitions(ctx: RequestContext, session: FetchSession) -> list[tuple[str | None, Any, Any]]:
    """(topic name or None if unknown, the cached partition, the key to echo) for every partition of a session."""
    if session.uses_topic_ids:
        topics = ctx.broker.image.topics_by_id
        out: list[tuple[str | None, Any, Any]] = []
        for cached in session.partitions.values():
            known = topics.get(cached.topic_key)
            out.append((known.name if known else None, cached, cached.topic_key))
        return out
    return [(cached.topic_key, cached, cached.topic_key) for cached in session.partitions.values()]


def _changed_only(session: FetchSession, wanted: list[tuple[str | None, Any, Any]], reads: list[_PartitionRead]
                  ) -> list[_PartitionRead]:
    """An incremental answer: the partitions the fetcher does not know the state of (`CachedPartition.must_send`);
    those that returned records move to the end of the session."""
    out = []
    with_records = []
    for (_, cached, _), read in zip(wanted, reads, strict=True):
        has_records = bool(read.records)
        # A replica to read from instead is sent like an error.
        if cached.must_send(has_records, read.cannot_wait, read.high_watermark, read.last_stable_offset,
                            read.log_start_offset):
            out.append(read)
            if has_records:
                with_records.append((cached.topic_key, cached.partition))
    if with_records:
        session.returned_records(with_records)
    return out


def _create_session(ctx: RequestContext, wanted: list[tuple[str | None, Any, Any]], reads: list[_PartitionRead],
                    follower: bool) -> int:
    """A session for a full fetch that asked for one, holding what it told; its id, or 0 if the cache is full."""
    partitions = []
    for (_, part, key), read in zip(wanted, reads, strict=True):
        cached = CachedPartition.from_request(key, part)
        cached.must_send(False, read.error != ErrorCode.none, read.high_watermark, read.last_stable_offset,
                         read.log_start_offset)
        partitions.append(cached)
    session = ctx.broker.fetch_sessions.create(follower, ctx.version >= FIRST_TOPIC_ID_VERSION, partitions,
                                               ctx.broker.clock.monotonic_ms())
    return session.id if session is not None else 0


def _fetcher(ctx: RequestContext, request: Any) -> _Fetcher:
    """Who fetches: the follower's broker id (-1 for a consumer) and broker epoch (v15, KIP-903; -1 when not
    said); a consumer's isolation, and from v11 its rack."""
    if ctx.version >= 15:
        replica_id, replica_epoch = int(request.replica_state.replica_id), int(request.replica_state.replica_epoch)
    else:
        replica_id, replica_epoch = int(request.replica_id), -1
    consumer = replica_id < 0
    rack = (request.rack_id or "") if ctx.version >= 11 else ""
    # As Kafka: the broker's fetch.max.bytes caps what a request may ask for, and min_bytes cannot exceed it.
    max_bytes = min(int(request.max_bytes), ctx.broker.fetch_max_bytes)
    return _Fetcher(replica_id, replica_epoch, consumer and reads_committed(request), rack,
                    consumer and ctx.version >= 11, max_bytes, min(int(request.min_bytes), max_bytes))


def _follower_lacks_high_watermark(ctx: RequestContext, fetcher: _Fetcher, session: FetchSession | None,
                                   wanted: list[tuple[str | None, Any, Any]], reads: list[_PartitionRead]) -> bool:
    """With follower reads on (KIP-392), whether a follower's fetch should be answered for the high watermark
    alone: the high watermark of a partition consumers were sent to read from a follower moved past what the
    session last told it. Such a follower serves consumers up to its own high watermark, so it must not wait for
    the next append (Kafka answers such a fetch at once too, for every partition; here only partitions with
    follower readers pay the extra round trip). Sessionless follower fetches (a full session cache) get it with
    their next records or after their wait."""
    replicas = ctx.broker.replicas
    if not fetcher.is_follower or session is None or replicas.replica_selector != RACK_AWARE_SELECTOR:
        return False
    for (name, cached, _), read in zip(wanted, reads, strict=True):
        if read.error == ErrorCode.none and read.high_watermark != cached.sent_high_watermark and name is not None:
            hosted = replicas.partitions.get((name, cached.partition))
            if hosted is not None and replicas.has_follower_readers(hosted):
                return True
    return False


def _wanted_partitions(ctx: RequestContext, request: Any) -> list[tuple[str | None, Any, Any]]:
    """(topic name or None if unknown, partition request, the key to echo) for each requested partition."""
    out: list[tuple[str | None, Any, Any]] = []
    image = ctx.broker.image
    for topic in request.topics:
        if ctx.version >= 13:
            known = image.topics_by_id.get(topic.topic_id)
            name, key = (known.name if known else None), topic.topic_id
        else:
            name, key = topic.topic, topic.topic
        out.extend((name, p, key) for p in topic.partitions)
    return out


def _refused_topics(ctx: RequestContext, wanted: list[tuple[str | None, Any, Any]], replica_id: int) -> set[str]:
    """The topics this fetch may not read: READ on the topic for a consumer, CLUSTER_ACTION on the cluster for a
    follower (which then may read none)."""
    names = {name for name, _, _ in wanted if name is not None}
    if replica_id >= 0:
        return set() if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME) else names
    return {name for name in names if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name)}


def _read_all(ctx: RequestContext, request: Any, wanted: list[tuple[str | None, Any, Any]], fetcher: _Fetcher,
              refused: set[Any]) -> tuple[list[_PartitionRead], int]:
    remaining = fetcher.max_bytes
    total = 0
    reads = []
    for name, part, key in wanted:
        if name is None and key in refused:
            reads.append(_PartitionRead(key, part.partition, ErrorCode.topic_authorization_failed))
            continue
        read = _read_partition(ctx, name, part, key, remaining, total == 0, fetcher)
        size = _size(read.records) if read.records else 0
        total += size
        remaining = max(0, remaining - size)
        reads.append(read)
    return reads, total


def _read_partition(ctx: RequestContext, name: str | None, part: Any, key: Any, remaining_bytes: int,
                    min_one_batch: bool, fetcher: _Fetcher) -> _PartitionRead:
    """A consumer reads up to the high watermark (read_committed: the last stable offset), from the leader or
    from v11 a follower, unless the leader names a replica of its rack to read from instead; a follower up to the
    log end, after reporting its position, unless its log has diverged."""
    if name is None:
        return _PartitionRead(key, part.partition, ErrorCode.unknown_topic_id)
    replicas = ctx.broker.replicas
    try:
        if fetcher.is_follower:
            hosted = replicas.hosted_for_replica(name, part.partition, fetcher.replica_id)
        else:
            hosted = replicas.readable_partition(name, part.partition, fetcher.may_read_followers)
        current_leader_epoch = getattr(part, "current_leader_epoch", -1)
        replicas.check_leader_epoch(hosted, current_leader_epoch)
        plog = hosted.log
        max_offset = None
        throttled = False
        if fetcher.is_follower:
            # lastFetchedEpoch came with v12; an older replica fetch cannot be told of divergence this way.
            diverging = diverging_epoch(plog, getattr(part, "last_fetched_epoch", -1), part.fetch_offset)
            if diverging is not None:
                return _PartitionRead(key, part.partition, ErrorCode.none, plog.high_watermark,
                                      plog.log_start_offset, None, diverging, plog.last_stable_offset)
            replicas.on_replica_fetch(hosted, fetcher.replica_id, part.fetch_offset, fetcher.replica_epoch)
            max_offset = plog.log_end_offset
            if part.fetch_offset == max_offset and not plog.offline:
                # Caught up, nothing to read: most partitions of every follower fetch, read twice (on arrival and
                # when an append wakes it), so without a segment lookup.
                return _no_records(key, part.partition, plog)
            throttled = replicas.leader_throttled(hosted, fetcher.replica_id)
            if throttled and replicas.quotas.leader.exceeded(ctx.broker.clock.monotonic_ms()):
                return _no_records(key, part.partition, plog)  # held back until the leader's rate is under its limit
        else:
            elsewhere = _elsewhere(ctx, hosted, key, part, fetcher, current_leader_epoch)
            if elsewhere is not None:
                return elsewhere
            if fetcher.read_committed:
                max_offset = plog.last_stable_offset
        result = plog.read(part.fetch_offset, min(part.partition_max_bytes, remaining_bytes), min_one_batch,
                           max_offset)
        records = _records(ctx, result, fetcher.read_committed)
        aborted = None
        if fetcher.read_committed:
            assert isinstance(records, bytes)  # regions are never handed to read_committed consumers
            aborted = plog.aborted_transactions(part.fetch_offset, _next_offset(records)) if records else []
    except KafkaError as exc:
        read = _PartitionRead(key, part.partition, exc.code)
        if exc.code == ErrorCode.offset_out_of_range:
            read.high_watermark, read.log_start_offset = plog.high_watermark, plog.log_start_offset
            read.last_stable_offset = plog.last_stable_offset
        return read
    return _PartitionRead(key, part.partition, ErrorCode.none, plog.high_watermark, plog.log_start_offset,
                          records, None, plog.last_stable_offset, aborted, throttled=throttled)


def _elsewhere(ctx: RequestContext, hosted: HostedPartition, key: Any, part: Any, fetcher: _Fetcher,
               current_leader_epoch: int) -> _PartitionRead | None:
    """A consumer's answer without records, when they are to be read elsewhere or later (KIP-392), else None.

    The leader names the replica of the consumer's rack (`replica.selector.class`). A follower that does not
    have the offset yet answers a consumer that gave no leader epoch with no records rather than
    OFFSET_OUT_OF_RANGE, as Kafka does: that consumer may be here on stale metadata, and retries (one with an
    epoch gets the error, and asks the leader)."""
    plog = hosted.log
    if hosted.leader_state is not None:
        preferred = ctx.broker.replicas.preferred_read_replica(hosted, fetcher.client_rack, part.fetch_offset)
        if preferred is None:
            return None
        return _no_records(key, part.partition, plog, preferred)
    if current_leader_epoch == -1 and part.fetch_offset > plog.log_end_offset:
        return _no_records(key, part.partition, plog)
    return None


def _records(ctx: RequestContext, result: ReadResult, needs_bytes: bool) -> Records:
    """The batches read: as regions of their files for a connection that sends files, else as bytes."""
    if ctx.sends_files and not needs_bytes and result.size_bytes >= SENDFILE_MIN_BYTES:
        regions = []
        for piece in result.slices:
            if piece.size:
                pinned = piece.pinned()  # the segment's own descriptor may be closed before this is sent
                regions.append(FileRegion(pinned.fd, piece.position, piece.size, pinned))
        return tuple(regions)
    return result.read_bytes()


def _size(records: Records) -> int:
    return sum(r.size for r in records) if isinstance(records, tuple) else len(records)


def _next_offset(records: bytes) -> int:
    """The offset after the last of the whole batches in `records` (not empty): the upper bound of the
    aborted transactions a read_committed consumer needs for them."""
    *_, (_, last) = iter_batch_headers(records, 0, len(records))
    return last.next_offset


def _answers_now(reads: list[_PartitionRead]) -> bool:
    return any(r.cannot_wait for r in reads)


def _response(ctx: RequestContext, code: ErrorCode, reads: list[_PartitionRead], consumer: bool = False,
              session_id: int = 0) -> EncodedBody:
    """The encoded response; a consumer's counts against its consumer_byte_rate (replicas are never throttled),
    and carries the throttle time that earns it."""
    by_topic: dict[Any, list[PartitionResult]] = {}
    refused: list[tuple[Any, PartitionResult]] = []
    for r in reads:
        result = PartitionResult(
            partition=r.partition, error_code=r.error.value, high_watermark=r.high_watermark,
            # Empty, never null, records for a partition with an error or a diverging epoch: Kafka sends empty
            # ones, and librdkafka fails the whole response on a null record set ("MessageSetSize -1").
            last_stable_offset=r.last_stable_offset, log_start_offset=r.log_start_offset,
            aborted_transactions=r.aborted_transactions,
            records=r.records if r.records is not None else b"",
            diverging_epoch=r.diverging_epoch, preferred_read_replica=r.preferred_read_replica,
        )
        by_topic.setdefault(r.topic_key, []).append(result)
        if result.error_code in FETCH_ERRORS:
            refused.append((r.topic_key, result))
    # KIP-951: refused partitions name their leader (v12+), and the answer gives its address (v16+).
    endpoints = add_leader_hints(ctx, refused) if refused and ctx.version >= FIRST_FLEXIBLE_VERSION else []
    by_id = ctx.version >= FIRST_TOPIC_ID_VERSION
    topics = [TopicResult(name=None if by_id else key, topic_id=key if by_id else None, partitions=parts)
              for key, parts in by_topic.items()]
    parts = encode_fetch_response(ctx.version, 0, code.value, session_id, topics, endpoints)
    if consumer:
        throttle_ms = ctx.quota.record(CONSUMER_BYTE_RATE, sum(len(part) for part in parts))
        if throttle_ms > 0:
            parts = encode_fetch_response(ctx.version, throttle_ms, code.value, session_id, topics, endpoints)
    return EncodedBody(parts)


API = Api(key=1, name="Fetch", min_version=4, max_version=18, handle=handle)
