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
from moldau.coordinator.group.records import GroupKey, OffsetKey, OffsetValue, Record
from moldau.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class ShardSettings:
    limits: GroupLimits = field(default_factory=GroupLimits)
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


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
        if isinstance(key, OffsetKey):
            assert value is None or isinstance(value, OffsetValue)
            if value is not None and key.group not in self.groups:
                # A group known only by its commits; dated by the record, so a reload dates it the same.
                self._new_group(key.group, value.commit_timestamp_ms)
            self.offsets.apply(key, value)
        elif value is None:
            group = self.groups.pop(key.group, None)
            if group is not None:
                group.mark_dead()  # deleted groups are empty: nothing is waiting
        else:
            assert not isinstance(value, OffsetValue)
            self.groups[key.group] = ClassicGroup.from_record(key.group, value, self.settings.limits, now_ms,
                                                              self._new_member_id)

    def replay_all(self, records: Iterable[Record], now_ms: int) -> None:
        for record in records:
            self.replay(record, now_ms)

    def group_record(self, group_id: str) -> Record:
        return Record(GroupKey(group_id), self.groups[group_id].to_record())

    # -- membership ----------------------------------------------------------------------------------------

    def join(self, group_id: str, handle: Handle, request: JoinRequest, now_ms: int) -> Effects:
        group = self.groups.get(group_id)
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

    # -- offsets -------------------------------------------------------------------------------------------

    def commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
               commits: Sequence[OffsetCommit], version: int, now_ms: int) -> Write:
        """Validate an OffsetCommit; the records to append carry the partitions that passed."""
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

    def delete_group(self, group_id: str) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups for one group: tombstones for its offsets and for the group itself."""
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
        for group_id in sorted(set(self.groups) | set(self.offsets.groups())):
            group = self.groups.get(group_id)
            offsets = self.offsets.of(group_id)
            gone = rules.expired(group, offsets, now_ms, self.settings.offsets_retention_ms)
            idle = group is None or (group.state == GroupState.EMPTY and not group.has_pending_members())
            forget = idle and len(gone) == len(offsets)
            if gone or forget:
                changes.append(self._tombstones(group_id, gone, delete_group=forget))
        return changes

    def unload(self) -> Effects:
        """This broker no longer coordinates the partition: answer whatever waits."""
        fx = Effects()
        for group in self.groups.values():
            fx.merge(group.mark_dead())
        self.groups.clear()
        return fx
