"""The groups and committed offsets that live on one partition of `__consumer_offsets`, sans-I/O.

Offsets and deletions change state only by replay: an operation validates and returns the records to append;
the caller appends them and then passes the same records to `replay`, as it does for every record when it loads
the partition after a restart. Group membership is the one exception, as in Kafka: the live group object is
the state, and its record (`group_record`) is a snapshot written whenever a generation is settled or the group
becomes empty, so replaying it rebuilds the group as last persisted.

Transactional offset commits (TxnOffsetCommit) are offset records in a batch of the transaction's producer;
`replay` given that producer id keeps them pending, invisible to OffsetFetch, until `end_transaction` replays
the transaction's marker. Around them, Kafka's rules:

- a tombstone for a partition (OffsetDelete, DeleteGroups, expiry) also drops the pending commits for it, so
  OffsetDelete and DeleteGroups write one for a partition with only a pending commit too;
- expiry leaves alone a partition with a pending commit, and a group with any.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from moldau.coordinator.group import migration
from moldau.coordinator.group import offsets as rules
from moldau.coordinator.group.classic import (
    ClassicGroup,
    GroupLimits,
    GroupState,
    LeaveResult,
    MemberIdFactory,
    random_member_id,
)
from moldau.coordinator.group.consumer import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
    Outcome,
)
from moldau.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    Completion,
    Effects,
    Handle,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import (
    UNKNOWN_LOG_OFFSET,
    Fetched,
    OffsetCommit,
    OffsetStore,
    PendingOffset,
    PendingOffsets,
    Requested,
    TopicPartition,
)
from moldau.coordinator.group.records import (
    CG_METADATA,
    ConsumerGroupKey,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    Record,
    RecordValue,
    ShareGroupKey,
    ShareGroupValue,
    ShareMemberKey,
    ShareMemberValue,
)
from moldau.protocol.errors import ErrorCode

_LOAD_IDS = itertools.count(1)
# The producer id of batches written outside transactions.
NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class ShardSettings:
    limits: GroupLimits = field(default_factory=GroupLimits)
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    consumer: ConsumerSettings = field(default_factory=ConsumerSettings)


@dataclass(frozen=True, slots=True)
class Write:
    """Records to append as one batch, and the answers to give once they are durable."""

    records: list[Record]
    errors: list[ErrorCode]


class GroupShard:
    def __init__(self, partition: int, settings: ShardSettings,
                 new_member_id: MemberIdFactory = random_member_id) -> None:
        self.partition = partition
        self.settings = settings
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups; an id is in one table only
        # Share groups (KIP-932) and their members as last written; the live membership is the share manager's,
        # which takes a group back from here after a restart, so the group keeps its id and its members their
        # epochs.
        self.share_groups: dict[str, ShareGroupValue] = {}
        self.share_members: dict[str, dict[str, ShareMemberValue]] = {}
        self.offsets = OffsetStore()
        self.pending = PendingOffsets()
        self._new_member_id = new_member_id
        self.released: list[Completion] = []
        # Which loading of its partition this is: what the share manager keeps from a shard is only good while
        # the shard it came from is the one loaded (a partition led elsewhere meanwhile may have moved on).
        self.load_id = next(_LOAD_IDS)

    def _new_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, self.settings.limits, now_ms, self._new_member_id)
        self.groups[group_id] = group
        return group

    # -- replay --------------------------------------------------------------------------------------------

    def replay(self, record: Record, now_ms: int, log_offset: int = UNKNOWN_LOG_OFFSET,
               producer_id: int = NO_PRODUCER_ID) -> None:
        """Apply one record of this partition: the only way offsets and deletions change.

        `log_offset` is where the record is in the log; `producer_id` that of its batch if the batch is
        transactional (its offsets then wait for the transaction's marker)."""
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupKey):
            self._replay_consumer(key, value)
        elif isinstance(key, ShareGroupKey):
            if value is None:
                self.share_groups.pop(key.group, None)
                self.share_members.pop(key.group, None)
            else:
                assert isinstance(value, ShareGroupValue)
                self.share_groups[key.group] = value
        elif isinstance(key, ShareMemberKey):
            self._replay_share_member(key, value)
        elif isinstance(key, OffsetKey):
            assert value is None or isinstance(value, OffsetValue)
            self._replay_offset(key, value, log_offset, producer_id)
        elif value is None:
            self._replace_classic(key.group)
        else:
            assert isinstance(value, GroupValue)
            self.groups[key.group] = ClassicGroup.from_record(key.group, value, self.settings.limits, now_ms,
                                                              self._new_member_id)

    def _replay_offset(self, key: OffsetKey, value: OffsetValue | None, log_offset: int, producer_id: int) -> None:
        if value is None:
            self.offsets.apply(key, None)
            self.pending.discard(key)
            return
        if key.group not in self.groups and key.group not in self.consumer_groups:
            # A group known only by its commits; dated by the record, so a reload dates it the same. A
            # transactional commit creates it too, as in Kafka, even if the transaction aborts later.
            self._new_group(key.group, value.commit_timestamp_ms)
        if producer_id == NO_PRODUCER_ID:
            self.offsets.apply(key, value, log_offset)
        else:
            self.pending.add(producer_id, key, PendingOffset(value, log_offset))

    def _replace_classic(self, group_id: str) -> None:
        """A classic group is deleted or converted: requests still waiting in it (a rebalance under way when a
        consumer-protocol member upgraded it) are told to rejoin, as Kafka does; see `take_released`."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            self.released += group.mark_dead(ErrorCode.rebalance_in_progress).completions

    def take_released(self) -> list[Completion]:
        """Answers to waiting JoinGroup/SyncGroup requests of classic groups that replaying records removed."""
        released, self.released = self.released, []
        return released

    def end_transaction(self, producer_id: int, commit: bool, marker_offset: int = UNKNOWN_LOG_OFFSET) -> None:
        """Replay a transaction marker: the producer's pending offsets become committed, or are dropped.

        On commit each applies only if its record is newer than the committed offset's, so a plain commit
        written while the transaction was open is not overwritten by an older transactional one. They become
        visible with the marker (at once if `marker_offset` is unknown: the marker is already replicated)."""
        for key, pending in self.pending.end(producer_id).items():
            if commit:
                self.offsets.materialize(key, pending, marker_offset)

    def _replay_consumer(self, key: ConsumerGroupKey, value: object | None) -> None:
        group = self.consumer_groups.get(key.group)
        if group is None:
            if value is None:
                return
            # A classic group becomes a consumer group, as in Kafka: an empty one (e.g. known only by its offsets),
            # or one with members upgraded by a consumer-protocol member (see `migration`).
            self._replace_classic(key.group)
            group = self.consumer_groups[key.group] = ConsumerGroup(key.group, self.settings.consumer)
        group.replay(key, value)
        if key.record_type == CG_METADATA and value is None:
            del self.consumer_groups[key.group]  # the group's deletion

    def replay_all(self, records: Iterable[Record], now_ms: int, first_offset: int = UNKNOWN_LOG_OFFSET,
                   producer_id: int = NO_PRODUCER_ID) -> None:
        """Replay one appended batch, whose records sit at consecutive log offsets from `first_offset`."""
        for i, record in enumerate(records):
            offset = UNKNOWN_LOG_OFFSET if first_offset == UNKNOWN_LOG_OFFSET else first_offset + i
            self.replay(record, now_ms, offset, producer_id)

    def _replay_share_member(self, key: ShareMemberKey, value: RecordValue | None) -> None:
        members = self.share_members.setdefault(key.group, {})
        if value is None:
            members.pop(key.member_id, None)
        else:
            assert isinstance(value, ShareMemberValue)
            members[key.member_id] = value
        if not members:
            del self.share_members[key.group]

    def group_record(self, group_id: str) -> Record:
        return Record(GroupKey(group_id), self.groups[group_id].to_record())

    @staticmethod
    def share_group_record(group_id: str, value: ShareGroupValue | None) -> Record:
        """The share group as `value` says, or (None) its deletion."""
        return Record(ShareGroupKey(group_id), value)

    # -- membership ----------------------------------------------------------------------------------------

    def join(self, group_id: str, handle: Handle, request: JoinRequest, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
        if group_id in self.consumer_groups or group_id in self.share_groups:
            fx = Effects()
            fx.complete(handle, JoinResult(ErrorCode.inconsistent_group_protocol, request.member_id))
            return fx
        if group is None:
            if request.member_id != UNKNOWN_MEMBER_ID:
                fx = Effects()
                fx.complete(handle, JoinResult(ErrorCode.unknown_member_id, request.member_id))
                return fx
            group = self._new_group(group_id, now_ms)
        return group.join(handle, request, now_ms)

    def sync(self, group_id: str, handle: Handle, request: SyncRequest, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
        consumer = self.consumer_groups.get(group_id)
        if group is None:
            fx = Effects()
            fx.complete(handle, migration.sync(consumer, request) if consumer is not None
                        else SyncResult(ErrorCode.unknown_member_id))
            return fx
        return group.sync(handle, request, now_ms)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                  now_ms: int) -> ErrorCode:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            error = migration.heartbeat(consumer, member_id, instance_id, generation_id)
            if error in (ErrorCode.none, ErrorCode.rebalance_in_progress):
                consumer.touch_classic(member_id, now_ms, error == ErrorCode.rebalance_in_progress)
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return group.heartbeat(member_id, instance_id, generation_id, now_ms)

    def join_consumer_group(self, group: ConsumerGroup, request: JoinRequest, topics: Mapping[str, int]
                            ) -> migration.ClassicJoin:
        """A classic member's JoinGroup on a consumer group with members (whatever the migration policy)."""
        new_id = self._new_member_id(request.group_instance_id or request.client_id or "consumer")
        return migration.join(group, request, topics, self.settings.limits, new_id)

    def leave_consumer_group(self, group: ConsumerGroup, identities: Sequence[tuple[str, str | None]],
                             topics: Mapping[str, int]) -> tuple[list[Record], tuple[ErrorCode, ...]]:
        return migration.leave(group, identities, topics)

    def leave(self, group_id: str, identities: Sequence[tuple[str, str | None]], now_ms: int) -> LeaveResult:
        group = self.groups.get(group_id)
        if group is None:
            return LeaveResult(ErrorCode.none, tuple(ErrorCode.unknown_member_id for _ in identities), Effects())
        return group.leave(identities, now_ms)

    def tick(self, group_id: str, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
        return group.tick(now_ms) if group is not None else Effects()

    # -- consumer groups (KIP-848) -------------------------------------------------------------------------

    def consumer_heartbeat(self, group_id: str, request: HeartbeatRequest, topics: Mapping[str, int],
                           now_ms: int = 0, settings: ConsumerSettings | None = None) -> Outcome:
        """A ConsumerGroupHeartbeat; a group is created by the records of its first member's join. A classic
        group with members is upgraded by a joining member, and a consumer group whose last member of this
        protocol leaves is downgraded, as the migration policy allows (see `migration`). `settings`: the group's
        own (its group configs over the broker's), applied from this heartbeat on."""
        settings = settings or self.settings.consumer
        if group_id in self.share_groups:
            return _consumer_error(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        group = self.consumer_groups.get(group_id)
        if group is not None:
            group.settings = settings
        conversion: list[Record] = []
        if group is None:
            classic = self.groups.get(group_id)
            if classic is not None and not classic.is_empty():
                if self._upgrade_waits(classic, request):
                    # Retriable (clients treat GROUP_ID_NOT_FOUND as fatal): once Stable the group converts.
                    return _consumer_error(ErrorCode.coordinator_load_in_progress,
                                           f"group {group_id} is rebalancing; it converts once it is stable")
                conversion = self._upgrade(classic, request, topics) or []
                if not conversion:
                    return _consumer_error(ErrorCode.group_id_not_found,
                                           f"group {group_id} is not a consumer group")
            elif request.member_epoch != JOIN_EPOCH:
                return _consumer_error(ErrorCode.group_id_not_found, f"group {group_id} not found")
            group = ConsumerGroup(group_id, settings)
            for record in conversion:  # a scratch copy: the shard changes when the records are replayed
                if isinstance(record.key, ConsumerGroupKey):
                    group.replay(record.key, record.value)
        outcome = group.heartbeat(request, topics, lambda: self._new_member_id(request.client_id or "consumer"))
        if outcome.result.error != ErrorCode.none:
            return Outcome([], outcome.result)
        if request.member_epoch == LEAVE_EPOCH and self._may_downgrade(group, [request.member_id]):
            downgrade = migration.downgrade_records(group, [request.member_id], now_ms)
            if downgrade is not None:
                return Outcome(downgrade, outcome.result)
        return Outcome(conversion + outcome.records, outcome.result)

    def _upgrade(self, classic: ClassicGroup, request: HeartbeatRequest,
                 topics: Mapping[str, int]) -> list[Record] | None:
        if request.member_epoch != JOIN_EPOCH or not migration.upgrade_allowed(self.settings.consumer.migration_policy):
            return None
        return migration.upgrade_records(classic, topics)

    def _upgrade_waits(self, classic: ClassicGroup, request: HeartbeatRequest) -> bool:
        """A join that would upgrade a classic group in the middle of a rebalance: it must wait (see
        `migration.upgrade_records`)."""
        return (request.member_epoch == JOIN_EPOCH
                and migration.upgrade_allowed(self.settings.consumer.migration_policy)
                and classic.state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE))

    def _may_downgrade(self, group: ConsumerGroup, leaving: list[str]) -> bool:
        """Only the departure of members of the consumer protocol downgrades, and only if the policy allows."""
        return (migration.downgrade_allowed(self.settings.consumer.migration_policy)
                and any(m in group.members and group.members[m].classic is None for m in leaving))

    def expire_consumer(self, group: ConsumerGroup, now_ms: int, topics: Mapping[str, int]) -> list[Record]:
        """Records removing the members whose deadline passed: a downgrade if they were the last members of the
        consumer protocol and classic members remain."""
        expired = group.expired(now_ms)
        if not expired:
            return []
        if self._may_downgrade(group, expired):
            downgrade = migration.downgrade_records(group, expired, now_ms)
            if downgrade is not None:
                return downgrade
        return group.remove_members(expired, topics)

    def next_deadline_ms(self, group_id: str) -> int | None:
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            return consumer.next_deadline_ms()
        group = self.groups.get(group_id)
        return group.next_deadline_ms() if group is not None else None

    # -- offsets -------------------------------------------------------------------------------------------

    def commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
               commits: Sequence[OffsetCommit], version: int, now_ms: int) -> Write:
        """Validate an OffsetCommit; the records to append carry the partitions that passed."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            # The generation field carries the member epoch for these groups.
            group_error = consumer.validate_offset_commit(member_id, generation_id, version)
        else:
            group_error = rules.validate_commit(self.groups.get(group_id), generation_id, member_id, instance_id,
                                                version)
        return self._offset_records(group_id, group_error, commits, now_ms)

    def txn_commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                   commits: Sequence[OffsetCommit], now_ms: int) -> Write:
        """Validate a TxnOffsetCommit; the records are the same as a commit's, appended in the producer's
        transactional batch. `generation_id` is the member epoch for a consumer (KIP-848) group."""
        consumer = self.consumer_groups.get(group_id)
        group = consumer if consumer is not None else self.groups.get(group_id)
        group_error = rules.validate_txn_commit(group, generation_id, member_id, instance_id)
        return self._offset_records(group_id, group_error, commits, now_ms)

    def _offset_records(self, group_id: str, group_error: ErrorCode, commits: Sequence[OffsetCommit],
                        now_ms: int) -> Write:
        if group_error != ErrorCode.none:
            return Write([], [group_error] * len(commits))
        records, errors = [], []
        for c in commits:
            error = rules.metadata_error(c.metadata, self.settings.offset_metadata_max_bytes)
            errors.append(error)
            if error == ErrorCode.none:
                value = OffsetValue(c.offset, c.leader_epoch, c.metadata or rules.NO_METADATA, now_ms)
                records.append(Record(OffsetKey(group_id, c.topic, c.partition), value))
        return Write(records, errors)

    def fetch(self, group_id: str, requested: Requested | None, require_stable: bool = False) -> Fetched:
        unstable = self.pending.partitions(group_id) if require_stable else {}
        return rules.fetch(self.offsets.visible(group_id), requested, unstable)

    def _has_offset(self, group_id: str, tp: TopicPartition) -> bool:
        """A committed or a pending offset: either needs a tombstone to be deleted."""
        return tp in self.offsets.of(group_id) or tp in self.pending.partitions(group_id)

    def _offset_partitions(self, group_id: str) -> list[TopicPartition]:
        pending = [tp for tp in self.pending.partitions(group_id) if tp not in self.offsets.of(group_id)]
        return [*self.offsets.of(group_id), *sorted(pending)]

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]) -> tuple[ErrorCode, Write]:
        """OffsetDelete: a tombstone per partition, except for topics the group still consumes."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            return ErrorCode.none, self._delete_offsets(group_id, partitions, consumer.subscribed_topics())
        group = self.groups.get(group_id)
        group_error = rules.validate_offset_delete(group)
        if group_error != ErrorCode.none or group is None:
            return group_error, Write([], [])
        records, errors = [], []
        for topic, partition in partitions:
            if rules.subscribed(group, topic):
                errors.append(ErrorCode.group_subscribed_to_topic)
                continue
            errors.append(ErrorCode.none)
            if self._has_offset(group_id, (topic, partition)):
                records.append(Record(OffsetKey(group_id, topic, partition), None))
        return ErrorCode.none, Write(records, errors)

    def _delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition], topics: frozenset[str]) -> Write:
        errors = [ErrorCode.group_subscribed_to_topic if t in topics else ErrorCode.none for t, _ in partitions]
        records = [Record(OffsetKey(group_id, t, p), None) for t, p in partitions
                   if t not in topics and self._has_offset(group_id, (t, p))]
        return Write(records, errors)

    def delete_group(self, group_id: str) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups for one group: tombstones for its offsets and for the group itself."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if not consumer.is_empty():
                return ErrorCode.non_empty_group, []
            offsets = [Record(OffsetKey(group_id, t, p), None) for t, p in self._offset_partitions(group_id)]
            return ErrorCode.none, offsets + consumer.tombstones()
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state != GroupState.EMPTY:
            return ErrorCode.non_empty_group, []
        return ErrorCode.none, self._tombstones(group_id, self._offset_partitions(group_id), delete_group=True)

    def _tombstones(self, group_id: str, partitions: Sequence[TopicPartition], delete_group: bool) -> list[Record]:
        records = [Record(OffsetKey(group_id, t, p), None) for t, p in partitions]
        if delete_group:
            records.append(Record(GroupKey(group_id), None))
        return records

    def expire(self, now_ms: int) -> list[list[Record]]:
        """Tombstones for expired offsets, and for empty groups left without offsets; one list per group."""
        changes = []
        for group_id in sorted(set(self.groups) | set(self.offsets.groups()) | set(self.consumer_groups)):
            consumer = self.consumer_groups.get(group_id)
            if consumer is not None:
                changes += self._expire_consumer(consumer, now_ms)
                continue
            group = self.groups.get(group_id)
            offsets = self.offsets.of(group_id)
            gone = rules.expired(group, offsets, now_ms, self.settings.offsets_retention_ms)
            gone = self._not_pending(group_id, gone)
            idle = group is None or (group.state == GroupState.EMPTY and not group.has_pending_members())
            forget = idle and len(gone) == len(offsets) and not self.pending.has_group(group_id)
            if gone or forget:
                changes.append(self._tombstones(group_id, gone, delete_group=forget))
        return changes

    def _expire_consumer(self, group: ConsumerGroup, now_ms: int) -> list[list[Record]]:
        """An empty consumer group's offsets expire one by one after their commit; the group goes with the
        last of them. A group with members keeps everything."""
        if not group.is_empty():
            return []
        offsets = self.offsets.of(group.group_id)
        retention = self.settings.offsets_retention_ms
        gone = self._not_pending(group.group_id, [tp for tp, v in offsets.items()
                                                  if now_ms - v.commit_timestamp_ms >= retention])
        forget = len(gone) == len(offsets) and not self.pending.has_group(group.group_id)
        if not gone and not forget:
            return []
        records = [Record(OffsetKey(group.group_id, t, p), None) for t, p in gone]
        if forget:
            records += group.tombstones()
        return [records]

    def _not_pending(self, group_id: str, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Expiry waits for open transactions: their commit would otherwise land after the tombstone."""
        pending = self.pending.partitions(group_id)
        return [tp for tp in partitions if tp not in pending]

    def unload(self) -> Effects:
        """This broker no longer coordinates the partition: answer whatever waits."""
        fx = Effects()
        for group in self.groups.values():
            fx.merge(group.mark_dead())
        self.groups.clear()
        self.consumer_groups.clear()
        self.pending.clear()  # rebuilt from the log by whoever loads the partition next
        return fx


def _consumer_error(error: ErrorCode, message: str) -> Outcome:
    return Outcome([], HeartbeatResult(error, message=message))
