"""A Raft node as a pure object: messages and ticks in, actions out, no I/O of its own.

Rules of this file:
- Time comes only from `now_ms` arguments and randomness only from the injected `random.Random`.
- Every change of term or vote is emitted as `SetTermVote` before any message that depends on it.
- Every change of the log is emitted as `Append`/`Truncate`/`SaveSnapshot`/`InstallSnapshot` before
  any message that reports it.
- The high watermark never moves back while the object lives; it is not persisted (a restarted node
  starts at its snapshot's end, which only ever covers committed entries).
- The voter set is the newest `VotersRecord` in the log, committed or not (moldau.raft.voters); every
  append, truncation or snapshot install that changes it goes through `_on_voters_changed`.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from moldau.raft.backoff import RetryBackoff, election_backoff_ms
from moldau.raft.log import Entry, Log, PersistedState, Snapshot
from moldau.raft.messages import (
    Action,
    Append,
    BeginEpoch,
    EndEpoch,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    InstallSnapshot,
    Message,
    SaveSnapshot,
    Send,
    SetTermVote,
    Truncate,
    VoteRequest,
    VoteResponse,
)
from moldau.raft.voters import VoterHistory, VoterInfo, VotersRecord

if TYPE_CHECKING:
    from moldau.config import BrokerConfig


class Role(enum.Enum):
    FOLLOWER = "follower"  # also the only role of an observer
    PROSPECTIVE = "prospective"  # collecting pre-votes, term unchanged
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class Config:
    """Timeouts in milliseconds; the election timeout is drawn uniformly from [min, max). A candidate whose
    election failed waits a random backoff of at most about `election_backoff_max_ms` before it stands again,
    and a node sends nothing to a peer for `retry_backoff_ms` after a request to it failed (moldau.raft.backoff)."""

    election_timeout_ms_min: int = 300
    election_timeout_ms_max: int = 600
    fetch_interval_ms: int = 50
    check_quorum_ms: int = 600
    begin_epoch_interval_ms: int = 100
    max_fetch_entries: int = 16
    election_backoff_max_ms: int = 300
    retry_backoff_ms: int = 20

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        """The metadata quorum's timing. For ``controller.quorum.election.timeout.ms`` t, the election timeout
        is drawn from [t, 2t) and a leader re-announces its epoch to silent voters every t/4."""
        election_ms = config.controller_quorum_election_timeout_ms
        return cls(
            election_timeout_ms_min=election_ms, election_timeout_ms_max=2 * election_ms,
            fetch_interval_ms=config.controller_quorum_fetch_interval_ms,
            check_quorum_ms=config.controller_quorum_fetch_timeout_ms,
            begin_epoch_interval_ms=max(election_ms // 4, 1), max_fetch_entries=512,
            election_backoff_max_ms=config.controller_quorum_election_backoff_max_ms,
            retry_backoff_ms=config.controller_quorum_retry_backoff_ms)


@dataclass(frozen=True, slots=True)
class NotLeader:
    """Returned by `propose` on a non-leader, with the leader it knows of (if any)."""

    leader_id: int | None
    term: int


class VoterChangeError(enum.Enum):
    """Why the leader refused a voter change; the driver maps each to Kafka's error code."""

    NOT_LEADER = "not_leader"
    STATIC_QUORUM = "static_quorum"  # kraft.version 0: UNSUPPORTED_VERSION
    CHANGE_PENDING = "change_pending"  # a change, or the leader's own epoch, is not committed yet
    NOT_CAUGHT_UP = "not_caught_up"  # the new voter has not fetched up to the high watermark recently
    DUPLICATE_VOTER = "duplicate_voter"
    VOTER_NOT_FOUND = "voter_not_found"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class VoterChangeRefused:
    error: VoterChangeError
    message: str


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica as the leader sees it (DescribeQuorum); -1 and None mean unknown."""

    node_id: int
    log_end_offset: int = -1
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    is_voter: bool = True


@dataclass(slots=True)
class _Progress:
    """Leader-side record of one fetcher, for `replica_states`."""

    log_end_offset: int = -1
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None


class RaftNode:
    """A voter of the quorum, or an observer when `node_id` is not among the current voters.

    `voters` is the configured (static, or bootstrap) set; the log's newest VotersRecord overrides it.
    Drive it with `on_message`, `on_request_failed`, `tick`, `propose`, `snapshot`, `resign` and the voter
    changes (`add_voter`, `remove_voter`, `update_voter`, `enable_dynamic_voters`), then `drain`.
    """

    def __init__(self, node_id: int, voters: frozenset[int], state: PersistedState,
                 rng: random.Random, now_ms: int, config: Config | None = None) -> None:
        assert voters, "a quorum needs at least one voter"
        self.node_id, self.static_voters, self.rng = node_id, voters, rng
        self.config = config or Config()
        self.term, self.voted_for = state.term, state.voted_for
        self.log = Log(state.entries, state.snapshot)
        self.history = VoterHistory(voters, state.snapshot.voters if state.snapshot else None)
        self.history.append(self.log.start_offset, [e.value for e in self.log.entries])
        self.voters = self.history.latest().ids
        self.latest_snapshot: Snapshot | None = state.snapshot
        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self.high_watermark = self.log.start_offset  # a snapshot only ever covers committed entries
        self._out: list[Action] = []
        self._votes: set[int] = set()
        self._refusals: set[int] = set()  # candidate: voters that refused it in this election
        self._failed_elections = 0  # elections in a row this node stood in and did not win
        self._backing_off = False  # a candidate whose election failed, waiting before it stands again
        self._retry = RetryBackoff(self.config.retry_backoff_ms)  # peers a request recently failed to
        self._vote_retries: set[int] = set()  # voters to ask again for this election once their backoff passed
        self._match: dict[int, int] = {}  # leader: offset up to which each voter's log agrees
        self._contact_ms: dict[int, int] = {}  # leader: last fetch from each voter
        self._progress: dict[int, _Progress] = {}  # leader: every fetcher, observers included
        self._snapshot_wanted: tuple[int, int] | None = None  # fetcher: snapshot id named by the leader
        self._fetch_order = self._shuffled_voters() if self.is_observer else []
        self._fetch_turn = 0
        self._next_fetch_ms = now_ms
        self._next_begin_ms = now_ms
        self._last_leader_ms: int | None = None
        self._epoch_start = 0  # leader: offset of its leader-change entry
        self._reset_election_timer(now_ms)
        if self.voters == {node_id}:
            self._election_deadline_ms = now_ms  # alone: nobody to wait for, elect on the first tick

    def _shuffled_voters(self) -> list[int]:
        order = sorted(self.voters | self.static_voters)  # the configured ones too: they may know the leader
        self.rng.shuffle(order)
        return order

    # -- driver interface -------------------------------------------------------------------

    @property
    def is_observer(self) -> bool:
        """An observer replays the log but never votes nor stands for election."""
        return self.node_id not in self.voters

    @property
    def log_start_offset(self) -> int:
        return self.log.start_offset

    def drain(self) -> list[Action]:
        """Actions produced since the last drain, in the order they must be performed."""
        out, self._out = self._out, []
        return out

    def propose(self, values: list[object], now_ms: int) -> int | NotLeader:
        """Append `values` in the current epoch; returns the offset of the first, or NotLeader."""
        if self.role is not Role.LEADER:
            return NotLeader(self.leader_id, self.term)
        offset = self.log.end_offset
        self._append_local([Entry(self.term, v) for v in values], now_ms)
        self._advance_leader_hw()
        return offset

    # -- voter changes (KIP-853; Raft thesis §4.1, one server at a time) ---------------------------

    @property
    def voter_record(self) -> VotersRecord:
        """The voter set in effect (with directory ids and endpoints once the quorum is dynamic)."""
        return self.history.latest()

    def enable_dynamic_voters(self, record: VotersRecord, now_ms: int) -> int | VoterChangeRefused:
        """Write the first VotersRecord (`kraft.version` 0 -> 1): the configured voters, described by `record`."""
        if self.history.dynamic:
            return VoterChangeRefused(VoterChangeError.INVALID, "the voter set is already dynamic")
        if record.ids != self.voters:
            return VoterChangeRefused(VoterChangeError.INVALID, "the first voter record must hold the static voters")
        return self._change_voters(record, now_ms)

    def add_voter(self, voter: VoterInfo, now_ms: int) -> int | VoterChangeRefused:
        """Append a record adding `voter`, which must be an observer that has caught up; the record's offset."""
        if not self.history.dynamic:
            return _STATIC
        current = self.history.latest()
        if voter.node_id in current.ids:
            return VoterChangeRefused(VoterChangeError.DUPLICATE_VOTER, f"node {voter.node_id} is already a voter")
        return self._change_voters(VotersRecord(tuple(sorted((*current.voters, voter), key=_node_id))), now_ms)

    def remove_voter(self, node_id: int, now_ms: int) -> int | VoterChangeRefused:
        """Append a record removing `node_id`.

        A leader asked to remove itself resigns instead and refuses (NOT_LEADER): the caller retries at the next
        leader. Were it to append its own removal and crash before that commits, it would hold the only copy of
        a voter set it is not in: it could not stand for election, and the voters of the set before, whose logs
        are shorter, could not win its vote. Raft's single-server changes are live only if the leader stays in.
        """
        if not self.history.dynamic:
            return _STATIC
        current = self.history.latest()
        if node_id not in current.ids:
            return VoterChangeRefused(VoterChangeError.VOTER_NOT_FOUND, f"node {node_id} is not a voter")
        if current.ids == {node_id}:
            return VoterChangeRefused(VoterChangeError.INVALID, "cannot remove the only voter")
        if node_id == self.node_id and self.role is Role.LEADER:
            self.resign(now_ms)
            return VoterChangeRefused(VoterChangeError.NOT_LEADER, "the leader resigned so that another removes it")
        return self._change_voters(VotersRecord(tuple(v for v in current.voters if v.node_id != node_id)), now_ms)

    def update_voter(self, voter: VoterInfo, now_ms: int) -> int | VoterChangeRefused:
        """Append a record replacing the description (directory id, endpoints) of an existing voter."""
        if not self.history.dynamic:
            return _STATIC
        current = self.history.latest()
        if voter.node_id not in current.ids:
            return VoterChangeRefused(VoterChangeError.VOTER_NOT_FOUND, f"node {voter.node_id} is not a voter")
        updated = tuple(voter if v.node_id == voter.node_id else v for v in current.voters)
        return self._change_voters(VotersRecord(updated), now_ms)

    def voter_change_pending(self) -> bool:
        """True while the newest VotersRecord in the log is not committed."""
        pending = self.history.latest_offset()
        return pending is not None and pending >= self.high_watermark

    def _change_voters(self, record: VotersRecord, now_ms: int) -> int | VoterChangeRefused:
        refused = self._check_voter_change(record, now_ms)
        if refused is not None:
            return refused
        offset = self.log.end_offset
        self._append_local([Entry(self.term, record)], now_ms)
        self._advance_leader_hw()
        return offset

    def _check_voter_change(self, record: VotersRecord, now_ms: int) -> VoterChangeRefused | None:
        if self.role is not Role.LEADER:
            return VoterChangeRefused(VoterChangeError.NOT_LEADER, "this node is not the quorum leader")
        current = self.history.latest().ids
        if self.voter_change_pending():
            return VoterChangeRefused(VoterChangeError.CHANGE_PENDING, "the previous voter change is not committed")
        if self.high_watermark <= self._epoch_start:
            # Until an entry of its own epoch commits, the leader may not know every committed change
            # (the fix to single-server changes published after the Raft thesis).
            return VoterChangeRefused(VoterChangeError.CHANGE_PENDING, "the leader has not committed in its epoch yet")
        added, removed = record.ids - current, current - record.ids
        if len(added) + len(removed) > 1:
            return VoterChangeRefused(VoterChangeError.INVALID, "only one voter may change at a time")
        for new in added:
            if not self._caught_up(new, now_ms):
                return VoterChangeRefused(VoterChangeError.NOT_CAUGHT_UP,
                                          f"node {new} has not fetched up to the high watermark recently")
        return None

    def _caught_up(self, replica: int, now_ms: int) -> bool:
        p = self._progress.get(replica)
        return (p is not None and p.last_fetch_ms is not None and now_ms - p.last_fetch_ms < self.config.check_quorum_ms
                and p.log_end_offset >= self.high_watermark)

    def _on_voters_changed(self, now_ms: int) -> None:
        """The newest voter record changed (appended, truncated away, or replaced by a snapshot's)."""
        was_voter = not self.is_observer
        self.voters = self.history.latest().ids
        self._fetch_order = self._shuffled_voters()
        if not was_voter and not self.is_observer:
            self._reset_election_timer(now_ms)  # a new voter gives the leader a full timeout before it doubts it
        if self.role is Role.LEADER:
            self._match = {v: self._match.get(v, self._known_match(v)) for v in self.voters}
            self._contact_ms = {v: self._contact_ms.get(v, now_ms) for v in self.voters}
        elif self.is_observer and self.role is not Role.FOLLOWER:
            self._become_follower(self.term, None, now_ms)  # no longer a voter: stop standing for election

    def _known_match(self, replica: int) -> int:
        p = self._progress.get(replica)
        return max(p.log_end_offset, 0) if p is not None else 0

    def snapshot(self, end_offset: int, data: object) -> bool:
        """Replace the committed prefix below `end_offset` by `data`; False if not in (log start, HW]."""
        if not self.log.start_offset < end_offset <= self.high_watermark:
            return False
        snap = Snapshot(end_offset, self.log.epoch_at(end_offset - 1), data, self.history.at(end_offset))
        self._out.append(SaveSnapshot(snap))
        self.log.compact(snap)
        self.history.compact(end_offset)
        self.latest_snapshot, self._snapshot_wanted = snap, None
        return True

    def resign(self, now_ms: int) -> bool:
        """Give up leadership (e.g. on shutdown) and let the other voters elect at once; False if not leader."""
        if self.role is not Role.LEADER:
            return False
        for peer in sorted(self.voters - {self.node_id}):
            self._request(EndEpoch(self.node_id, peer, self.term), now_ms)
        self._become_follower(self.term, None, now_ms)
        return True

    def replica_states(self, now_ms: int) -> list[ReplicaState]:
        """Voters (sorted), then observers seen fetching; only the leader knows more than the ids."""
        if self.role is not Role.LEADER:
            return [ReplicaState(v) for v in sorted(self.voters)]
        observers = sorted(set(self._progress) - self.voters)
        return [self._replica_state(r, now_ms) for r in [*sorted(self.voters), *observers]]

    def _replica_state(self, replica: int, now_ms: int) -> ReplicaState:
        if replica == self.node_id:
            return ReplicaState(replica, self.log.end_offset, now_ms, now_ms, replica in self.voters)
        p = self._progress.get(replica, _Progress())
        return ReplicaState(replica, p.log_end_offset, p.last_fetch_ms, p.last_caught_up_ms, replica in self.voters)

    def tick(self, now_ms: int) -> None:
        """Fire whatever timers are due at `now_ms`."""
        if self.role is Role.LEADER:
            self._leader_tick(now_ms)
        elif self.is_observer:
            self._observer_tick(now_ms)
        elif now_ms >= self._election_deadline_ms:
            self._on_election_deadline(now_ms)
        elif self.role is Role.FOLLOWER and self.leader_id is not None and now_ms >= self._next_fetch_ms:
            self._send_fetch(now_ms)
        elif self._vote_retries:
            self._retry_vote_requests(now_ms)

    def on_request_failed(self, request: Message, now_ms: int) -> None:
        """The driver got no usable answer to `request` (no connection, a timeout, an error answer).

        Nothing goes to its destination for `retry_backoff_ms` (Kafka's controller.quorum.retry.backoff.ms), so an
        unreachable peer is not asked again at every tick. A vote request of the election under way is sent again
        once that has passed (from `tick`); fetches and announcements wait for their next turn. Emits nothing.
        """
        self._retry.failed(request.dst, now_ms)
        if isinstance(request, VoteRequest) and self._asking(request):
            self._vote_retries.add(request.dst)

    def on_message(self, msg: Message, now_ms: int) -> None:
        """Handle one message; stale ones are answered with our term or ignored (§5.1)."""
        if not self._observe_term(msg, now_ms):
            return
        match msg:
            case VoteRequest():
                self._on_vote_request(msg, now_ms)
            case VoteResponse():
                self._on_vote_response(msg, now_ms)
            case BeginEpoch():
                self._follow(msg.src, now_ms)
            case EndEpoch():
                self._on_end_epoch(now_ms)
            case FetchRequest():
                self._on_fetch_request(msg, now_ms)
            case FetchResponse():
                self._on_fetch_response(msg, now_ms)
            case FetchSnapshotRequest():
                self._on_fetch_snapshot_request(msg, now_ms)
            case FetchSnapshotResponse():
                self._on_fetch_snapshot_response(msg, now_ms)

    # -- terms -------------------------------------------------------------------------------

    def _observe_term(self, msg: Message, now_ms: int) -> bool:
        """Adopt a higher term (§5.1); False if the message is stale and fully handled."""
        if isinstance(msg, VoteRequest) and msg.pre_vote:
            return True  # a pre-vote's term is only proposed: it never changes ours
        if isinstance(msg, VoteResponse) and msg.pre_vote and msg.term <= self.term:
            return True  # a lagging voter may still grant a pre-vote for our next term
        if msg.term > self.term:
            self._become_follower(msg.term, self._sender_if_leader(msg), now_ms)
            return True
        if msg.term < self.term:
            self._reject_stale(msg)
            return False
        return True

    @staticmethod
    def _sender_if_leader(msg: Message) -> int | None:
        """The sender, if the message itself proves that it leads its term."""
        if isinstance(msg, BeginEpoch) or (isinstance(msg, FetchResponse | FetchSnapshotResponse) and msg.ok):
            return msg.src
        return None

    def _reject_stale(self, msg: Message) -> None:
        if isinstance(msg, VoteRequest):
            self._send(VoteResponse(self.node_id, msg.src, self.term, False, msg.pre_vote, self._known_leader()))
        elif isinstance(msg, FetchRequest):
            self._send(self._redirect(msg))
        elif isinstance(msg, FetchSnapshotRequest):
            self._send(FetchSnapshotResponse(self.node_id, msg.src, self.term, False, None))

    def _redirect(self, msg: FetchRequest) -> FetchResponse:
        """Refuse a fetch, naming the leader we know of so the fetcher can go there."""
        return FetchResponse(self.node_id, msg.src, self.term, False, msg.offset, (), 0, leader_id=self.leader_id)

    def _become_follower(self, term: int, leader: int | None, now_ms: int) -> None:
        if term != self.term:
            self.term, self.voted_for = term, None
            self._out.append(SetTermVote(term, None))
        self.role, self.leader_id = Role.FOLLOWER, leader
        if leader is not None:
            self._last_leader_ms = now_ms
        self._end_candidacy()
        self._reset_election_timer(now_ms)

    def _follow(self, leader: int, now_ms: int) -> None:
        """Accept `leader` as the leader of the current term (there is at most one, §5.2)."""
        if self.role is Role.LEADER:
            assert leader == self.node_id, "two leaders in one term"
            return
        if self.role is Role.FOLLOWER and self.leader_id == leader:
            self._last_leader_ms = now_ms
            self._reset_election_timer(now_ms)
            return
        self._become_follower(self.term, leader, now_ms)
        self._next_fetch_ms = now_ms

    def _reset_election_timer(self, now_ms: int) -> None:
        c = self.config
        self._election_deadline_ms = now_ms + self.rng.randrange(c.election_timeout_ms_min, c.election_timeout_ms_max)

    def _on_end_epoch(self, now_ms: int) -> None:
        """The leader of our term resigned: forget it, so we grant pre-votes, and elect a successor soon."""
        if self.role is Role.LEADER:
            return  # only the leader sends EndEpoch, and only about its own term
        self.leader_id, self._next_fetch_ms = None, now_ms
        if not self.is_observer:
            self._election_deadline_ms = now_ms + self.rng.randrange(self.config.fetch_interval_ms)

    # -- elections (§5.2, pre-vote from the Raft thesis §9.6) --------------------------------

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _on_election_deadline(self, now_ms: int) -> None:
        """A candidate's undecided election timed out: back off first. Otherwise stand (again) now."""
        if self.role is Role.CANDIDATE and not self._backing_off:
            self._back_off(now_ms)
        else:
            self._start_pre_vote(now_ms)

    def _back_off(self, now_ms: int) -> None:
        """Our election failed (timed out, or refused by a majority): stand again only after a random backoff.

        Its range doubles with each failed election in a row, so candidates that keep splitting the vote soon
        stand at different moments (Kafka's election backoff). Meanwhile we stay the candidate of our term.
        """
        self._failed_elections += 1
        self._backing_off, self._vote_retries = True, set()
        backoff = election_backoff_ms(self._failed_elections, self.config.election_backoff_max_ms, self.rng)
        self._election_deadline_ms = now_ms + backoff

    def _end_candidacy(self) -> None:
        """We lead or follow now: the next election we stand in is a first try again."""
        self._failed_elections, self._backing_off, self._vote_retries = 0, False, set()

    def _start_pre_vote(self, now_ms: int) -> None:
        """Ask whether peers would vote for us in term+1, without changing our term."""
        self.role, self.leader_id = Role.PROSPECTIVE, None
        self._votes, self._refusals, self._backing_off = {self.node_id}, set(), False
        self._reset_election_timer(now_ms)
        self._request_votes(self.term + 1, True, now_ms)
        self._check_votes(now_ms)

    def _start_election(self, now_ms: int) -> None:
        self.role, self.term, self.voted_for = Role.CANDIDATE, self.term + 1, self.node_id
        self._out.append(SetTermVote(self.term, self.node_id))  # persisted before asking (§5.2)
        self._votes, self._refusals = {self.node_id}, set()
        self._reset_election_timer(now_ms)
        self._request_votes(self.term, False, now_ms)
        self._check_votes(now_ms)

    def _request_votes(self, term: int, pre_vote: bool, now_ms: int) -> None:
        """Ask every other voter; one backing off after a failed request is asked once that has passed."""
        self._vote_retries = set()
        for peer in sorted(self.voters - {self.node_id}):
            if not self._request(self._vote_request(peer, term, pre_vote), now_ms):
                self._vote_retries.add(peer)

    def _vote_request(self, peer: int, term: int, pre_vote: bool) -> VoteRequest:
        return VoteRequest(self.node_id, peer, term, self.log.last_epoch, self.log.end_offset, pre_vote)

    def _asking(self, request: VoteRequest) -> bool:
        """`request` belongs to the (pre-)election we stand in now, and its voter has not answered it."""
        if self._backing_off or request.dst in self._votes | self._refusals:
            return False
        if request.pre_vote:
            return self.role is Role.PROSPECTIVE and request.term == self.term + 1
        return self.role is Role.CANDIDATE and request.term == self.term

    def _retry_vote_requests(self, now_ms: int) -> None:
        """Ask again the voters whose vote request failed, now that their backoff has passed."""
        pre_vote = self.role is Role.PROSPECTIVE
        term = self.term + 1 if pre_vote else self.term
        for voter in sorted(self._vote_retries):
            if self._request(self._vote_request(voter, term, pre_vote), now_ms):
                self._vote_retries.discard(voter)

    def _log_up_to_date(self, msg: VoteRequest) -> bool:
        """The candidate's log is at least as up to date as ours (§5.4.1)."""
        return (msg.last_epoch, msg.end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _heard_from_leader(self, now_ms: int) -> bool:
        if self.role is Role.LEADER:
            return True
        last = self._last_leader_ms
        return self.leader_id is not None and last is not None and now_ms - last < self.config.election_timeout_ms_min

    def _on_vote_request(self, msg: VoteRequest, now_ms: int) -> None:
        if self.is_observer and not self.history.dynamic:
            granted = False  # in a static quorum an observer never becomes a voter
        elif msg.pre_vote:
            # In a dynamic quorum a non-voter answers too (Raft thesis §4.1): it may lag behind the record
            # that made it a voter, and a candidate counts only the votes of its own voter set.
            granted = (msg.term > self.term and self._log_up_to_date(msg)
                       and not self._heard_from_leader(now_ms))
        else:
            granted = (self.voted_for in (None, msg.src) and self.role is not Role.LEADER
                       and self._log_up_to_date(msg))
            if granted and self.voted_for is None:
                self.voted_for = msg.src
                self._out.append(SetTermVote(self.term, msg.src))  # persisted before answering
            if granted:
                self._reset_election_timer(now_ms)
        self._send(VoteResponse(self.node_id, msg.src, self.term, granted, msg.pre_vote, self._known_leader()))

    def _known_leader(self) -> int | None:
        return self.leader_id if self.role in (Role.FOLLOWER, Role.LEADER) else None

    def _on_vote_response(self, msg: VoteResponse, now_ms: int) -> None:
        named = msg.leader_id if self.history.dynamic and msg.term == self.term else None
        if named is not None and self.role is not Role.LEADER:
            if named == msg.src:
                # The leader of our term itself answered (so it is alive): fetch from it. This is how a voter whose
                # voter record was truncated away, or that was removed while cut off, finds the leader again: the
                # leader's voter set may not include it, so no BeginEpoch reaches it. (In a static quorum every
                # voter gets BeginEpoch.)
                self._follow(msg.src, now_ms)
                return
            if named != self.node_id:
                self._probe(named, now_ms)
        expected = Role.PROSPECTIVE if msg.pre_vote else Role.CANDIDATE
        if self.role is not expected or msg.src not in self.voters:
            return
        self._vote_retries.discard(msg.src)  # it answered: no need to ask again
        if msg.granted:
            self._votes.add(msg.src)
            self._check_votes(now_ms)
        elif expected is Role.CANDIDATE and msg.src not in self._votes:
            self._on_refusal(msg.src, now_ms)

    def _on_refusal(self, voter: int, now_ms: int) -> None:
        """A voter refused us our term's vote: once a majority can no longer be reached, back off at once rather
        than wait out the election timeout (the vote is split, or our log is behind)."""
        self._refusals.add(voter)
        if not self._backing_off and len(self.voters - self._refusals) < self._majority():
            self._back_off(now_ms)

    def _probe(self, leader: int, now_ms: int) -> None:
        """Fetch once from a leader a voter named, without following it yet.

        A hint naming a third node is not followed on its word: that leader may be dead, and two nodes could keep
        pointing each other at it. But our voter set may not even include the leader (a voter record that named
        us was truncated away on the leader's side and survives only in our log), so no vote request of ours
        reaches it and it does not know to announce itself to us. A fetch does reach it: only the leader of our
        term answers it, and that answer is what makes us follow (`_on_fetch_response`); a dead one never
        answers, and the election goes on meanwhile.
        """
        offset = self.log.end_offset
        self._request(FetchRequest(self.node_id, leader, self.term, offset, self.log.epoch_at(offset - 1)), now_ms)

    def _check_votes(self, now_ms: int) -> None:
        if len(self._votes) < self._majority():
            return
        if self.role is Role.PROSPECTIVE:
            self._start_election(now_ms)
        elif self.role is Role.CANDIDATE:
            self._become_leader(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        """Win the term and append a leader-change record, so that earlier entries commit (§5.4.2)."""
        self.role, self.leader_id = Role.LEADER, self.node_id
        self._end_candidacy()
        self._match = {v: 0 for v in self.voters}
        self._contact_ms = {v: now_ms for v in self.voters}
        self._progress = {}
        self._epoch_start = self.log.end_offset
        self._append_local([Entry(self.term, None)], now_ms)
        self._next_begin_ms = now_ms + self.config.begin_epoch_interval_ms
        for peer in sorted(self.voters - {self.node_id}):
            self._request(BeginEpoch(self.node_id, peer, self.term), now_ms)
        self._advance_leader_hw()

    # -- leader ------------------------------------------------------------------------------

    def _leader_tick(self, now_ms: int) -> None:
        """Step down when a majority has not fetched within check_quorum_ms; re-announce the epoch."""
        recent = {v for v, t in self._contact_ms.items() if now_ms - t < self.config.check_quorum_ms}
        if len(recent | {self.node_id}) < self._majority():
            self._become_follower(self.term, None, now_ms)
            return
        if now_ms >= self._next_begin_ms:
            self._next_begin_ms = now_ms + self.config.begin_epoch_interval_ms
            stale = {v for v, t in self._contact_ms.items() if now_ms - t >= 2 * self.config.fetch_interval_ms}
            for peer in sorted((stale | self._silent_former_voters(now_ms)) - {self.node_id}):
                self._request(BeginEpoch(self.node_id, peer, self.term), now_ms)

    def _silent_former_voters(self, now_ms: int) -> set[int]:
        """Nodes that were voters and are not, and do not fetch: one removed while cut off does not know it,
        waits for a leader as a voter would, and needs this announcement to fetch and learn of its removal."""
        former = self.history.all_ids() - self.voters
        quiet = {r for r in former if (p := self._progress.get(r)) is None or p.last_fetch_ms is None
                 or now_ms - p.last_fetch_ms >= 2 * self.config.fetch_interval_ms}
        return quiet

    def _on_fetch_request(self, msg: FetchRequest, now_ms: int) -> None:
        if self.role is not Role.LEADER:
            self._send(self._redirect(msg))
            return
        voter = msg.src in self.voters
        progress = self._progress.setdefault(msg.src, _Progress())
        progress.last_fetch_ms = now_ms
        if voter:
            self._contact_ms[msg.src] = now_ms  # observers never count toward check-quorum
        if msg.offset < self.log.start_offset:
            self._send(self._snapshot_answer(msg))
            return
        if not self.log.matches(msg.offset, msg.last_epoch):
            self._send(self._diverging_response(msg))
            return
        progress.log_end_offset = msg.offset
        if msg.offset >= self.log.end_offset:
            progress.last_caught_up_ms = now_ms
        if voter:  # observers never count toward the HW
            self._match[msg.src] = max(self._match[msg.src], msg.offset)
            self._advance_leader_hw()
        entries = self.log.read(msg.offset, self.config.max_fetch_entries)
        self._send(FetchResponse(self.node_id, msg.src, self.term, True, msg.offset, entries, self.high_watermark,
                                 last_epoch=msg.last_epoch))

    def _diverging_response(self, msg: FetchRequest) -> FetchResponse:
        """Point the follower at the end of the last epoch both logs may share, strictly below its offset.

        If that point is below our log start, the follower must take our snapshot instead.
        """
        _, end = self.log.end_offset_for_epoch(msg.last_epoch)
        end = min(end, msg.offset - 1)
        if end < self.log.start_offset:
            return self._snapshot_answer(msg)
        return FetchResponse(self.node_id, msg.src, self.term, True, msg.offset, (), self.high_watermark, end,
                             last_epoch=msg.last_epoch)

    def _snapshot_answer(self, msg: FetchRequest) -> FetchResponse:
        snap = self.latest_snapshot
        assert snap is not None and snap.end_offset == self.log.start_offset, "log start without its snapshot"
        return FetchResponse(self.node_id, msg.src, self.term, True, msg.offset, (), self.high_watermark,
                             snapshot_id=(snap.end_offset, snap.last_epoch), last_epoch=msg.last_epoch)

    def _on_fetch_snapshot_request(self, msg: FetchSnapshotRequest, now_ms: int) -> None:
        if self.role is not Role.LEADER:
            self._send(FetchSnapshotResponse(self.node_id, msg.src, self.term, False, None))
            return
        if msg.src in self.voters:
            self._contact_ms[msg.src] = now_ms
        snap = self.latest_snapshot
        if snap is not None and (snap.end_offset, snap.last_epoch) != (msg.end_offset, msg.last_epoch):
            snap = None  # replaced by a newer one: the fetcher fetches again and learns its id
        self._send(FetchSnapshotResponse(self.node_id, msg.src, self.term, True, snap))

    def _advance_leader_hw(self) -> None:
        """Commit the largest offset a majority holds, only if it is in our own epoch (§5.4.2)."""
        self._match[self.node_id] = self.log.end_offset
        offsets = sorted(self._match.values(), reverse=True)
        candidate = offsets[self._majority() - 1]
        if candidate > self.high_watermark and self.log.epoch_at(candidate - 1) == self.term:
            self.high_watermark = candidate

    # -- follower and observer ----------------------------------------------------------------

    def _observer_tick(self, now_ms: int) -> None:
        """Fetch from the known leader, or from the voters in turn until one names the leader."""
        if now_ms >= self._election_deadline_ms:
            self.leader_id = None  # no answer from the leader for an election timeout: look again
            self._reset_election_timer(now_ms)
        if now_ms >= self._next_fetch_ms:
            self._send_fetch(now_ms)

    def _send_fetch(self, now_ms: int) -> None:
        dst = self._fetch_target(now_ms)
        if dst is None:
            return  # it is backing off after a failed request: a later tick fetches
        self._next_fetch_ms = now_ms + self.config.fetch_interval_ms
        offset = self.log.end_offset
        self._send(FetchRequest(self.node_id, dst, self.term, offset, self.log.epoch_at(offset - 1)))

    def _fetch_target(self, now_ms: int) -> int | None:
        """The leader, or knowing none the next voter in our rotation that is not backing off; None if none is
        ready."""
        if self.leader_id is not None:
            return self.leader_id if self._retry.ready(self.leader_id, now_ms) else None
        for _ in range(len(self._fetch_order)):
            dst = self._fetch_order[self._fetch_turn % len(self._fetch_order)]
            self._fetch_turn += 1
            if self._retry.ready(dst, now_ms):
                return dst
        return None

    def _on_fetch_response(self, msg: FetchResponse, now_ms: int) -> None:
        if self.role is Role.LEADER:
            return
        if not msg.ok:
            self._on_redirect(msg, now_ms)
            return
        self._follow(msg.src, now_ms)
        if not self._answers_current_fetch(msg):
            return  # an answer to an older fetch (duplicated or reordered); ignore it
        if msg.snapshot_id is not None:
            self._request_snapshot(msg.snapshot_id, now_ms)
            return
        if msg.diverging_end is not None:
            self._truncate(max(msg.diverging_end, 0), now_ms)
        else:
            self._append_local(list(msg.entries), now_ms)
            matched = msg.offset + len(msg.entries)
            self.high_watermark = max(self.high_watermark, min(msg.high_watermark, matched))
        if msg.entries or msg.diverging_end is not None:
            self._send_fetch(now_ms)

    def _answers_current_fetch(self, msg: FetchResponse) -> bool:
        """The answer is about our log as it is: same end offset and, when echoed, same last epoch.

        The offset alone is not enough: after a truncation the log end can come back to an offset
        we fetched from before, with a different last epoch.
        """
        if msg.offset != self.log.end_offset:
            return False
        return msg.last_epoch is None or msg.last_epoch == self.log.epoch_at(msg.offset - 1)

    def _on_redirect(self, msg: FetchResponse, now_ms: int) -> None:
        """A non-leader refused our fetch: go to the leader it names, or forget ours if it was ours."""
        hint = msg.leader_id if msg.leader_id != self.node_id else None
        if hint is None:
            if msg.src == self.leader_id:
                self.leader_id = None  # our leader stepped down in this term
            return
        if self.role is not Role.FOLLOWER:
            self._probe(hint, now_ms)  # standing for election: follow only the leader's own answer (`_probe`)
            return
        if hint != self.leader_id:
            self._follow(hint, now_ms)
            self._send_fetch(now_ms)

    def _request_snapshot(self, snapshot_id: tuple[int, int], now_ms: int) -> None:
        """Our log end, or where our log diverges, is below the leader's log start: take its snapshot."""
        if snapshot_id[0] <= self.log.start_offset:
            return  # not newer than what we have
        assert self.leader_id is not None
        request = FetchSnapshotRequest(self.node_id, self.leader_id, self.term, *snapshot_id)
        if self._request(request, now_ms):  # held back, it is asked for when a later fetch names it again
            self._snapshot_wanted = snapshot_id

    def _on_fetch_snapshot_response(self, msg: FetchSnapshotResponse, now_ms: int) -> None:
        if self.role is Role.LEADER or not msg.ok:
            return
        self._follow(msg.src, now_ms)
        snap, wanted = msg.snapshot, self._snapshot_wanted
        if wanted is None:
            return  # a duplicate, or our log changed since we asked
        if snap is None:
            self._snapshot_wanted = None
            self._send_fetch(now_ms)  # the leader moved on to a newer snapshot: learn its id
        elif (snap.end_offset, snap.last_epoch) == wanted:
            self._install(snap, now_ms)

    def _install(self, snap: Snapshot, now_ms: int) -> None:
        """Replace our whole log by the leader's snapshot.

        Safe because we asked for it while our log ended below the snapshot, or diverged below it,
        and the log has not changed since: every entry dropped is either in the snapshot or
        uncommitted. Hence also our HW is not above the snapshot's end (asserted).
        """
        assert snap.end_offset > self.log.start_offset and snap.end_offset >= self.high_watermark, \
            "installing a snapshot would drop committed entries"
        self._out.append(InstallSnapshot(snap))
        self.log.reset(snap)
        self.history.reset(snap.voters)
        self._on_voters_changed(now_ms)
        self.latest_snapshot, self._snapshot_wanted = snap, None
        self.high_watermark = max(self.high_watermark, snap.end_offset)
        self._send_fetch(now_ms)

    def _truncate(self, offset: int, now_ms: int) -> None:
        """Drop our divergent suffix; committed entries are never below it (Leader Completeness, §5.4)."""
        assert offset >= self.high_watermark, "truncating committed entries"
        if offset < self.log.end_offset:
            self.log.truncate(offset)
            self._out.append(Truncate(offset))
            self._snapshot_wanted = None
            if self.history.truncate(offset):
                self._on_voters_changed(now_ms)

    # -- helpers -----------------------------------------------------------------------------

    def _append_local(self, entries: list[Entry], now_ms: int) -> None:
        if entries:
            offset = self.log.end_offset
            self._out.append(Append(offset, tuple(entries)))
            self.log.append(entries)
            self._snapshot_wanted = None
            if self.history.append(offset, [e.value for e in entries]):
                self._on_voters_changed(now_ms)

    def _send(self, msg: Message) -> None:
        self._out.append(Send(msg))

    def _request(self, msg: Message, now_ms: int) -> bool:
        """Send a request, unless its destination is backing off after a failed one; False if held back."""
        if not self._retry.ready(msg.dst, now_ms):
            return False
        self._send(msg)
        return True


_STATIC = VoterChangeRefused(VoterChangeError.STATIC_QUORUM, "the voter set is static (kraft.version 0)")


def _node_id(voter: VoterInfo) -> int:
    return voter.node_id
