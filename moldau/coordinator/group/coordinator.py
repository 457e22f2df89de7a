"""The group coordinator of one broker: the `__consumer_offsets` partitions it leads, and the I/O around them.

- The topic is created on first use, through the controller, with `offsets.topic.num.partitions` partitions,
  `offsets.topic.replication.factor` replicas and `cleanup.policy=compact`.
- Each partition this broker leads has a `GroupShard`, held by the shared skeleton (`coordinator.shards`).
  Following the metadata image (`on_image`), a partition that becomes led here is loaded by replaying its log;
  one led elsewhere is unloaded.
- The partition logs are reached through a `CoordinatorLog` (the replica manager's `ReplicaLog` in the broker).
- Every change is appended to the partition log as one record batch (no producer id) before anyone is told
  it happened: a commit is acknowledged only once its records are in the log, and members get their assignment
  only once the group's record is. OffsetCommits that arrive together share one batch per partition
  (`commit_offsets_together`): one append instead of one per request.
- A TxnOffsetCommit is appended as one transactional batch of its producer (id and epoch, so the log fences
  an old epoch); its offsets stay pending until `complete_transaction` is told that the transaction's marker
  is in the log. Loading replays markers the same way, so pending state survives a restart or failover. The
  first such batch of a transaction on a partition needs the log's verification guard (KIP-890), obtained
  with `txn_verification` before the caller asks the transaction coordinator.
- Deadlines (sessions, join and sync timeouts) are kept in a heap of (deadline, group), so `tick` touches only
  groups with something due, and `next_deadline_ms` tells the caller when to tick next.

Nothing here reads a clock: callers pass `now_ms` (see `runtime`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import heapq
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from moldau.coordinator.group import migration
from moldau.coordinator.group.classic import ClassicGroup, MemberIdFactory, random_member_id
from moldau.coordinator.group.consumer import ConsumerGroup, ConsumerSettings, HeartbeatRequest, HeartbeatResult
from moldau.coordinator.group.member import (
    Completion,
    Effects,
    Handle,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import Fetched, OffsetCommit, Requested, TopicPartition
from moldau.coordinator.group.records import (
    OFFSETS_TOPIC,
    Record,
    RecordFormatError,
    ShareGroupKey,
    ShareGroupValue,
    ShareMemberKey,
    ShareMemberValue,
    decode,
    encode,
)
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.group.shard import NO_PRODUCER_ID, GroupShard, Write
from moldau.coordinator.internal_topic import ReplicaLog, build_batch
from moldau.coordinator.log import CoordinatorLog, LogMarker, read_partition
from moldau.coordinator.shards import CoordinatorShards
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

_RETRY_EXPIRY_MS = 1000
_NO_MEMBERS: Mapping[str, ShareMemberValue] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Producer:
    """Who writes a batch: a transactional producer's id and epoch, or no one (NO_PRODUCER)."""

    producer_id: int
    producer_epoch: int


NO_PRODUCER = Producer(NO_PRODUCER_ID, -1)


@dataclass(frozen=True, slots=True)
class LoggedRecord:
    """A record read back from the log, where it is, and the producer if its batch is transactional."""

    record: Record
    log_offset: int
    producer_id: int


@dataclass(frozen=True, slots=True)
class LoggedMarker:
    """A transaction marker read back from the log: the producer's transaction committed or aborted."""

    producer_id: int
    commit: bool
    log_offset: int


@dataclass(frozen=True, slots=True)
class CommitRequest:
    """One OffsetCommit, as `commit_offsets_together` takes several."""

    group_id: str
    member_id: str
    instance_id: str | None
    generation_id: int
    commits: tuple[OffsetCommit, ...]
    version: int

    def records_bytes(self) -> int:
        """About how many bytes its offset records take in a batch, if all are accepted: what bounds a group
        commit's batch (`append_linger`). Characters stand for UTF-8 bytes; the bound leaves room for that."""
        per_record = _OFFSET_RECORD_OVERHEAD + len(self.group_id)
        return sum(per_record + len(c.topic) + len(c.metadata or "") for c in self.commits)


# An offset record's fixed bytes: key version, lengths and partition (10), value version, offset, leader epoch,
# metadata length and timestamp (24), and the record's own framing (at most 14 for these sizes).
_OFFSET_RECORD_OVERHEAD = 48


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str


class GroupCoordinator:
    def __init__(self, node_id: int, settings: CoordinatorSettings, image: Callable[[], MetadataImage],
                 request_offsets_topic: Callable[[], None], log: ReplicaManager | CoordinatorLog,
                 new_member_id: MemberIdFactory = random_member_id) -> None:
        """`log`: the `__consumer_offsets` partitions, or the replica manager holding them."""
        self.node_id = node_id
        self.settings = settings
        self._image = image
        self.log: CoordinatorLog = (ReplicaLog(log, OFFSETS_TOPIC, settings.offsets_load_buffer_size)
                                    if isinstance(log, ReplicaManager) else log)
        self.partitions = CoordinatorShards[GroupShard](
            node_id, self.log, lambda: self.settings.offsets_topic_partitions, image, request_offsets_topic,
            recheck_after_request=True)
        self._new_member_id = new_member_id
        self._timers: list[tuple[int, int, str]] = []  # (deadline, partition, group id); stale entries allowed
        self._scheduled: dict[tuple[int, str], int] = {}  # earliest heap entry per group
        self._sizes: Mapping[str, int] = MappingProxyType({})  # `_topic_sizes` of the image `_sizes_of`
        self._sizes_of: MetadataImage | None = None

    # -- partitions ----------------------------------------------------------------------------------------

    @property
    def shards(self) -> dict[int, GroupShard]:
        """The loaded shards by partition."""
        return self.partitions.shards

    def on_image(self, image: MetadataImage, now_ms: int) -> list[Completion]:
        """Load the partitions now led here, unload those that are not; returns answers for unloaded groups."""
        completions: list[Completion] = []
        for shard in self.partitions.follow(image, lambda partition, _epoch: self._load(partition, now_ms)):
            completions += shard.unload().completions
        return completions

    def _load(self, partition: int, now_ms: int) -> GroupShard | None:
        """The partition's shard, rebuilt by replaying its log; None while it is not led here in the log (its
        groups get NOT_COORDINATOR until a later image loads it)."""
        if not self.partitions.is_loadable(partition):
            return None
        shard = GroupShard(partition, self.settings.shard, self._new_member_id)
        # What is above the high watermark now (a new leader's unreplicated tail) stays hidden from OffsetFetch.
        self._note_high_watermark(shard)
        count = 0
        for item in self._read_partition(partition):
            if isinstance(item, LoggedMarker):
                shard.end_transaction(item.producer_id, item.commit, item.log_offset)
            else:
                shard.replay(item.record, now_ms, item.log_offset, item.producer_id)
                count += 1
        for consumer in shard.consumer_groups.values():
            consumer.start_sessions(now_ms)
        for group_id in [*shard.groups, *shard.consumer_groups]:
            self._schedule(shard, group_id)
        if count:
            log.info("loaded %s-%d: %d records, %d groups", OFFSETS_TOPIC, partition, count, len(shard.groups))
        return shard

    def _read_partition(self, partition: int) -> Iterator[LoggedRecord | LoggedMarker]:
        """Everything the partition holds, in log order (up to the log end: the coordinator loads as leader)."""
        for item in read_partition(self.log, partition):
            if isinstance(item, LogMarker):
                yield LoggedMarker(item.producer_id, item.commit, item.offset)
                continue
            try:
                record = decode(item.key, item.value)
            except (RecordFormatError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable record at %s-%d@%d: %s", OFFSETS_TOPIC, partition, item.offset,
                            exc)
                continue
            yield LoggedRecord(record, item.offset, item.producer_id)

    def ensure_topic(self) -> None:
        """Raise COORDINATOR_NOT_AVAILABLE, and ask for `__consumer_offsets` to be created, if it does not exist.

        Creation goes through the active controller, possibly on another node, so it cannot finish inside this
        call; clients retry on COORDINATOR_NOT_AVAILABLE, as they do against Kafka.
        """
        self.partitions.ensure_topic()

    def partition_of(self, group_id: str) -> int:
        return self.partitions.partition_of(group_id)

    def coordinator_node(self, group_id: str) -> int:
        """The broker leading the group's partition, creating the topic first if need be."""
        return self.partitions.coordinator_node(group_id)

    def shard(self, group_id: str) -> GroupShard:
        """The shard of a group coordinated here. Raises KafkaError (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.shard(group_id)

    def find_group(self, group_id: str) -> ClassicGroup | None:
        """The group if it exists here; never creates the topic."""
        shard = self.partitions.find(group_id)
        return shard.groups.get(group_id) if shard is not None else None

    def find_consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """The consumer (KIP-848) group if it exists here; never creates the topic."""
        shard = self.partitions.find(group_id)
        return shard.consumer_groups.get(group_id) if shard is not None else None

    def _topic_sizes(self) -> Mapping[str, int]:
        """Partition counts of the topics consumer groups may subscribe to: one read-only mapping per metadata
        image, so a heartbeat does not rebuild it, and a group can keep what it resolved a regex to for as long
        as it is handed the same mapping."""
        image = self._image()
        if self._sizes_of is not image:
            self._sizes = MappingProxyType({name: len(t.partitions) for name, t in image.topics_by_name.items()
                                            if name != OFFSETS_TOPIC})
            self._sizes_of = image
        return self._sizes

    # -- writing -------------------------------------------------------------------------------------------

    def _append(self, partition: int, records: Sequence[Record], now_ms: int, producer: Producer = NO_PRODUCER,
                verification_guard: object | None = None) -> int:
        """Append `records` as one batch; returns the log offset of the first. Raises KafkaError when the log
        refuses it (for a transactional batch also the producer's errors: a fenced epoch, no open transaction)."""
        batch = build_batch([encode(record) for record in records], now_ms, producer_id=producer.producer_id,
                            producer_epoch=producer.producer_epoch,
                            transactional=producer.producer_id != NO_PRODUCER_ID,
                            codec=self.settings.offsets_topic_compression_codec)
        # acks=all, as Kafka writes its offsets topic.
        return self.log.append(partition, batch, verification_guard).first_offset

    def _write(self, shard: GroupShard, records: Sequence[Record], now_ms: int, producer: Producer = NO_PRODUCER,
               verification_guard: object | None = None) -> ErrorCode:
        """Append, then replay: state changes only once the records are in the log."""
        if not records:
            return ErrorCode.none
        try:
            first_offset = self._append(shard.partition, records, now_ms, producer, verification_guard)
        except KafkaError as exc:
            log.warning("cannot write to %s-%d: %s", OFFSETS_TOPIC, shard.partition, exc.message)
            return write_error(exc.code)
        self._note_high_watermark(shard)  # also forgets what was kept for changes replicated since
        shard.replay_all(records, now_ms, first_offset, producer.producer_id)
        return ErrorCode.none

    def _settle(self, shard: GroupShard, group_id: str, fx: Effects, now_ms: int) -> list[Completion]:
        """Persist the group if its durable form changed, then release the answers."""
        group = shard.groups.get(group_id)
        if fx.persist and group is not None:
            try:
                self._append(shard.partition, [shard.group_record(group_id)], now_ms)
            except KafkaError as exc:
                log.warning("cannot persist group %s: %s; rebalancing", group_id, exc.message)
                fx = Effects([_failed(c) for c in fx.completions])
                fx.merge(group.force_rebalance(now_ms))
        if group is not None:
            self._schedule(shard, group_id)
        return fx.completions

    # -- membership ----------------------------------------------------------------------------------------

    def join(self, group_id: str, handle: Handle, request: JoinRequest, now_ms: int) -> list[Completion]:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return [Completion(handle, JoinResult(exc.code, request.member_id))]
        consumer = shard.consumer_groups.get(group_id)
        if consumer is not None and not consumer.is_empty():
            return [Completion(handle, self._join_consumer_group(shard, consumer, request, now_ms))]
        if consumer is not None:
            # A consumer group without members becomes a classic group, whatever the migration policy.
            error = self._write(shard, consumer.tombstones(), now_ms)
            if error != ErrorCode.none:
                return [Completion(handle, JoinResult(error, request.member_id))]
        return self._settle(shard, group_id, shard.join(group_id, handle, request, now_ms), now_ms)

    def _join_consumer_group(self, shard: GroupShard, group: ConsumerGroup, request: JoinRequest,
                             now_ms: int) -> JoinResult:
        """A classic member's JoinGroup on a consumer group: answered once its records are in the log."""
        joined = shard.join_consumer_group(group, request, self._topic_sizes())
        error = self._write(shard, joined.records, now_ms)
        if error != ErrorCode.none:
            return JoinResult(error, joined.result.member_id)
        live = shard.consumer_groups.get(group.group_id)
        if live is not None and joined.result.error == ErrorCode.none:
            member_id = joined.result.member_id
            live.touch_classic(member_id, now_ms, migration.must_rejoin(live, member_id), joined=True)
            self._schedule(shard, group.group_id)
        return joined.result

    def sync(self, group_id: str, handle: Handle, request: SyncRequest, now_ms: int) -> list[Completion]:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return [Completion(handle, SyncResult(exc.code))]
        return self._settle(shard, group_id, shard.sync(group_id, handle, request, now_ms), now_ms)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                  now_ms: int) -> ErrorCode:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return exc.code
        error = shard.heartbeat(group_id, member_id, instance_id, generation_id, now_ms)
        if group_id in shard.groups or group_id in shard.consumer_groups:
            self._schedule(shard, group_id)
        return error

    def leave(self, group_id: str, identities: Sequence[tuple[str, str | None]],
              now_ms: int) -> tuple[ErrorCode, tuple[ErrorCode, ...], list[Completion]]:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return exc.code, (), []
        consumer = shard.consumer_groups.get(group_id)
        if consumer is not None:
            records, errors = shard.leave_consumer_group(consumer, identities, self._topic_sizes())
            error = self._write(shard, records, now_ms)
            if error != ErrorCode.none:
                return error, (), []
            if group_id in shard.consumer_groups:
                self._schedule(shard, group_id)
            return ErrorCode.none, errors, []
        result = shard.leave(group_id, identities, now_ms)
        completions = self._settle(shard, group_id, result.effects, now_ms)
        return result.error, result.member_errors, completions

    def consumer_heartbeat(self, group_id: str, request: HeartbeatRequest, now_ms: int) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: the answer is given once the records it caused are in the log."""
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return HeartbeatResult(exc.code, message=exc.message)
        outcome = shard.consumer_heartbeat(group_id, request, self._topic_sizes(), now_ms,
                                           self._consumer_settings(group_id))
        error = self._write(shard, outcome.records, now_ms)
        if error != ErrorCode.none:
            return HeartbeatResult(error)
        group = shard.consumer_groups.get(group_id)
        if group is not None:
            if outcome.result.error == ErrorCode.none:
                group.touch(outcome.result.member_id, now_ms)
            # Members an upgrade brought in from a classic group get their session from now.
            group.start_sessions(now_ms)
            self._schedule(shard, group_id)
        else:
            self._after_downgrade(shard, group_id, now_ms)
        return outcome.result

    def _consumer_settings(self, group_id: str) -> ConsumerSettings:
        """The broker's consumer group settings with the group's own `consumer.session.timeout.ms` and
        `consumer.heartbeat.interval.ms` (GROUP configs, validated when they were stored)."""
        base = self.settings.shard.consumer
        overrides = self._image().group_configs(group_id)
        if not overrides:
            return base
        return dataclasses.replace(
            base, session_timeout_ms=int(overrides.get("consumer.session.timeout.ms", base.session_timeout_ms)),
            heartbeat_interval_ms=int(overrides.get("consumer.heartbeat.interval.ms", base.heartbeat_interval_ms)))

    def take_released(self) -> list[Completion]:
        """Answers for JoinGroup/SyncGroup requests that waited in a classic group a ConsumerGroupHeartbeat just
        upgraded (REBALANCE_IN_PROGRESS: they rejoin, into the consumer group)."""
        return [c for shard in self.shards.values() for c in shard.take_released()]

    def _after_downgrade(self, shard: GroupShard, group_id: str, now_ms: int) -> list[Completion]:
        """A consumer group just became a classic group again: its members rejoin in a rebalance, so that
        a leader assigns what the departed members held."""
        classic = shard.groups.get(group_id)
        if classic is None or classic.is_empty():
            return []
        log.info("group %s is a classic group again: its remaining members use the classic protocol", group_id)
        return self._settle(shard, group_id, classic.force_rebalance(now_ms), now_ms)

    def _tick_consumer(self, shard: GroupShard, group: ConsumerGroup, now_ms: int) -> list[Completion]:
        for member_id in group.expired(now_ms):
            # As Kafka's coordinator says it: a member removed by the broker rather than by its own LeaveGroup.
            log.info("group %s: member %s removed: %s", group.group_id, member_id,
                     group.expiry_reason(member_id, now_ms))
        if self._write(shard, shard.expire_consumer(group, now_ms, self._topic_sizes()), now_ms) != ErrorCode.none:
            group.retry_expiry(now_ms, _RETRY_EXPIRY_MS)
        if group.group_id not in shard.consumer_groups:
            return self._after_downgrade(shard, group.group_id, now_ms)
        self._schedule(shard, group.group_id)
        return []

    # -- time ----------------------------------------------------------------------------------------------

    def _schedule(self, shard: GroupShard, group_id: str) -> None:
        deadline = shard.next_deadline_ms(group_id)
        key = (shard.partition, group_id)
        if deadline is None:
            return
        current = self._scheduled.get(key)
        if current is None or deadline < current:
            self._scheduled[key] = deadline
            heapq.heappush(self._timers, (deadline, shard.partition, group_id))

    def next_deadline_ms(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def tick(self, now_ms: int) -> list[Completion]:
        """Act on every group whose deadline has passed."""
        completions: list[Completion] = []
        while self._timers and self._timers[0][0] <= now_ms:
            deadline, partition, group_id = heapq.heappop(self._timers)
            if self._scheduled.get((partition, group_id)) == deadline:
                del self._scheduled[(partition, group_id)]
            shard = self.shards.get(partition)
            consumer = shard.consumer_groups.get(group_id) if shard is not None else None
            if shard is not None and consumer is not None:
                completions += self._tick_consumer(shard, consumer, now_ms)
            elif shard is not None and group_id in shard.groups:
                completions += self._settle(shard, group_id, shard.tick(group_id, now_ms), now_ms)
        return completions

    # -- offsets -------------------------------------------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                       commits: Sequence[OffsetCommit], version: int, now_ms: int) -> list[ErrorCode]:
        """One error per commit, in order; the accepted ones are in the log when this returns."""
        request = CommitRequest(group_id, member_id, instance_id, generation_id, tuple(commits), version)
        return self.commit_offsets_together([request], now_ms)[0]

    def commit_offsets_together(self, requests: Sequence[CommitRequest], now_ms: int) -> list[list[ErrorCode]]:
        """Several OffsetCommits at once (group commit): each is validated in order, and the accepted records of
        all those whose groups share a partition are appended as one batch. Per request, one error per commit;
        the accepted ones are in the log when this returns. Validation reads group membership only, which offset
        records do not change, so validating all before appending any answers as one at a time would."""
        answers: list[list[ErrorCode]] = [[] for _ in requests]
        writes: dict[int, tuple[GroupShard, list[tuple[int, Write]]]] = {}
        for i, request in enumerate(requests):
            try:
                shard = self.shard(request.group_id)
            except KafkaError as exc:
                answers[i] = [exc.code] * len(request.commits)
                continue
            write = shard.commit(request.group_id, request.member_id, request.instance_id, request.generation_id,
                                 request.commits, request.version, now_ms)
            writes.setdefault(shard.partition, (shard, []))[1].append((i, write))
        for shard, shard_writes in writes.values():
            error = self._write(shard, [record for _, write in shard_writes for record in write.records], now_ms)
            for i, write in shard_writes:
                if error != ErrorCode.none:
                    answers[i] = [error if e == ErrorCode.none else e for e in write.errors]
                    continue
                answers[i] = write.errors
                group_id = requests[i].group_id
                if group_id in shard.groups or group_id in shard.consumer_groups:
                    self._schedule(shard, group_id)
        return answers

    def txn_verification(self, group_id: str, producer: Producer) -> tuple[int, object] | None:
        """Whether the producer's batch would open its transaction on the group's partition, so that the
        transaction coordinator must first confirm the partition is in the transaction (KIP-890): then the
        partition and the log's guard to append with; None when no check is needed, or the partition is not
        led here (the commit itself answers that)."""
        partition = self.partition_of(group_id)
        try:
            if not self.log.needs_verification(partition, producer.producer_id, producer.producer_epoch):
                return None
            return partition, self.log.verification_guard(partition, producer.producer_id)
        except KafkaError:
            return None

    def txn_commit_offsets(self, group_id: str, producer: Producer, member_id: str, instance_id: str | None,
                           generation_id: int, commits: Sequence[OffsetCommit], now_ms: int,
                           verification_guard: object | None = None) -> list[ErrorCode]:
        """TxnOffsetCommit: one error per commit, in order. The accepted ones are in the log when this returns,
        pending until the transaction's marker (`complete_transaction`). `verification_guard`: see
        `txn_verification`."""
        if producer.producer_id == NO_PRODUCER_ID:
            # Its batch would not be transactional: the offsets would be committed at once, outside any transaction.
            return [ErrorCode.invalid_producer_id_mapping] * len(commits)
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return [exc.code] * len(commits)
        write = shard.txn_commit(group_id, member_id, instance_id, generation_id, commits, now_ms)
        error = self._write(shard, write.records, now_ms, producer, verification_guard)
        if error != ErrorCode.none:
            return [error if e == ErrorCode.none else e for e in write.errors]
        if group_id in shard.groups or group_id in shard.consumer_groups:
            self._schedule(shard, group_id)
        return write.errors

    def complete_transaction(self, partition: int, producer_id: int, commit: bool, now_ms: int) -> None:
        """A transaction marker of `producer_id` is now in the log of `__consumer_offsets` partition `partition`:
        its pending offsets there become committed, or are dropped.

        The call may come a while after the marker's append (once replicated): plain commits appended in
        between are safe, the newer record wins; the producer's next transaction cannot have committed offsets
        yet, since it starts only once all its markers are written. A partition not loaded here is left alone:
        loading it replays the marker from the log.
        """
        shard = self.shards.get(partition)
        if shard is not None:
            shard.end_transaction(producer_id, commit)

    def replication_target(self, group_id: str) -> tuple[int, int] | None:
        """The group's partition if led here, and its log end: what a write must be replicated up to."""
        partition = self.partition_of(group_id)
        try:
            return partition, self.log.log_end_offset(partition)
        except KafkaError:
            return None

    def fetch_offsets(self, group_id: str, requested: Requested | None, member_id: str | None = None,
                      member_epoch: int = -1, require_stable: bool = False) -> tuple[ErrorCode, Fetched]:
        """Committed offsets; a member of a consumer (KIP-848) group that names itself must be current.
        With `require_stable`, partitions with an open transactional commit answer UNSTABLE_OFFSET_COMMIT."""
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return exc.code, []
        consumer = shard.consumer_groups.get(group_id)
        if consumer is not None and member_id is not None:
            error = consumer.validate_offset_fetch(member_id, member_epoch)
            if error != ErrorCode.none:
                return error, []
        self._note_high_watermark(shard)
        return ErrorCode.none, shard.fetch(group_id, requested, require_stable)

    def committed_offsets(self) -> dict[str, dict[TopicPartition, int]]:
        """Every group's committed offsets as OffsetFetch answers them (replicated ones only), for metrics."""
        result: dict[str, dict[TopicPartition, int]] = {}
        for shard in list(self.shards.values()):
            self._note_high_watermark(shard)
            for group in shard.offsets.groups():
                result[group] = {tp: value.offset for tp, value in shard.offsets.visible(group).items()}
        return result

    def _note_high_watermark(self, shard: GroupShard) -> None:
        with contextlib.suppress(KafkaError):  # no longer the leader: the shard is about to be unloaded
            shard.offsets.replicated_to(self.log.high_watermark(shard.partition))

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition],
                       now_ms: int) -> tuple[ErrorCode, list[ErrorCode]]:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return exc.code, []
        group_error, write = shard.delete_offsets(group_id, partitions)
        if group_error != ErrorCode.none:
            return group_error, []
        error = self._write(shard, write.records, now_ms)
        if error != ErrorCode.none:
            return error, []
        return ErrorCode.none, write.errors

    def delete_groups(self, group_ids: Sequence[str], now_ms: int) -> list[ErrorCode]:
        return [self._delete_group(group_id, now_ms) for group_id in group_ids]

    def _delete_group(self, group_id: str, now_ms: int) -> ErrorCode:
        try:
            shard = self.shard(group_id)
        except KafkaError as exc:
            return exc.code
        error, records = shard.delete_group(group_id)
        if error != ErrorCode.none:
            return error
        return self._write(shard, records, now_ms)

    # -- share groups (KIP-932) as written; the live membership is the share manager's ---------------------------

    def share_group(self, group_id: str) -> ShareGroupValue | None:
        """The share group as last written, if it is a share group of a partition loaded here."""
        shard = self.partitions.find(group_id)
        return None if shard is None else shard.share_groups.get(group_id)

    def share_group_epoch(self, group_id: str) -> int | None:
        written = self.share_group(group_id)
        return None if written is None else written.epoch

    def share_group_epochs(self) -> dict[str, int]:
        """Every share group of the partitions loaded here, by its last written epoch."""
        return {group: value.epoch for shard in self.shards.values() for group, value in shard.share_groups.items()}

    def share_group_load(self, group_id: str) -> int | None:
        """Which loading of the group's partition is coordinating it here (None: not loaded here)."""
        shard = self.partitions.find(group_id)
        return None if shard is None else shard.load_id

    def share_group_members(self, group_id: str) -> Mapping[str, ShareMemberValue]:
        """The share group's members as last written (none if it is not a share group loaded here)."""
        shard = self.partitions.find(group_id)
        return MappingProxyType(shard.share_members.get(group_id, {})) if shard is not None else _NO_MEMBERS

    def write_share_records(self, group_id: str, records: Sequence[Record], now_ms: int) -> ErrorCode:
        """Write records of the share group (type 10 and 11) as one batch. Raises KafkaError (NOT_COORDINATOR)."""
        if any(not isinstance(r.key, ShareGroupKey | ShareMemberKey) or r.key.group != group_id for r in records):
            raise ValueError(f"only records of share group {group_id} are written here")
        return self._write(self.shard(group_id), records, now_ms)

    def expire_offsets(self, now_ms: int) -> int:
        """Remove expired offsets and forgotten empty groups; returns the number of records written."""
        written = 0
        for shard in list(self.shards.values()):
            for records in shard.expire(now_ms):
                if self._write(shard, records, now_ms) == ErrorCode.none:
                    written += len(records)
        if written:
            log.info("expired %d offsets and groups", written)
        return written

    # -- listing -------------------------------------------------------------------------------------------

    def list_groups(self) -> list[ListedGroup]:
        classic = [ListedGroup(g.group_id, g.protocol_type or "", g.state.value, g.group_type)
                   for shard in self.shards.values() for g in shard.groups.values()]
        return classic + [ListedGroup(g.group_id, g.group_type, g.state, g.group_type)
                          for shard in self.shards.values() for g in shard.consumer_groups.values()]

    def close(self) -> list[Completion]:
        completions: list[Completion] = []
        for shard in self.partitions.clear():
            completions += shard.unload().completions
        return completions


def write_error(code: ErrorCode) -> ErrorCode:
    """What a client is told when the coordinator's append fails (Kafka's mapping).

    The producer's errors come only from transactional appends and reach the client as they are, except that
    a fenced producer is INVALID_PRODUCER_EPOCH: what TxnOffsetCommit clients treat as fenced (PRODUCER_FENCED is
    not an answer this API's clients know)."""
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.invalid_commit_offset_size
    if code == ErrorCode.not_leader_or_follower:
        return ErrorCode.not_coordinator
    if code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced):
        return ErrorCode.invalid_producer_epoch
    if code in (ErrorCode.invalid_txn_state, ErrorCode.invalid_producer_id_mapping):
        return code
    return ErrorCode.coordinator_not_available


def _failed(completion: Completion) -> Completion:
    result = completion.result
    if result.error != ErrorCode.none:
        return completion
    if isinstance(result, JoinResult):
        return Completion(completion.handle, JoinResult(ErrorCode.coordinator_not_available, result.member_id))
    return Completion(completion.handle, SyncResult(ErrorCode.coordinator_not_available))
