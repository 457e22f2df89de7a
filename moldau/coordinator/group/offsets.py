"""Committed offsets: the store, and Kafka's rules for committing, fetching, deleting and expiring them.

The store changes only through `apply`, which takes the records of `__consumer_offsets` (a commit or a
tombstone), so serving requests and replaying the log after a restart go through the same code.

Offsets committed inside a transaction (TxnOffsetCommit, KIP-98) wait in `PendingOffsets`, keyed by the
producer id that wrote them, until the transaction's marker reaches the partition: a commit marker moves them
into the store, an abort drops them. Both stores remember the log offset of each record, because a pending
offset is applied on commit only if its record is newer than the committed one's: a plain commit written
while the transaction was open wins, whatever order the two reach the store in.

OffsetFetch answers only what is replicated. The store applies a record as soon as it is in the leader's log
(the write path's rules need the latest state), but once told the partition's high watermark it keeps, for
each change above it, the value from before; `visible` answers from those until the high watermark passes.
A commit that fails to replicate, and is lost when the leader changes, is then never shown to anyone, as in
Kafka, whose coordinator reads its state at the last committed offset.
"""

from __future__ import annotations

from collections.abc import Container, Iterator, Mapping, Sequence
from dataclasses import dataclass

from moldau.coordinator.group.classic import ClassicGroup, GroupState
from moldau.coordinator.group.consumer import ConsumerGroup
from moldau.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from moldau.coordinator.group.records import OffsetKey, OffsetValue
from moldau.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
# Requested partitions per topic, and the answer: per topic, each partition's committed offset if any, or
# UNSTABLE_OFFSET_COMMIT for a partition a transaction still holds a commit for (when stable offsets are asked).
Requested = Sequence[tuple[str, Sequence[int]]]
FetchedValue = OffsetValue | ErrorCode | None
Fetched = list[tuple[str, list[tuple[int, FetchedValue]]]]

# What OffsetFetch answers for a partition without a committed offset.
NO_OFFSET = -1
NO_METADATA = ""
# The log offset of a record replayed without one (tests, and callers that do not track positions).
UNKNOWN_LOG_OFFSET = -1


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    """One partition of an OffsetCommit request."""

    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


class OffsetStore:
    """The committed offsets of the groups of one shard: group -> (topic, partition) -> value."""

    def __init__(self) -> None:
        self._by_group: dict[str, dict[TopicPartition, OffsetValue]] = {}
        self._log_offsets: dict[OffsetKey, int] = {}
        # None until `replicated_to` is first called: every change is visible at once (no partition behind it).
        self._high_watermark: int | None = None
        # Changes at or above the high watermark, oldest first: (log offset, the value before the change).
        self._unreplicated: dict[str, dict[TopicPartition, list[tuple[int, OffsetValue | None]]]] = {}

    def replicated_to(self, high_watermark: int) -> None:
        """The partition's high watermark: changes below it are replicated, and visible from now on."""
        self._high_watermark = high_watermark
        for group in list(self._unreplicated):
            partitions = self._unreplicated[group]
            for tp in list(partitions):
                pending = [change for change in partitions[tp] if change[0] >= high_watermark]
                if pending:
                    partitions[tp] = pending
                else:
                    del partitions[tp]
            if not partitions:
                del self._unreplicated[group]

    def apply(self, key: OffsetKey, value: OffsetValue | None, log_offset: int = UNKNOWN_LOG_OFFSET,
              visible_at: int | None = None) -> None:
        """Replay one record: a commit replaces the partition's offset, a tombstone removes it.

        The change becomes visible once the high watermark passes `visible_at` (default: the record's own
        offset; a transactional commit's is its marker's)."""
        at = log_offset if visible_at is None else visible_at
        if self._high_watermark is not None and at >= self._high_watermark:
            tp = (key.topic, key.partition)
            self._unreplicated.setdefault(key.group, {}).setdefault(tp, []).append((at, self.of(key.group).get(tp)))
        partitions = self._by_group.get(key.group)
        if value is not None:
            if partitions is None:
                partitions = self._by_group[key.group] = {}
            partitions[(key.topic, key.partition)] = value
            self._log_offsets[key] = log_offset
        elif partitions is not None:
            partitions.pop((key.topic, key.partition), None)
            self._log_offsets.pop(key, None)
            if not partitions:
                del self._by_group[key.group]

    def materialize(self, key: OffsetKey, pending: PendingOffset, marker_offset: int = UNKNOWN_LOG_OFFSET) -> None:
        """Apply a pending offset whose transaction committed, unless a newer record already set the partition."""
        current = self._log_offsets.get(key)
        if current is None or pending.log_offset > current:
            self.apply(key, pending.value, pending.log_offset, visible_at=marker_offset)

    def of(self, group: str) -> Mapping[TopicPartition, OffsetValue]:
        """The group's offsets as last written (replicated or not): what the write path's rules go by."""
        return self._by_group.get(group, {})

    def visible(self, group: str) -> Mapping[TopicPartition, OffsetValue]:
        """The group's offsets as of the high watermark: what OffsetFetch answers."""
        unreplicated = self._unreplicated.get(group)
        if not unreplicated:
            return self.of(group)
        offsets = dict(self.of(group))
        for tp, changes in unreplicated.items():
            before = changes[0][1]
            if before is None:
                offsets.pop(tp, None)
            else:
                offsets[tp] = before
        return offsets

    def has_offsets(self, group: str) -> bool:
        return group in self._by_group

    def groups(self) -> Iterator[str]:
        return iter(list(self._by_group))


@dataclass(frozen=True, slots=True)
class PendingOffset:
    """An offset committed inside a transaction that has not ended, and where its record is in the log."""

    value: OffsetValue
    log_offset: int


class PendingOffsets:
    """Transactional commits of one shard whose transaction is still open.

    Kept per producer id (a transaction's marker names only its producer) and indexed by group and partition
    (OffsetFetch's `require_stable`, deletion and expiry ask about those). A producer has one open transaction
    at a time, which may commit for several groups of the shard.
    """

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[OffsetKey, PendingOffset]] = {}
        self._producers: dict[str, dict[TopicPartition, set[int]]] = {}  # group -> partition -> producer ids

    def add(self, producer_id: int, key: OffsetKey, pending: PendingOffset) -> None:
        self._by_producer.setdefault(producer_id, {})[key] = pending
        self._producers.setdefault(key.group, {}).setdefault((key.topic, key.partition), set()).add(producer_id)

    def end(self, producer_id: int) -> dict[OffsetKey, PendingOffset]:
        """Forget a producer's transaction; returns what it had committed."""
        offsets = self._by_producer.pop(producer_id, {})
        for key in offsets:
            self._unindex(key, producer_id)
        return offsets

    def discard(self, key: OffsetKey) -> None:
        """A tombstone for the partition: no open transaction's commit for it survives it (as in Kafka)."""
        for producer_id in self._producers.get(key.group, {}).get((key.topic, key.partition), set()).copy():
            offsets = self._by_producer[producer_id]
            del offsets[key]
            if not offsets:
                del self._by_producer[producer_id]
            self._unindex(key, producer_id)

    def _unindex(self, key: OffsetKey, producer_id: int) -> None:
        partitions = self._producers[key.group]
        tp = (key.topic, key.partition)
        partitions[tp].discard(producer_id)
        if not partitions[tp]:
            del partitions[tp]
            if not partitions:
                del self._producers[key.group]

    def partitions(self, group: str) -> Mapping[TopicPartition, set[int]]:
        """The group's partitions with an open transactional commit, and the producers holding them."""
        return self._producers.get(group, {})

    def has_group(self, group: str) -> bool:
        return group in self._producers

    def producers(self) -> Iterator[int]:
        return iter(list(self._by_producer))

    def clear(self) -> None:
        self._by_producer.clear()
        self._producers.clear()


def validate_commit(group: ClassicGroup | None, generation_id: int, member_id: str, instance_id: str | None,
                    version: int) -> ErrorCode:
    """Whether this member may commit for this group now (Kafka's classic-group rules).

    Commits with generation -1, no member id and no instance id come from clients that manage partitions
    themselves ("simple" commits): allowed while the group has no members, and they create the group.
    """
    if group is None:
        if generation_id < 0:
            return ErrorCode.none
        # From v9 a missing group is named as such; older clients expect ILLEGAL_GENERATION.
        return ErrorCode.group_id_not_found if version >= 9 else ErrorCode.illegal_generation
    if group.state == GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.state == GroupState.EMPTY:
        return ErrorCode.none
    if generation_id >= 0 or member_id or instance_id is not None:
        error = _validate_member(group, member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
    elif group.state != GroupState.EMPTY:
        return ErrorCode.unknown_member_id
    if group.state == GroupState.COMPLETING_REBALANCE:
        # The member knows the new generation but has no assignment yet: it must finish the rebalance first.
        return ErrorCode.rebalance_in_progress
    return ErrorCode.none


def validate_txn_commit(group: ClassicGroup | ConsumerGroup | None, generation_id: int, member_id: str,
                        instance_id: str | None) -> ErrorCode:
    """Whether a TxnOffsetCommit may go ahead (Kafka's rules, KIP-447).

    Looser than OffsetCommit for classic groups: a commit without member and generation (the request before
    v3, or a producer given no group metadata) is accepted in any state, and a rebalance in progress does not
    refuse a valid member. A missing group is created by a simple commit; one naming a generation gets
    ILLEGAL_GENERATION.
    """
    if isinstance(group, ConsumerGroup):
        return _validate_txn_consumer(group, member_id, generation_id)
    if group is None:
        return ErrorCode.none if generation_id < 0 else ErrorCode.illegal_generation
    if group.state == GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.state == GroupState.EMPTY:
        return ErrorCode.none
    if generation_id < 0 and not member_id and instance_id is None:
        return ErrorCode.none
    error = _validate_member(group, member_id, instance_id)
    if error != ErrorCode.none:
        return error
    return ErrorCode.none if generation_id == group.generation_id else ErrorCode.illegal_generation


def _validate_txn_consumer(group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
    """KIP-848 groups: a simple commit only while the group has no members; else the member and its epoch.

    A stale epoch is ILLEGAL_GENERATION, as Kafka answers: TxnOffsetCommit clients do not know
    STALE_MEMBER_EPOCH and would fail the transaction on it instead of refreshing their group metadata.
    """
    if member_epoch < 0 and group.is_empty():
        return ErrorCode.none
    if not member_id:
        return ErrorCode.unknown_member_id
    error = group.validate_offset_commit(member_id, member_epoch)
    return ErrorCode.illegal_generation if error == ErrorCode.stale_member_epoch else error


def _validate_member(group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
    if instance_id is not None:
        current = group.static_member_id(instance_id)
        if current is None:
            return ErrorCode.unknown_member_id
        return ErrorCode.none if current == member_id else ErrorCode.fenced_instance_id
    return ErrorCode.none if member_id in group.members else ErrorCode.unknown_member_id


def metadata_error(metadata: str | None, max_bytes: int) -> ErrorCode:
    if metadata is not None and len(metadata.encode()) > max_bytes:
        return ErrorCode.offset_metadata_too_large
    return ErrorCode.none


def fetch(offsets: Mapping[TopicPartition, OffsetValue], requested: Requested | None,
          unstable: Container[TopicPartition] = ()) -> Fetched:
    """Committed offsets per topic for the requested partitions, or for all committed ones (`requested` None).

    Partitions in `unstable` (those with an open transactional commit, when the client requires stable offsets)
    answer UNSTABLE_OFFSET_COMMIT instead, as Kafka does per partition; the client retries until the
    transaction ends. With `requested` None only committed partitions are listed, unstable or not.
    """
    def value(tp: TopicPartition) -> FetchedValue:
        return ErrorCode.unstable_offset_commit if tp in unstable else offsets.get(tp)

    if requested is None:
        by_topic: dict[str, list[tuple[int, FetchedValue]]] = {}
        for tp in sorted(offsets):
            by_topic.setdefault(tp[0], []).append((tp[1], value(tp)))
        return list(by_topic.items())
    return [(topic, [(p, value((topic, p))) for p in partitions]) for topic, partitions in requested]


def validate_offset_delete(group: ClassicGroup | None) -> ErrorCode:
    """Whether OffsetDelete may run: the group must exist; a non-empty one must use the consumer protocol,
    which is what lets the broker know the topics it still consumes."""
    if group is None or group.state == GroupState.DEAD:
        return ErrorCode.group_id_not_found
    if not group.is_empty() and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return ErrorCode.non_empty_group
    return ErrorCode.none


def subscribed(group: ClassicGroup, topic: str) -> bool:
    if group.is_empty():
        return False
    topics = group.subscribed_topics()
    # A group whose subscriptions cannot be read is treated as consuming everything: never delete under it.
    return topics is None or topic in topics


def expired(group: ClassicGroup | None, offsets: Mapping[TopicPartition, OffsetValue], now_ms: int,
            retention_ms: int) -> list[TopicPartition]:
    """The offsets `offsets.retention.minutes` has run out for (KIP-211, KIP-496).

    - a group that uses group management and is Empty: all offsets, once the group has been empty that long;
    - a Stable consumer group: offsets of topics it no longer subscribes to, that long after their commit;
    - a group that only ever had simple commits: each offset, that long after its commit;
    - any other group (rebalancing, or members whose subscriptions cannot be read): none.
    """
    if group is None or group.protocol_type is None:
        return [tp for tp, v in offsets.items() if now_ms - v.commit_timestamp_ms >= retention_ms]
    if group.state == GroupState.EMPTY:
        return [tp for tp in offsets if now_ms - group.state_timestamp_ms >= retention_ms]
    topics = group.subscribed_topics()
    if group.state != GroupState.STABLE or topics is None:
        return []
    return [tp for tp, v in offsets.items()
            if tp[0] not in topics and now_ms - v.commit_timestamp_ms >= retention_ms]
