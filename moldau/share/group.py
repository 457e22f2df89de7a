"""Share group membership (ShareGroupHeartbeat, KIP-932), sans-I/O.

Members heartbeat with the epoch they hold: 0 joins, -1 leaves, anything else must be the member's current epoch
(else FENCED_MEMBER_EPOCH; an unknown member id gets UNKNOWN_MEMBER_ID). The group epoch is bumped whenever what
assignments depend on changes: a member joins or leaves, a subscription changes, a subscribed topic gains
partitions. A member whose epoch lags the group epoch is given its assignment again and moves to the group epoch.

Assignment: every member gets every partition of the topics it subscribes to. KIP-932 allows a partition to be
assigned to many members, since its records are handed out one acquisition at a time by the share-partition;
giving every member every partition means a topic with fewer partitions than consumers (the usual work-queue
case, down to one partition) still keeps every consumer busy, and no member ever waits for a reassignment.

A member that has not heartbeated for `group.share.session.timeout.ms` is removed by `expire`, which returns who
left so the caller can release what they held.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
ASSIGNOR_NAME = "simple"

TopicPartitions = frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class MembershipSettings:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    max_size: int = 200


@dataclass(frozen=True, slots=True)
class Heartbeat:
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topics: tuple[str, ...] | None = None  # None: unchanged
    client_id: str = ""
    client_host: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = LEAVE_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged, not sent
    message: str | None = None


@dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int
    subscribed_topics: tuple[str, ...]
    session_deadline_ms: int
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    assignment: TopicPartitions = frozenset()


@dataclass
class ShareGroup:
    group_id: str
    settings: MembershipSettings
    epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    partition_counts: dict[str, int] = field(default_factory=dict)  # of subscribed topics, when last assigned

    @property
    def state(self) -> str:
        """Kafka's share group states: Empty or Stable (there is no rebalance to wait for)."""
        return "Stable" if self.members else "Empty"

    def subscribed_topics(self) -> frozenset[str]:
        return frozenset(t for m in self.members.values() for t in m.subscribed_topics)

    def heartbeat(self, request: Heartbeat, now_ms: int,
                  partitions_of: Callable[[str], int | None]) -> HeartbeatAnswer:
        """Answer one heartbeat; `partitions_of` tells a topic's partition count (None: no such topic)."""
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request.member_id)
        if request.member_epoch == JOIN_EPOCH:
            problem = self._join(request, now_ms)
            if problem is not None:
                return problem
        member = self.members.get(request.member_id)
        if member is None:
            return HeartbeatAnswer(ErrorCode.unknown_member_id, request.member_id,
                                   message=f"member {request.member_id} is not in group {self.group_id}")
        if request.member_epoch not in (JOIN_EPOCH, member.epoch):
            return HeartbeatAnswer(ErrorCode.fenced_member_epoch, request.member_id,
                                   message=f"epoch {request.member_epoch} is not the member's {member.epoch}")
        member.session_deadline_ms = now_ms + self.settings.session_timeout_ms
        self._update(member, request)
        self._follow_topics(partitions_of)
        return self._answer(member, partitions_of, request.member_epoch == JOIN_EPOCH)

    def expire(self, now_ms: int) -> list[str]:
        """Remove members whose session ran out; their ids."""
        gone = [m for m, member in self.members.items() if member.session_deadline_ms <= now_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.epoch += 1
        return gone

    # -- internals -----------------------------------------------------------------------------------------

    def _join(self, request: Heartbeat, now_ms: int) -> HeartbeatAnswer | None:
        if request.subscribed_topics is None:
            return HeartbeatAnswer(ErrorCode.invalid_request, request.member_id,
                                   message="subscribed topic names must be set when joining")
        if request.member_id not in self.members and len(self.members) >= self.settings.max_size:
            return HeartbeatAnswer(ErrorCode.group_max_size_reached, request.member_id,
                                   message=f"group {self.group_id} has {len(self.members)} members")
        self.members[request.member_id] = ShareMember(request.member_id, LEAVE_EPOCH, (), now_ms)
        self.epoch += 1
        return None

    def _leave(self, member_id: str) -> HeartbeatAnswer:
        if self.members.pop(member_id, None) is not None:
            self.epoch += 1
        return HeartbeatAnswer(ErrorCode.none, member_id, LEAVE_EPOCH)

    def _update(self, member: ShareMember, request: Heartbeat) -> None:
        member.client_id, member.client_host = request.client_id, request.client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        topics = request.subscribed_topics
        if topics is not None and tuple(sorted(set(topics))) != member.subscribed_topics:
            member.subscribed_topics = tuple(sorted(set(topics)))
            self.epoch += 1

    def _follow_topics(self, partitions_of: Callable[[str], int | None]) -> None:
        """Bump the epoch when a subscribed topic appeared, went away or gained partitions."""
        counts = {t: n for t in self.subscribed_topics() if (n := partitions_of(t)) is not None}
        if counts != self.partition_counts:
            self.partition_counts = counts
            self.epoch += 1

    def _answer(self, member: ShareMember, partitions_of: Callable[[str], int | None],
                joined: bool) -> HeartbeatAnswer:
        send = joined or member.epoch != self.epoch
        if send:
            member.epoch = self.epoch
            member.assignment = assignment_of(member.subscribed_topics, self.partition_counts)
        return HeartbeatAnswer(ErrorCode.none, member.member_id, member.epoch, self.settings.heartbeat_interval_ms,
                               member.assignment if send else None)


def assignment_of(topics: tuple[str, ...], partition_counts: Mapping[str, int]) -> TopicPartitions:
    """Every partition of every subscribed topic that exists."""
    return frozenset((t, p) for t in topics for p in range(partition_counts.get(t, 0)))
