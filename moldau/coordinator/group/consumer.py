"""One consumer group of the next-generation protocol (KIP-848), sans-I/O.

Members heartbeat (ConsumerGroupHeartbeat); the broker computes the assignment. Epochs order everything:

- the group epoch is bumped whenever what the assignment depends on changes: a member joins or leaves, a
  subscription changes, or a subscribed topic's partition count changes (a topic created or deleted that a
  member's regex matches changes its subscription: regexes are resolved against the topics at every
  heartbeat, `topic_regex`, and with an authorizer match only topics the member's principal may DESCRIBE);
- the target assignment is recomputed by the server-side assignor when its epoch lags the group epoch;
- each member converges on its target incrementally, on its own heartbeats: partitions it must give up are
  first revoked (the member keeps its epoch until its heartbeat no longer reports them as owned), then it moves
  to the target epoch and is given the target partitions no other member still holds; those still held are
  handed over on a later heartbeat, once released. Members not affected keep consuming: there is no
  group-wide barrier.

State changes only by replaying records (`replay`): `heartbeat`, `tick` and `leave` validate and return the
records to append plus the answer to give once they are durable; the caller appends, then replays the same
records, exactly as loading the partition after a restart does. Liveness (session and revocation deadlines)
is not durable: a reloaded group gives every member a fresh session.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from moldau.coordinator.group.assignors import ASSIGNORS, UNIFORM, TopicPartition, assign
from moldau.coordinator.group.records import (
    CG_CURRENT,
    CG_MEMBER,
    CG_METADATA,
    CG_PARTITIONS,
    CG_TARGET_MEMBER,
    CG_TARGET_METADATA,
    Assignment,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberValue,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    PartitionMetadataValue,
    Record,
    TargetEpochValue,
    TargetMemberValue,
)
from moldau.coordinator.group.topic_regex import InvalidRegex, matching_topics
from moldau.coordinator.group.topic_regex import validate as validate_regex
from moldau.protocol.errors import ErrorCode

GROUP_TYPE = "consumer"
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

STABLE, UNREVOKED, UNRELEASED = 0, 1, 2
# May this principal, from this host, DESCRIBE this topic? (principal, host, topic); the broker's authorizer.
TopicVisibility = Callable[[str, str, str], bool]
# What a member's regex is resolved with: the regex, and the principal and host whose DESCRIBE rights filter it.
_Resolver = tuple[str, str | None, str]
# OffsetCommit carries a member epoch from this version on (KIP-848); members of this protocol need it.
KIP848_OFFSET_COMMIT_VERSION = 9

V = TypeVar("V")
TPs = frozenset[TopicPartition]
_NONE: TPs = frozenset()


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Broker configs of consumer groups (`group.consumer.*`)."""

    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ASSIGNORS
    max_size: int = 2**31 - 1
    # group.consumer.migration.policy: which conversions of a group with members are allowed (KIP-848).
    migration_policy: str = "bidirectional"
    # Which topics a regex may resolve to for a member (None: no authorizer, every topic). A name subscribed
    # to explicitly is checked before the heartbeat gets here (TOPIC_AUTHORIZATION_FAILED), as in Kafka.
    topic_visible: TopicVisibility | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat with topic ids already resolved to names; None means "unchanged"."""

    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topics: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: TPs | None = None
    client_id: str = ""
    client_host: str = ""
    classic: ClassicMemberMetadata | None = None  # a JoinGroup of a classic member, put in these terms
    principal: str | None = None  # who sent it ("User:alice"); None: unchanged


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    member_id: str = ""
    member_epoch: int = LEAVE_EPOCH
    heartbeat_interval_ms: int = 0
    assignment: TPs | None = None  # None: unchanged, not sent
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """Records to append, and the answer to give once they are in the log."""

    records: list[Record]
    result: HeartbeatResult


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    member_epoch: int = JOIN_EPOCH
    previous_member_epoch: int = JOIN_EPOCH
    state: int = STABLE
    assigned: TPs = _NONE
    pending_revocation: TPs = _NONE


@dataclass(slots=True)
class Liveness:
    session_deadline_ms: int
    revocation_deadline_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    metadata: ConsumerMemberValue
    current: MemberAssignment
    target: TPs


def to_assignment(tps: TPs) -> Assignment:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    return tuple((t, tuple(ps)) for t, ps in by_topic.items())


def from_assignment(assignment: Assignment) -> TPs:
    return frozenset((t, p) for t, ps in assignment for p in ps)


@dataclass
class ConsumerGroup:
    """The durable state (rebuilt by `replay`) and the live deadlines of one consumer group."""

    group_id: str
    settings: ConsumerSettings
    epoch: int = 0
    partition_metadata: dict[str, int] = field(default_factory=dict)
    members: dict[str, ConsumerMemberValue] = field(default_factory=dict)
    target_epoch: int = 0
    targets: dict[str, TPs] = field(default_factory=dict)
    current: dict[str, MemberAssignment] = field(default_factory=dict)
    liveness: dict[str, Liveness] = field(default_factory=dict)
    group_type: str = GROUP_TYPE
    # Per regex and whose rights filter it, the topics mapping it was last resolved against and the result: the
    # coordinator hands the same read-only mapping to every heartbeat until the metadata (ACLs included)
    # changes, so a regex is matched against the topics once per change, not at every heartbeat of every member.
    _resolved: dict[_Resolver, tuple[Mapping[str, int], frozenset[str]]] = field(default_factory=dict, repr=False,
                                                                                compare=False)

    # -- views ---------------------------------------------------------------------------------------------

    @property
    def state(self) -> str:
        """Kafka's consumer group states: Empty, Assigning, Reconciling, Stable."""
        if not self.members:
            return "Empty"
        if self.target_epoch < self.epoch:
            return "Assigning"
        if any(c.member_epoch != self.target_epoch or c.state != STABLE for c in self.current.values()):
            return "Reconciling"
        return "Stable"

    def is_empty(self) -> bool:
        return not self.members

    def subscribed_topics(self) -> frozenset[str]:
        """Topics some member subscribes to by name, or by a regex (those that exist, as last resolved)."""
        return frozenset(t for m in self.members.values() for t in m.subscribed_topics) | set(self.partition_metadata)

    def member_of_instance(self, instance_id: str) -> str | None:
        return next((m for m, v in self.members.items() if v.instance_id == instance_id), None)

    def describe(self) -> list[MemberDescription]:
        return [MemberDescription(m, v, self.current.get(m, MemberAssignment()), self.targets.get(m, _NONE))
                for m, v in sorted(self.members.items())]

    def owned_by_others(self, member_id: str) -> TPs:
        """Partitions another member still holds (assigned, or given up but not yet confirmed revoked)."""
        return frozenset(tp for m, c in self.current.items() if m != member_id
                         for tp in c.assigned | c.pending_revocation)

    # -- replay --------------------------------------------------------------------------------------------

    def replay(self, key: ConsumerGroupKey, value: object | None) -> None:
        """Apply one record of this group: the only way its durable state changes."""
        kind, member = key.record_type, key.member_id or ""
        if kind == CG_METADATA:
            self.epoch = value.epoch if isinstance(value, GroupEpochValue) else 0
        elif kind == CG_PARTITIONS:
            topics = value.topics if isinstance(value, PartitionMetadataValue) else ()
            self.partition_metadata = dict(topics)
        elif kind == CG_TARGET_METADATA:
            self.target_epoch = value.assignment_epoch if isinstance(value, TargetEpochValue) else 0
        elif kind == CG_MEMBER:
            _put(self.members, member, value if isinstance(value, ConsumerMemberValue) else None)
            if value is None:
                self.liveness.pop(member, None)
        elif kind == CG_TARGET_MEMBER:
            tps = from_assignment(value.assignment) if isinstance(value, TargetMemberValue) else None
            _put(self.targets, member, tps)
        elif kind == CG_CURRENT:
            _put(self.current, member, _current(value) if isinstance(value, CurrentAssignmentValue) else None)

    # -- liveness ------------------------------------------------------------------------------------------

    def touch(self, member_id: str, now_ms: int) -> None:
        """A heartbeat of `member_id` succeeded and its records are applied: restart its session, and start
        (or keep) the revocation deadline while it has partitions to give up."""
        meta, current = self.members.get(member_id), self.current.get(member_id)
        if meta is None or current is None:
            return
        live = self.liveness.setdefault(member_id, Liveness(0))
        live.session_deadline_ms = now_ms + self.session_timeout_ms(member_id)
        if current.state != UNREVOKED:
            live.revocation_deadline_ms = None
        elif live.revocation_deadline_ms is None:
            live.revocation_deadline_ms = now_ms + meta.rebalance_timeout_ms

    def touch_classic(self, member_id: str, now_ms: int, must_rejoin: bool, joined: bool = False) -> None:
        """A classic member's JoinGroup or Heartbeat succeeded: restart its session; while it is told to rejoin,
        it has its rebalance timeout to do so (Kafka's join timeout), after which it is removed. A JoinGroup
        starts that time over: the member may have to rejoin once more (after giving up partitions)."""
        meta = self.members.get(member_id)
        if meta is None or member_id not in self.current:
            return
        live = self.liveness.setdefault(member_id, Liveness(0))
        live.session_deadline_ms = now_ms + self.session_timeout_ms(member_id)
        if not must_rejoin:
            live.revocation_deadline_ms = None
        elif joined or live.revocation_deadline_ms is None:
            live.revocation_deadline_ms = now_ms + meta.rebalance_timeout_ms

    def session_timeout_ms(self, member_id: str) -> int:
        """A classic member keeps the session timeout of its JoinGroup; the others the group's."""
        meta = self.members.get(member_id)
        if meta is not None and meta.classic is not None:
            return meta.classic.session_timeout_ms
        return self.settings.session_timeout_ms

    def start_sessions(self, now_ms: int) -> None:
        """After loading: every member gets a full session to heartbeat to this coordinator."""
        for member_id in self.members:
            self.liveness.setdefault(member_id, Liveness(now_ms + self.session_timeout_ms(member_id)))

    def retry_expiry(self, now_ms: int, delay_ms: int) -> None:
        """Removing expired members failed (the log refused the records): try again after `delay_ms`."""
        for live in self.liveness.values():
            live.session_deadline_ms = max(live.session_deadline_ms, now_ms + delay_ms)
            if live.revocation_deadline_ms is not None:
                live.revocation_deadline_ms = max(live.revocation_deadline_ms, now_ms + delay_ms)

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for live in self.liveness.values()
                     for d in (live.session_deadline_ms, live.revocation_deadline_ms) if d is not None]
        return min(deadlines, default=None)

    def expired(self, now_ms: int) -> list[str]:
        """The members whose session or revocation deadline has passed."""
        return sorted(m for m, live in self.liveness.items()
                      if live.session_deadline_ms <= now_ms
                      or (live.revocation_deadline_ms is not None and live.revocation_deadline_ms <= now_ms))

    def expiry_reason(self, member_id: str, now_ms: int) -> str:
        """Why `expired` names this member, in words for the broker's log."""
        live = self.liveness.get(member_id)
        meta = self.members.get(member_id)
        kind = "classic member" if meta is not None and meta.classic is not None else "member"
        if live is not None and live.session_deadline_ms <= now_ms:
            return f"its session expired ({kind}, session timeout {self.session_timeout_ms(member_id)} ms)"
        what = "rejoin" if kind == "classic member" else "revoke its partitions"
        timeout = meta.rebalance_timeout_ms if meta is not None else -1
        return f"it did not {what} within its rebalance timeout ({kind}, {timeout} ms)"

    def tick(self, now_ms: int, topics: Mapping[str, int]) -> list[Record]:
        """Records removing every member whose session or revocation deadline has passed."""
        expired = self.expired(now_ms)
        return self._remove_members(expired, topics) if expired else []

    # -- heartbeat -----------------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, topics: Mapping[str, int],
                  new_member_id: Callable[[], str]) -> Outcome:
        """Answer one heartbeat. `topics` maps every existing topic to its partition count; a mapping handed
        in is never changed afterwards (regexes resolved against it are kept while the same mapping comes)."""
        error = self._validate(request)
        if error is not None:
            return _fail(error)
        if request.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            return self._leave(request, topics)
        if request.member_epoch == JOIN_EPOCH:
            request = replace(request, member_id=request.member_id or new_member_id())
            return self._join(request, topics)
        return self._continue(request, topics)

    def _validate(self, request: HeartbeatRequest) -> tuple[ErrorCode, str] | None:
        if request.member_epoch < LEAVE_STATIC_EPOCH:
            return ErrorCode.invalid_request, "member epoch must be -2 or more"
        if request.member_epoch == LEAVE_STATIC_EPOCH and request.instance_id is None:
            return ErrorCode.invalid_request, "only static members leave with epoch -2"
        if request.member_epoch != JOIN_EPOCH and not request.member_id:
            return ErrorCode.invalid_request, "member id is required"
        if request.member_epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms < 0:
                return ErrorCode.invalid_request, "rebalance timeout is required when joining"
            if request.subscribed_topics is None and request.subscribed_regex is None:
                return ErrorCode.invalid_request, "a subscription is required when joining"
        if request.server_assignor is not None and request.server_assignor not in self.settings.assignors:
            return ErrorCode.unsupported_assignor, f"assignor {request.server_assignor} is not supported"
        if request.subscribed_regex:  # "" clears a regex: what clients subscribing by name send
            try:
                validate_regex(request.subscribed_regex)
            except InvalidRegex as exc:
                return ErrorCode.invalid_regular_expression, str(exc)
        return None

    def _join(self, request: HeartbeatRequest, topics: Mapping[str, int]) -> Outcome:
        member_id = request.member_id
        if request.instance_id is not None:
            holder = self.member_of_instance(request.instance_id)
            if holder is not None and holder != member_id:
                if self.current.get(holder, MemberAssignment()).member_epoch != LEAVE_STATIC_EPOCH:
                    return _fail((ErrorCode.unreleased_instance_id,
                                  f"instance {request.instance_id} is still used by member {holder}"))
                return self._replace_static(holder, request)
        if member_id not in self.members and len(self.members) >= self.settings.max_size:
            return _fail((ErrorCode.group_max_size_reached, f"group has {len(self.members)} members"))
        return self._update(request, topics, full=True)

    def _continue(self, request: HeartbeatRequest, topics: Mapping[str, int]) -> Outcome:
        member_id = request.member_id
        current = self.current.get(member_id)
        if member_id not in self.members or current is None:
            return _fail((ErrorCode.unknown_member_id, f"member {member_id} is not in the group"))
        meta = self.members[member_id]
        if request.instance_id is not None and meta.instance_id != request.instance_id:
            return _fail((ErrorCode.fenced_instance_id, "instance id does not match the member"))
        if request.member_epoch != current.member_epoch and not _lost_response(request, current):
            return _fail((ErrorCode.fenced_member_epoch,
                          f"epoch {request.member_epoch}, the member is at {current.member_epoch}"))
        return self._update(request, topics, full=False)

    def _update(self, request: HeartbeatRequest, topics: Mapping[str, int], full: bool) -> Outcome:
        """Record the member's changes, bump the epoch and recompute the target if needed, then reconcile."""
        member_id = request.member_id
        old = self.members.get(member_id)
        meta = _merged(old, request)
        records: list[Record] = []
        members = dict(self.members)
        members[member_id] = meta
        if meta != old:
            records.append(self._record(CG_MEMBER, meta, member_id))
        # Only what the assignment depends on starts a new group epoch; a new client host does not, unless the
        # member's regex is filtered by its rights (ACLs may name hosts).
        changed = old is None or (old.subscribed_topics, _resolver(old), old.server_assignor) != (
            meta.subscribed_topics, _resolver(meta), meta.server_assignor)
        _, assigned_records, targets, target_epoch = self._refresh(members, topics, changed)
        records += assigned_records
        current = self.current.get(member_id, MemberAssignment())
        owned = request.owned
        new = _reconcile(current, targets.get(member_id, _NONE), target_epoch, owned,
                         self.owned_by_others(member_id))
        if new != current:
            records.append(self._current_record(member_id, new))
        send = full or new != current or (owned is not None and owned != new.assigned)
        return Outcome(records, HeartbeatResult(ErrorCode.none, member_id, new.member_epoch,
                                                self.settings.heartbeat_interval_ms,
                                                new.assigned if send else None))

    def _refresh(self, members: Mapping[str, ConsumerMemberValue], topics: Mapping[str, int],
                 changed: bool) -> tuple[int, list[Record], dict[str, TPs], int]:
        """Bump the group epoch if members, subscriptions or partition counts changed, and compute the new
        target assignment when it lags. Returns (epoch, records, targets, target epoch)."""
        records: list[Record] = []
        subscribed = {t for m in members.values() for t in self._subscription(m, topics)}
        in_use = {_resolver(m) for m in members.values()}
        for resolver in [r for r in self._resolved if r not in in_use]:
            del self._resolved[resolver]
        metadata = {t: n for t, n in sorted(topics.items()) if t in subscribed}
        epoch = self.epoch
        if metadata != self.partition_metadata:
            records.append(self._record(CG_PARTITIONS, PartitionMetadataValue(tuple(sorted(metadata.items())))))
        if changed or metadata != self.partition_metadata:
            epoch += 1
            records.append(self._record(CG_METADATA, GroupEpochValue(epoch)))
        if epoch <= self.target_epoch:
            return epoch, records, self.targets, self.target_epoch
        targets = self._assign(members, metadata)
        for member_id, tps in sorted(targets.items()):
            if self.targets.get(member_id) != tps:
                records.append(self._record(CG_TARGET_MEMBER, TargetMemberValue(to_assignment(tps)), member_id))
        records.append(self._record(CG_TARGET_METADATA, TargetEpochValue(epoch)))
        return epoch, records, targets, epoch

    def assignor_name(self, members: Mapping[str, ConsumerMemberValue] | None = None) -> str:
        """The assignor most members ask for (ties: by name); the first configured one if none asks."""
        wanted = [m.server_assignor for m in (members or self.members).values()
                  if m.server_assignor is not None and m.server_assignor in self.settings.assignors]
        if not wanted:
            return self.settings.assignors[0] if self.settings.assignors else UNIFORM
        return max(sorted(set(wanted)), key=wanted.count)

    def _subscription(self, member: ConsumerMemberValue, topics: Mapping[str, int]) -> frozenset[str]:
        """The member's topics: those it names, and those of `topics` its regex matches that its principal may
        DESCRIBE (a regex was validated when it was sent; one that does not compile, read back from an older
        record, matches nothing)."""
        resolver = _resolver(member)
        if resolver is None:
            return frozenset(member.subscribed_topics)
        cached = self._resolved.get(resolver)
        if cached is not None and cached[0] is topics:
            matched = cached[1]
        else:
            matched = self._resolve(resolver, topics)
            self._resolved[resolver] = (topics, matched)
        return frozenset(member.subscribed_topics) | matched

    def _resolve(self, resolver: _Resolver, topics: Mapping[str, int]) -> frozenset[str]:
        regex, principal, host = resolver
        try:
            matched = matching_topics(regex, topics)
        except InvalidRegex:
            return frozenset()
        visible = self.settings.topic_visible
        # A member record from before principals were kept has none: its next heartbeat brings it.
        if visible is None or principal is None:
            return matched
        # Kafka's rule (KAFKA-18813): a regex never hands a member a topic it may not even see.
        return frozenset(t for t in matched if visible(principal, host, t))

    def _assign(self, members: Mapping[str, ConsumerMemberValue], metadata: Mapping[str, int]) -> dict[str, TPs]:
        subscriptions = {m: self._subscription(v, metadata) for m, v in members.items()}
        return assign(self.assignor_name(members), subscriptions, metadata,
                      {m: self.targets.get(m, _NONE) for m in members})

    def _replace_static(self, old_id: str, request: HeartbeatRequest) -> Outcome:
        """A static member back under a new member id takes over its predecessor's place and assignment,
        without a new group epoch."""
        old = self.current[old_id]
        new_id = request.member_id
        restored = replace(old, member_epoch=old.previous_member_epoch)
        meta = _merged(self.members[old_id], request)
        records = [
            *self._member_tombstones(old_id),
            self._record(CG_MEMBER, meta, new_id),
            self._record(CG_TARGET_MEMBER, TargetMemberValue(to_assignment(self.targets.get(old_id, _NONE))),
                         new_id),
            self._current_record(new_id, restored),
        ]
        return Outcome(records, HeartbeatResult(ErrorCode.none, new_id, restored.member_epoch,
                                                self.settings.heartbeat_interval_ms, restored.assigned))

    def update_member(self, request: HeartbeatRequest, topics: Mapping[str, int]) -> Outcome:
        """Join or rejoin a member with everything the request says (a classic member's JoinGroup)."""
        return self._update(request, topics, full=True)

    def remove_members(self, member_ids: list[str], topics: Mapping[str, int]) -> list[Record]:
        return self._remove_members(member_ids, topics)

    def member_tombstones(self, member_id: str) -> list[Record]:
        return self._member_tombstones(member_id)

    def _leave(self, request: HeartbeatRequest, topics: Mapping[str, int]) -> Outcome:
        member_id = request.member_id
        current = self.current.get(member_id)
        if member_id not in self.members or current is None:
            return _fail((ErrorCode.unknown_member_id, f"member {member_id} is not in the group"))
        result = HeartbeatResult(ErrorCode.none, member_id, request.member_epoch, 0)
        if request.member_epoch == LEAVE_STATIC_EPOCH:
            # Keep its partitions for the same instance to pick up; the session timeout still applies.
            gone = replace(current, member_epoch=LEAVE_STATIC_EPOCH, previous_member_epoch=current.member_epoch)
            return Outcome([self._current_record(member_id, gone)], result)
        return Outcome(self._remove_members([member_id], topics), result)

    def _remove_members(self, member_ids: list[str], topics: Mapping[str, int]) -> list[Record]:
        """Records removing members, with the new epoch and target assignment for those who stay."""
        records = [r for m in member_ids for r in self._member_tombstones(m)]
        members = {m: v for m, v in self.members.items() if m not in member_ids}
        if not members:
            return [*records, self._record(CG_METADATA, GroupEpochValue(self.epoch + 1))]
        _, more, _, _ = self._refresh(members, topics, changed=True)
        return records + more

    def _member_tombstones(self, member_id: str) -> list[Record]:
        return [Record(ConsumerGroupKey(kind, self.group_id, member_id), None)
                for kind in (CG_CURRENT, CG_TARGET_MEMBER, CG_MEMBER)]

    # -- records -------------------------------------------------------------------------------------------

    def _record(self, kind: int, value: ConsumerValue, member_id: str | None = None) -> Record:
        return Record(ConsumerGroupKey(kind, self.group_id, member_id), value)

    def _current_record(self, member_id: str, current: MemberAssignment) -> Record:
        value = CurrentAssignmentValue(current.member_epoch, current.previous_member_epoch, current.state,
                                       to_assignment(current.assigned), to_assignment(current.pending_revocation))
        return Record(ConsumerGroupKey(CG_CURRENT, self.group_id, member_id), value)

    def tombstones(self) -> list[Record]:
        """Records deleting the whole group (it must be empty)."""
        return [Record(ConsumerGroupKey(kind, self.group_id), None)
                for kind in (CG_TARGET_METADATA, CG_PARTITIONS, CG_METADATA)]

    # -- offsets -------------------------------------------------------------------------------------------

    def validate_offset_commit(self, member_id: str, member_epoch: int,
                               version: int = KIP848_OFFSET_COMMIT_VERSION) -> ErrorCode:
        """OffsetCommit rules of consumer groups: the member's epoch instead of a generation.

        A commit without a member (an admin's, or a consumer assigning partitions itself) only while the group
        has no members: it would overwrite their progress. A member must be current, and one using this
        protocol must speak OffsetCommit v9+, whose field carries its epoch."""
        if member_epoch < 0 and self.is_empty():
            return ErrorCode.none
        return self._validate_member_epoch(member_id, member_epoch, version)

    def validate_offset_fetch(self, member_id: str, member_epoch: int) -> ErrorCode:
        """OffsetFetch: a member that names itself must be current; anyone else (admins) may read."""
        if member_epoch < 0 and not member_id:
            return ErrorCode.none
        return self._validate_member_epoch(member_id, member_epoch, KIP848_OFFSET_COMMIT_VERSION)

    def _validate_member_epoch(self, member_id: str, member_epoch: int, version: int) -> ErrorCode:
        current = self.current.get(member_id)
        if member_id not in self.members or current is None:
            return ErrorCode.unknown_member_id
        if self.members[member_id].classic is not None:
            # A classic member knows its epoch as its generation, and the classic protocol's error.
            return ErrorCode.none if member_epoch == current.member_epoch else ErrorCode.illegal_generation
        if version < KIP848_OFFSET_COMMIT_VERSION:
            return ErrorCode.unsupported_version
        if member_epoch != current.member_epoch:
            return ErrorCode.stale_member_epoch
        return ErrorCode.none


def _reconcile(current: MemberAssignment, target: TPs, target_epoch: int, owned: TPs | None,
               taken: TPs) -> MemberAssignment:
    """One step of a member towards its target: revoke first, then take the partitions that are free."""
    if current.state == UNREVOKED:
        if owned is None or owned & current.pending_revocation:
            return current  # still revoking: keep the epoch until the member confirms
        current = replace(current, pending_revocation=_NONE, state=STABLE)
    if current.member_epoch == target_epoch and current.state == STABLE and current.assigned == target:
        return current
    keep = current.assigned & target
    revoke = current.assigned - target
    if revoke:
        return replace(current, state=UNREVOKED, assigned=keep, pending_revocation=revoke)
    assigned = keep | (target - taken)
    previous = current.previous_member_epoch if current.member_epoch == target_epoch else current.member_epoch
    return MemberAssignment(target_epoch, previous, STABLE if assigned == target else UNRELEASED, assigned, _NONE)


def _lost_response(request: HeartbeatRequest, current: MemberAssignment) -> bool:
    """A member one epoch behind that owns nothing it should not: our last answer was lost; let it catch up."""
    return (request.member_epoch == current.previous_member_epoch and request.owned is not None
            and request.owned <= current.assigned)


def _resolver(member: ConsumerMemberValue) -> _Resolver | None:
    if member.subscribed_regex is None:
        return None
    return member.subscribed_regex, member.principal, member.client_host.removeprefix("/")


def _merged(old: ConsumerMemberValue | None, request: HeartbeatRequest) -> ConsumerMemberValue:
    """The member's metadata after a heartbeat: fields the request leaves null keep their value."""
    if old is None:
        old = ConsumerMemberValue(None, None, request.client_id, request.client_host, (), None, -1, None)
    return ConsumerMemberValue(
        instance_id=request.instance_id if request.instance_id is not None else old.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else old.rack_id,
        client_id=request.client_id or old.client_id,
        client_host=request.client_host or old.client_host,
        subscribed_topics=(tuple(sorted(set(request.subscribed_topics))) if request.subscribed_topics is not None
                           else old.subscribed_topics),
        # "" clears the regex (a member moving to names); null keeps it.
        subscribed_regex=(request.subscribed_regex or None) if request.subscribed_regex is not None
        else old.subscribed_regex,
        rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms >= 0
                              else old.rebalance_timeout_ms),
        server_assignor=request.server_assignor if request.server_assignor is not None else old.server_assignor,
        classic=request.classic if request.classic is not None else old.classic,
        principal=request.principal if request.principal is not None else old.principal,
    )


def _current(value: CurrentAssignmentValue) -> MemberAssignment:
    return MemberAssignment(value.member_epoch, value.previous_member_epoch, value.state,
                            from_assignment(value.assigned), from_assignment(value.pending_revocation))


def _put(table: dict[str, V], key: str, value: V | None) -> None:
    if value is None:
        table.pop(key, None)
    else:
        table[key] = value


def _fail(error: tuple[ErrorCode, str]) -> Outcome:
    return Outcome([], HeartbeatResult(error[0], message=error[1]))
