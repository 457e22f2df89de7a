"""The classic group protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) as a sans-I/O state machine.

A group moves through Kafka's states:

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance --leader's sync--> Stable
      ^                    ^                                            |                                  |
      +-- last member gone +------------- join, leave, expiry ---------+----------------------------------+

- PreparingRebalance collects JoinGroups. It completes when every known member has rejoined (and no member id
  handed out by the KIP-394 handshake is still outstanding), or when the rebalance timeout (the largest of the
  members') expires, removing the members that did not rejoin. A group that was Empty first waits
  `group.initial.rebalance.delay.ms`, extended by the same delay while new members keep arriving, up to the
  rebalance timeout, so a starting fleet of consumers lands in one generation.
- Completing the join starts a new generation: the protocol is selected, the leader gets every member's
  metadata, everyone gets the generation. Members then send SyncGroup; followers wait until the leader's
  SyncGroup brings the assignments, then all are answered and the group is Stable. Members that do not sync
  within the rebalance timeout are removed.
- A Stable member whose session times out (no heartbeat, join or sync for `session.timeout.ms`) is removed and
  the group rebalances; Heartbeat answers REBALANCE_IN_PROGRESS while the group is preparing one, which tells
  members to rejoin.
- Static members (KIP-345, `group.instance.id`) skip the handshake. When a known instance joins with an unknown
  member id (it restarted), it takes over the old member's place and assignment under a new member id: in a
  Stable group without a rebalance when the selected protocol and its subscription are unchanged. Requests
  bearing the old member id of that instance are then FENCED_INSTANCE_ID.

Nothing here reads a clock or does I/O: every input carries `now_ms`, waiting requests are `Handle`s, and every
input returns the `Effects` it produced. `next_deadline_ms` says when `tick` must be called next.

Why this file is longer than the others: it is one state machine, whose transitions call each other across
JoinGroup, SyncGroup, LeaveGroup and the timers; split apart, each part would reach into the others' state.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from moldau.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscribed_topics
from moldau.coordinator.group.member import (
    UNKNOWN_MEMBER_ID,
    ClassicMember,
    Effects,
    Handle,
    JoinedMember,
    JoinRequest,
    JoinResult,
    ProtocolMetadata,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.records import GroupValue, MemberValue
from moldau.protocol.errors import ErrorCode

GROUP_TYPE = "classic"

MemberIdFactory = Callable[[str], str]


def random_member_id(prefix: str) -> str:
    """Kafka's member ids: the client id (or, for static members, the instance id), a dash, a random UUID."""
    return f"{prefix}-{uuid.uuid4()}"


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class GroupLimits:
    """Broker settings a group enforces (`group.*` configs)."""

    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupDescription:
    state: str
    protocol_type: str
    protocol_name: str  # "" unless Stable
    members: tuple[DescribedMember, ...]


@dataclass(frozen=True, slots=True)
class LeaveResult:
    error: ErrorCode  # the request's error; NONE when each member has its own code
    member_errors: tuple[ErrorCode, ...]
    effects: Effects


class ClassicGroup:
    """One classic group. Invariants:

    - `members` keeps join order; `leader_id` is a member whenever there are members, else None;
    - `_static` maps each static member's instance id to its current member id;
    - state EMPTY <=> no members (pending handshake ids are not members);
    - `_join_deadline_ms` is set exactly in PREPARING_REBALANCE; `_initial_delay_left_ms` is not None only while
      an Empty group's initial delay runs;
    - `_pending_sync` holds members of the current generation that have not sent SyncGroup yet.
    """

    group_type = GROUP_TYPE

    def __init__(self, group_id: str, limits: GroupLimits, now_ms: int,
                 new_member_id: MemberIdFactory = random_member_id) -> None:
        self.group_id = group_id
        self.limits = limits
        self.state = GroupState.EMPTY
        self.state_timestamp_ms = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self._new_member_id = new_member_id
        self._static: dict[str, str] = {}
        self._pending_members: dict[str, int] = {}  # handed-out member id -> deadline to rejoin with it
        self._pending_sync: set[str] = set()
        self._sync_deadline_ms: int | None = None
        self._join_deadline_ms: int | None = None
        self._initial_delay_left_ms: int | None = None
        self._new_member_added = False

    # -- queries -------------------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        return not self.members

    def has_pending_members(self) -> bool:
        """Member ids handed out by the KIP-394 handshake are waiting to be used."""
        return bool(self._pending_members)

    def static_member_id(self, instance_id: str) -> str | None:
        return self._static.get(instance_id)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members consume (consumer protocol only); None when the group cannot tell."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None or not self.members:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            found = subscribed_topics(member.metadata(self.protocol_name))
            if found is None:
                return None
            topics |= found
        return frozenset(topics)

    def describe(self) -> GroupDescription:
        """DescribeGroups' view: metadata and assignments only once a generation is settled (Stable)."""
        stable = self.state == GroupState.STABLE and self.protocol_name is not None
        members = tuple(
            DescribedMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.metadata(self.protocol_name) if stable and self.protocol_name else b"",
                            m.assignment if stable else b"")
            for m in self.members.values()
        )
        return GroupDescription(self.state.value, self.protocol_type or "",
                                self.protocol_name if stable and self.protocol_name else "", members)

    def next_deadline_ms(self) -> int | None:
        """When `tick` has work to do next, if ever."""
        deadlines = list(self._pending_members.values())
        deadlines += [m.session_deadline_ms for m in self.members.values() if self._session_counts(m)]
        if self._join_deadline_ms is not None:
            deadlines.append(self._join_deadline_ms)
        if self._sync_deadline_ms is not None and self._pending_sync:
            deadlines.append(self._sync_deadline_ms)
        return min(deadlines, default=None)

    @staticmethod
    def _session_counts(member: ClassicMember) -> bool:
        # A member waiting in a join or sync is alive by definition; the rebalance timeout bounds those waits.
        return member.awaiting_join is None and member.awaiting_sync is None

    # -- JoinGroup -----------------------------------------------------------------------------------------

    def join(self, handle: Handle, request: JoinRequest, now_ms: int) -> Effects:
        """Handle a JoinGroup; its answer may be among the returned completions or come with a later input."""
        fx = Effects()
        error = self._check_join(request)
        if error != ErrorCode.none:
            fx.complete(handle, JoinResult(error, request.member_id))
        elif request.member_id == UNKNOWN_MEMBER_ID:
            self._join_unknown(handle, request, now_ms, fx)
        else:
            self._join_known(handle, request, now_ms, fx)
        self._advance(now_ms, fx)
        return fx

    def _check_join(self, request: JoinRequest) -> ErrorCode:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        limits = self.limits
        if not limits.min_session_timeout_ms <= request.session_timeout_ms <= limits.max_session_timeout_ms:
            return ErrorCode.invalid_session_timeout
        if not self._supports(request.protocol_type, request.protocols):
            return ErrorCode.inconsistent_group_protocol
        return ErrorCode.none

    def _supports(self, protocol_type: str, protocols: tuple[ProtocolMetadata, ...]) -> bool:
        if not protocol_type or not protocols:
            return False
        if self.state == GroupState.EMPTY:
            return True
        return protocol_type == self.protocol_type and bool(
            self._candidates() & frozenset(p.name for p in protocols))

    def _candidates(self) -> frozenset[str]:
        """The protocols every member supports."""
        names: frozenset[str] | None = None
        for member in self.members.values():
            names = member.protocol_names() if names is None else names & member.protocol_names()
        return names or frozenset()

    def _join_unknown(self, handle: Handle, request: JoinRequest, now_ms: int, fx: Effects) -> None:
        instance_id = request.group_instance_id
        if instance_id is not None and instance_id in self._static:
            self._replace_static_member(handle, request, now_ms, fx)
            return
        if self._is_full():
            fx.complete(handle, JoinResult(ErrorCode.group_max_size_reached, UNKNOWN_MEMBER_ID))
            return
        member_id = self._new_member_id(instance_id or request.client_id)
        if instance_id is None and request.require_known_member_id:
            # KIP-394: hand out the id and have the client rejoin with it, so a client whose first JoinGroup
            # times out does not leave an unknown member behind.
            self._pending_members[member_id] = now_ms + request.session_timeout_ms
            fx.complete(handle, JoinResult(ErrorCode.member_id_required, member_id))
            return
        self._add_member(handle, member_id, request, now_ms, fx)

    def _join_known(self, handle: Handle, request: JoinRequest, now_ms: int, fx: Effects) -> None:
        member_id = request.member_id
        if member_id in self._pending_members:
            del self._pending_members[member_id]
            if self._is_full():
                fx.complete(handle, JoinResult(ErrorCode.group_max_size_reached, member_id))
                self._try_complete_join(now_ms, fx)
                return
            self._add_member(handle, member_id, request, now_ms, fx)
            return
        error = self._validate_member(member_id, request.group_instance_id)
        if error != ErrorCode.none:
            fx.complete(handle, JoinResult(error, member_id))
            return
        member = self.members[member_id]
        if self.state == GroupState.PREPARING_REBALANCE:
            self._update_member(handle, member, request, now_ms, fx)
        elif self.state == GroupState.COMPLETING_REBALANCE and member.matches(request.protocols):
            # The member lost our response: answer again with the current generation.
            fx.complete(handle, self._join_result(member, all_members=member_id == self.leader_id))
        elif self.state == GroupState.STABLE and member_id != self.leader_id and member.matches(request.protocols):
            fx.complete(handle, self._join_result(member))
        else:
            self._update_member(handle, member, request, now_ms, fx)

    def _validate_member(self, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            current = self._static.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
            return ErrorCode.none
        return ErrorCode.none if member_id in self.members else ErrorCode.unknown_member_id

    def _is_full(self) -> bool:
        return len(self.members) >= self.limits.max_size

    def _add_member(self, handle: Handle, member_id: str, request: JoinRequest, now_ms: int, fx: Effects) -> None:
        member = ClassicMember.from_request(member_id, request)
        member.awaiting_join = handle
        if self.state == GroupState.EMPTY:
            self.protocol_type = request.protocol_type
        self.members[member_id] = member
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        if self._initial_delay_left_ms is not None:
            self._new_member_added = True
        self._maybe_prepare_rebalance(now_ms, fx)

    def _update_member(self, handle: Handle, member: ClassicMember, request: JoinRequest, now_ms: int,
                       fx: Effects) -> None:
        if member.awaiting_join is not None:
            # A retried JoinGroup supersedes the earlier one, whose connection is most likely gone.
            fx.complete(member.awaiting_join, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.update(request)
        member.awaiting_join = handle
        self._maybe_prepare_rebalance(now_ms, fx)

    def _replace_static_member(self, handle: Handle, request: JoinRequest, now_ms: int, fx: Effects) -> None:
        assert request.group_instance_id is not None
        old_id = self._static[request.group_instance_id]
        member = self.members[old_id]
        self._fence(member, fx)
        new_id = self._new_member_id(request.group_instance_id)
        old_metadata = member.metadata(self.protocol_name) if self.protocol_name else None
        self._rename(member, new_id)
        member.update(request)
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == GroupState.STABLE and self._unchanged_for_assignment(member, old_metadata):
            fx.persist = True
            is_leader = new_id == self.leader_id
            fx.complete(handle, self._join_result(member, skip_assignment=is_leader, all_members=is_leader))
            return
        # In CompletingRebalance the leader may be assigning partitions to the old id: a rebalance fixes that.
        member.awaiting_join = handle
        self._maybe_prepare_rebalance(now_ms, fx)

    def _fence(self, member: ClassicMember, fx: Effects) -> None:
        """Answer the requests the old incarnation of a static member is waiting on."""
        if member.awaiting_join is not None:
            fx.complete(member.awaiting_join, JoinResult(ErrorCode.fenced_instance_id, member.member_id))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            fx.complete(member.awaiting_sync, SyncResult(ErrorCode.fenced_instance_id))
            member.awaiting_sync = None

    def _rename(self, member: ClassicMember, new_id: str) -> None:
        old_id = member.member_id
        member.member_id = new_id
        # Keep join order, which decides leader succession and protocol tie-breaks.
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        if member.group_instance_id is not None:
            self._static[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self._pending_sync:
            self._pending_sync.discard(old_id)
            self._pending_sync.add(new_id)

    def _unchanged_for_assignment(self, member: ClassicMember, old_metadata: bytes | None) -> bool:
        """A restarted static member changes nothing the current assignment was computed from."""
        if self.protocol_name is None or old_metadata is None or self._select_protocol() != self.protocol_name:
            return False
        new_metadata = member.metadata(self.protocol_name)
        if self.protocol_type == CONSUMER_PROTOCOL_TYPE:
            # Consumer metadata also carries owned partitions and generation, which a restart resets.
            old_topics, new_topics = subscribed_topics(old_metadata), subscribed_topics(new_metadata)
            if old_topics is not None and new_topics is not None:
                return old_topics == new_topics
        return old_metadata == new_metadata

    def _join_result(self, member: ClassicMember, *, skip_assignment: bool = False,
                     all_members: bool = False) -> JoinResult:
        """The current generation as `member` sees it; the leader learns every member when assigning."""
        listed: tuple[JoinedMember, ...] = ()
        if all_members and self.protocol_name is not None:
            listed = tuple(JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                           for m in self.members.values())
        return JoinResult(ErrorCode.none, member.member_id, self.generation_id, self.protocol_type,
                          self.protocol_name, self.leader_id or "", listed, skip_assignment)

    # -- rebalancing ---------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, now_ms: int, fx: Effects) -> None:
        if self.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        self._try_complete_join(now_ms, fx)

    def _prepare_rebalance(self, now_ms: int, fx: Effects) -> None:
        if self.state == GroupState.COMPLETING_REBALANCE:
            self._reset_assignments(now_ms, fx, ErrorCode.rebalance_in_progress)
        self._pending_sync.clear()
        self._sync_deadline_ms = None
        if self.state == GroupState.EMPTY:
            delay = self.limits.initial_rebalance_delay_ms
            self._initial_delay_left_ms = max(self.rebalance_timeout_ms() - delay, 0)
            self._new_member_added = False
            self._join_deadline_ms = now_ms + delay
        else:
            self._join_deadline_ms = now_ms + self.rebalance_timeout_ms()
        self._transition(GroupState.PREPARING_REBALANCE, now_ms)

    def _reset_assignments(self, now_ms: int, fx: Effects, error: ErrorCode) -> None:
        for member in self.members.values():
            member.assignment = b""
            if member.awaiting_sync is not None:
                fx.complete(member.awaiting_sync, SyncResult(error))
                member.awaiting_sync = None
                # The session, paused while the member waited, runs again from now.
                member.session_deadline_ms = now_ms + member.session_timeout_ms

    def _try_complete_join(self, now_ms: int, fx: Effects) -> None:
        if (self.state == GroupState.PREPARING_REBALANCE and self._initial_delay_left_ms is None
                and not self._pending_members
                and all(m.awaiting_join is not None for m in self.members.values())):
            self._complete_join(now_ms, fx)

    def _on_join_deadline(self, now_ms: int, fx: Effects) -> None:
        left = self._initial_delay_left_ms
        if left is not None and self._new_member_added and left > 0:
            delay = min(self.limits.initial_rebalance_delay_ms, left)
            self._initial_delay_left_ms = left - delay
            self._new_member_added = False
            self._join_deadline_ms = now_ms + delay
            return
        self._complete_join(now_ms, fx)

    def _complete_join(self, now_ms: int, fx: Effects) -> None:
        for member in [m for m in self.members.values() if m.awaiting_join is None]:
            self._remove_member(member, fx)
        self._join_deadline_ms = None
        self._initial_delay_left_ms = None
        self.generation_id += 1
        if not self.members:
            self.protocol_name = None
            self._transition(GroupState.EMPTY, now_ms)
            fx.persist = True
            return
        self.protocol_name = self._select_protocol()
        self._transition(GroupState.COMPLETING_REBALANCE, now_ms)
        for member in self.members.values():
            assert member.awaiting_join is not None
            is_leader = member.member_id == self.leader_id
            fx.complete(member.awaiting_join, self._join_result(member, all_members=is_leader))
            member.awaiting_join = None
            member.session_deadline_ms = now_ms + member.session_timeout_ms
        self._pending_sync = set(self.members)
        self._sync_deadline_ms = now_ms + self.rebalance_timeout_ms()

    def _select_protocol(self) -> str:
        """Each member votes for its most preferred protocol that all support; the most votes win.

        Ties go to the protocol voted for first in join order, so the choice is deterministic.
        """
        candidates = self._candidates()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return max(votes, key=lambda name: votes[name])  # max keeps the first of equal counts

    def _transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    # -- SyncGroup -----------------------------------------------------------------------------------------

    def sync(self, handle: Handle, request: SyncRequest, now_ms: int) -> Effects:
        """Handle a SyncGroup; followers wait until the leader's brings the assignments."""
        fx = Effects()
        error = self._check_sync(request)
        if error != ErrorCode.none:
            fx.complete(handle, SyncResult(error))
            return fx
        member = self.members[request.member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        self._pending_sync.discard(member.member_id)
        if self.state == GroupState.STABLE:
            fx.complete(handle, self._sync_result(member))
            return fx
        if member.awaiting_sync is not None:
            fx.complete(member.awaiting_sync, SyncResult(ErrorCode.rebalance_in_progress))
        member.awaiting_sync = handle
        if member.member_id == self.leader_id:
            self._assign(dict(request.assignments), now_ms, fx)
        return fx

    def _check_sync(self, request: SyncRequest) -> ErrorCode:
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self._validate_member(request.member_id, request.group_instance_id)
        if error != ErrorCode.none:
            return error
        if request.generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        if ((request.protocol_type is not None and request.protocol_type != self.protocol_type)
                or (request.protocol_name is not None and request.protocol_name != self.protocol_name)):
            return ErrorCode.inconsistent_group_protocol
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def _assign(self, assignments: dict[str, bytes], now_ms: int, fx: Effects) -> None:
        # Assignments for unknown members are ignored; members the leader left out get an empty one.
        for member in self.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        self._transition(GroupState.STABLE, now_ms)
        fx.persist = True
        for member in self.members.values():
            if member.awaiting_sync is not None:
                fx.complete(member.awaiting_sync, self._sync_result(member))
                member.awaiting_sync = None
                member.session_deadline_ms = now_ms + member.session_timeout_ms

    def _sync_result(self, member: ClassicMember) -> SyncResult:
        return SyncResult(ErrorCode.none, member.assignment, self.protocol_type, self.protocol_name)

    # -- Heartbeat -----------------------------------------------------------------------------------------

    def heartbeat(self, member_id: str, instance_id: str | None, generation_id: int, now_ms: int) -> ErrorCode:
        """Keep a member's session alive. REBALANCE_IN_PROGRESS tells it to rejoin."""
        if self.state == GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        error = self._validate_member(member_id, instance_id)
        if error != ErrorCode.none:
            return error
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        member = self.members[member_id]
        member.session_deadline_ms = now_ms + member.session_timeout_ms
        if self.state == GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # -- LeaveGroup ----------------------------------------------------------------------------------------

    def leave(self, identities: Sequence[tuple[str, str | None]], now_ms: int) -> LeaveResult:
        """Remove members named by (member id, instance id); each gets its own error code."""
        fx = Effects()
        if self.state == GroupState.DEAD:
            return LeaveResult(ErrorCode.coordinator_not_available, (), fx)
        errors = tuple(self._leave_one(member_id, instance_id, now_ms, fx) for member_id, instance_id in identities)
        self._advance(now_ms, fx)
        return LeaveResult(ErrorCode.none, errors, fx)

    def _leave_one(self, member_id: str, instance_id: str | None, now_ms: int, fx: Effects) -> ErrorCode:
        if instance_id is not None:
            current = self._static.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if member_id not in (UNKNOWN_MEMBER_ID, current):
                return ErrorCode.fenced_instance_id
            member_id = current
        elif member_id in self._pending_members:
            del self._pending_members[member_id]
            self._try_complete_join(now_ms, fx)
            return ErrorCode.none
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        self._remove_and_rebalance(member, now_ms, fx)
        return ErrorCode.none

    # -- removal and time ----------------------------------------------------------------------------------

    def _remove_and_rebalance(self, member: ClassicMember, now_ms: int, fx: Effects) -> None:
        self._remove_member(member, fx)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        self._try_complete_join(now_ms, fx)

    def _remove_member(self, member: ClassicMember, fx: Effects) -> None:
        if member.awaiting_join is not None:
            fx.complete(member.awaiting_join, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        if member.awaiting_sync is not None:
            fx.complete(member.awaiting_sync, SyncResult(ErrorCode.unknown_member_id))
        del self.members[member.member_id]
        if member.group_instance_id is not None and self._static.get(member.group_instance_id) == member.member_id:
            del self._static[member.group_instance_id]
        self._pending_sync.discard(member.member_id)
        if self.leader_id == member.member_id:
            self.leader_id = self._successor()

    def _successor(self) -> str | None:
        joined = [m.member_id for m in self.members.values() if m.awaiting_join is not None]
        candidates = joined or list(self.members)
        return candidates[0] if candidates else None

    def tick(self, now_ms: int) -> Effects:
        """Act on every deadline that has passed: sessions, handed-out ids, join and sync timeouts."""
        fx = Effects()
        self._advance(now_ms, fx)
        return fx

    def _advance(self, now_ms: int, fx: Effects) -> None:
        for member_id, deadline in list(self._pending_members.items()):
            if deadline <= now_ms:
                del self._pending_members[member_id]
                self._try_complete_join(now_ms, fx)
        for member in list(self.members.values()):
            if self._session_counts(member) and member.session_deadline_ms <= now_ms \
                    and member.member_id in self.members:
                self._remove_and_rebalance(member, now_ms, fx)
        if self._join_deadline_ms is not None and self._join_deadline_ms <= now_ms:
            self._on_join_deadline(now_ms, fx)
        if self._pending_sync and self._sync_deadline_ms is not None and self._sync_deadline_ms <= now_ms:
            for member_id in sorted(self._pending_sync):
                if member_id in self.members:
                    self._remove_member(self.members[member_id], fx)
            self._pending_sync.clear()
            self._sync_deadline_ms = None
            self._rebalance_or_empty(now_ms, fx)

    def _rebalance_or_empty(self, now_ms: int, fx: Effects) -> None:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(now_ms, fx)
        self._try_complete_join(now_ms, fx)

    def force_rebalance(self, now_ms: int) -> Effects:
        """Start over (the group's record could not be written, so its assignment must not stand)."""
        fx = Effects()
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._reset_assignments(now_ms, fx, ErrorCode.rebalance_in_progress)
            self._prepare_rebalance(now_ms, fx)
        self._advance(now_ms, fx)
        return fx

    def mark_dead(self, error: ErrorCode = ErrorCode.coordinator_not_available) -> Effects:
        """The group is deleted, unloaded or converted: answer everything still waiting with `error`; later
        requests are refused."""
        fx = Effects()
        for member in self.members.values():
            if member.awaiting_join is not None:
                fx.complete(member.awaiting_join, JoinResult(error, member.member_id))
            if member.awaiting_sync is not None:
                fx.complete(member.awaiting_sync, SyncResult(error))
            member.awaiting_join = member.awaiting_sync = None
        self.state = GroupState.DEAD
        self._pending_members.clear()
        self._pending_sync.clear()
        self._join_deadline_ms = self._sync_deadline_ms = self._initial_delay_left_ms = None
        return fx

    # -- durable form ---------------------------------------------------------------------------------------

    def to_record(self) -> GroupValue:
        """The group as persisted: generation, protocol, leader and members with their assignments."""
        protocol = self.protocol_name
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=protocol,
            leader=self.leader_id if protocol is not None else None,
            current_state_timestamp_ms=self.state_timestamp_ms,
            members=tuple(
                MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                            m.session_timeout_ms, m.metadata(protocol) if protocol else b"", m.assignment)
                for m in self.members.values()
            ) if protocol is not None else (),
        )

    @classmethod
    def from_record(cls, group_id: str, value: GroupValue, limits: GroupLimits, now_ms: int,
                    new_member_id: MemberIdFactory = random_member_id) -> ClassicGroup:
        """Rebuild a group from its record: Empty, or Stable with its members, as Kafka loads groups.

        Loaded members only know the selected protocol. Their sessions start now, so members that did not
        survive the restart expire after their session timeout and the group rebalances.
        """
        group = cls(group_id, limits, value.current_state_timestamp_ms if value.current_state_timestamp_ms >= 0
                    else now_ms, new_member_id)
        group.generation_id = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        for m in value.members:
            protocols = (ProtocolMetadata(value.protocol or "", m.subscription),)
            member = ClassicMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                   m.session_timeout_ms, m.rebalance_timeout_ms, group.protocol_type or "",
                                   protocols, m.assignment, session_deadline_ms=now_ms + m.session_timeout_ms)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group._static[m.group_instance_id] = m.member_id
        if group.members:
            group.state = GroupState.STABLE
            group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
        return group

