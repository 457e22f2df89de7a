"""The groups and committed offsets that live on one partition of `__consumer_offsets`, sans-I/O.

Offsets and deletions change state only by replay: an operation validates and returns the records to append;
the caller appends them and then passes the same records to `replay`, as it does for every record when it loads
the partition after a restart. Group membership is the one exception, as in Kafka: the live group object is
the state, and its record (`group_record`) is a snapshot written whenever a generation is settled or the group
becomes empty, so replaying it rebuilds the group as last persisted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

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
    ConsumerGroup,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
    Outcome,
)
from moldau.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    Effects,
    Handle,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import Fetched, OffsetCommit, OffsetStore, Requested, TopicPartition
from moldau.coordinator.group.records import (
    CG_METADATA,
    ConsumerGroupKey,
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    Record,
)
from moldau.protocol.errors import ErrorCode


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
        self.offsets = OffsetStore()
        self._new_member_id = new_member_id

    def _new_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = ClassicGroup(group_id, self.settings.limits, now_ms, self._new_member_id)
        self.groups[group_id] = group
        return group

    # -- replay --------------------------------------------------------------------------------------------

    def replay(self, record: Record, now_ms: int) -> None:
        """Apply one record of this partition: the only way offsets and deletions change."""
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupKey):
            self._replay_consumer(key, value)
        elif isinstance(key, OffsetKey):
            assert value is None or isinstance(value, OffsetValue)
            if value is not None and key.group not in self.groups and key.group not in self.consumer_groups:
                # A group known only by its commits; dated by the record, so a reload dates it the same.
                self._new_group(key.group, value.commit_timestamp_ms)
            self.offsets.apply(key, value)
        elif value is None:
            group = self.groups.pop(key.group, None)
            if group is not None:
                group.mark_dead()  # deleted groups are empty: nothing is waiting
        else:
            assert isinstance(value, GroupValue)
            self.groups[key.group] = ClassicGroup.from_record(key.group, value, self.settings.limits, now_ms,
                                                              self._new_member_id)

    def _replay_consumer(self, key: ConsumerGroupKey, value: object | None) -> None:
        group = self.consumer_groups.get(key.group)
        if group is None:
            if value is None:
                return
            # An empty classic group (e.g. known only by its offsets) becomes a consumer group, as in Kafka.
            self.groups.pop(key.group, None)
            group = self.consumer_groups[key.group] = ConsumerGroup(key.group, self.settings.consumer)
        group.replay(key, value)
        if key.record_type == CG_METADATA and value is None:
            del self.consumer_groups[key.group]  # the group's deletion

    def replay_all(self, records: Iterable[Record], now_ms: int) -> None:
        for record in records:
            self.replay(record, now_ms)

    def group_record(self, group_id: str) -> Record:
        return Record(GroupKey(group_id), self.groups[group_id].to_record())

    # -- membership ----------------------------------------------------------------------------------------

    def join(self, group_id: str, handle: Handle, request: JoinRequest, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
        if group_id in self.consumer_groups:
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
        if group is None:
            fx = Effects()
            fx.complete(handle, SyncResult(ErrorCode.unknown_member_id))
            return fx
        return group.sync(handle, request, now_ms)

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                  now_ms: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        return group.heartbeat(member_id, instance_id, generation_id, now_ms)

    def leave(self, group_id: str, identities: Sequence[tuple[str, str | None]], now_ms: int) -> LeaveResult:
        group = self.groups.get(group_id)
        if group is None:
            return LeaveResult(ErrorCode.none, tuple(ErrorCode.unknown_member_id for _ in identities), Effects())
        return group.leave(identities, now_ms)

    def tick(self, group_id: str, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
        return group.tick(now_ms) if group is not None else Effects()

    # -- consumer groups (KIP-848) -------------------------------------------------------------------------

    def consumer_heartbeat(self, group_id: str, request: HeartbeatRequest, topics: dict[str, int]) -> Outcome:
        """A ConsumerGroupHeartbeat; a group is created by the records of its first member's join."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            classic = self.groups.get(group_id)
            if classic is not None and not classic.is_empty():
                return _consumer_error(ErrorCode.group_id_not_found, f"group {group_id} is not a consumer group")
            if request.member_epoch != 0:
                return _consumer_error(ErrorCode.group_id_not_found, f"group {group_id} not found")
            group = ConsumerGroup(group_id, self.settings.consumer)
        return group.heartbeat(request, topics, lambda: self._new_member_id(request.client_id or "consumer"))

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
            group_error = consumer.validate_offset_commit(member_id, generation_id)
        else:
            group_error = rules.validate_commit(self.groups.get(group_id), generation_id, member_id, instance_id,
                                                version)
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

    def fetch(self, group_id: str, requested: Requested | None) -> Fetched:
        return rules.fetch(self.offsets.of(group_id), requested)

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
            if (topic, partition) in self.offsets.of(group_id):
                records.append(Record(OffsetKey(group_id, topic, partition), None))
        return ErrorCode.none, Write(records, errors)

    def _delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition], topics: frozenset[str]) -> Write:
        errors = [ErrorCode.group_subscribed_to_topic if t in topics else ErrorCode.none for t, _ in partitions]
        records = [Record(OffsetKey(group_id, t, p), None) for t, p in partitions
                   if t not in topics and (t, p) in self.offsets.of(group_id)]
        return Write(records, errors)

    def delete_group(self, group_id: str) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups for one group: tombstones for its offsets and for the group itself."""
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if not consumer.is_empty():
                return ErrorCode.non_empty_group, []
            offsets = [Record(OffsetKey(group_id, t, p), None) for t, p in self.offsets.of(group_id)]
            return ErrorCode.none, offsets + consumer.tombstones()
        group = self.groups.get(group_id)
        if group is None or group.state == GroupState.DEAD:
            return ErrorCode.group_id_not_found, []
        if group.state != GroupState.EMPTY:
            return ErrorCode.non_empty_group, []
        return ErrorCode.none, self._tombstones(group_id, list(self.offsets.of(group_id)), delete_group=True)

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
            idle = group is None or (group.state == GroupState.EMPTY and not group.has_pending_members())
            forget = idle and len(gone) == len(offsets)
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
        gone = [tp for tp, v in offsets.items() if now_ms - v.commit_timestamp_ms >= retention]
        if not gone and offsets:
            return []
        records = [Record(OffsetKey(group.group_id, t, p), None) for t, p in gone]
        if len(gone) == len(offsets):
            records += group.tombstones()
        return [records]

    def unload(self) -> Effects:
        """This broker no longer coordinates the partition: answer whatever waits."""
        fx = Effects()
        for group in self.groups.values():
            fx.merge(group.mark_dead())
        self.groups.clear()
        self.consumer_groups.clear()
        return fx


def _consumer_error(error: ErrorCode, message: str) -> Outcome:
    return Outcome([], HeartbeatResult(error, message=message))
