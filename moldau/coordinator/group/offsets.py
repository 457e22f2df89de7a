"""Committed offsets: the store, and Kafka's rules for committing, fetching, deleting and expiring them.

The store changes only through `apply`, which takes the records of `__consumer_offsets` (a commit or a
tombstone), so serving requests and replaying the log after a restart go through the same code.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from moldau.coordinator.group.classic import ClassicGroup, GroupState
from moldau.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from moldau.coordinator.group.records import OffsetKey, OffsetValue
from moldau.protocol.errors import ErrorCode

TopicPartition = tuple[str, int]
# Requested partitions per topic, and the answer: per topic, each partition's committed offset if any.
Requested = Sequence[tuple[str, Sequence[int]]]
Fetched = list[tuple[str, list[tuple[int, OffsetValue | None]]]]

# What OffsetFetch answers for a partition without a committed offset.
NO_OFFSET = -1
NO_METADATA = ""


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

    def apply(self, key: OffsetKey, value: OffsetValue | None) -> None:
        """Replay one record: a commit replaces the partition's offset, a tombstone removes it."""
        partitions = self._by_group.get(key.group)
        if value is not None:
            if partitions is None:
                partitions = self._by_group[key.group] = {}
            partitions[(key.topic, key.partition)] = value
        elif partitions is not None:
            partitions.pop((key.topic, key.partition), None)
            if not partitions:
                del self._by_group[key.group]

    def of(self, group: str) -> Mapping[TopicPartition, OffsetValue]:
        return self._by_group.get(group, {})

    def has_offsets(self, group: str) -> bool:
        return group in self._by_group

    def groups(self) -> Iterator[str]:
        return iter(list(self._by_group))


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


def fetch(offsets: Mapping[TopicPartition, OffsetValue], requested: Requested | None) -> Fetched:
    """Committed offsets per topic for the requested partitions, or for all committed ones (`requested` None)."""
    if requested is None:
        by_topic: dict[str, list[tuple[int, OffsetValue | None]]] = {}
        for (topic, partition), value in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, value))
        return list(by_topic.items())
    return [(topic, [(p, offsets.get((topic, p))) for p in partitions]) for topic, partitions in requested]


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
