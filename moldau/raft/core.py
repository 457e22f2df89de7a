"""A Raft voter as a pure object: messages and ticks in, actions out, no I/O of its own.

Rules of this file:
- Time comes only from `now_ms` arguments and randomness only from the injected `random.Random`.
- Every change of term or vote is emitted as `SetTermVote` before any message that depends on it.
- Every change of the log is emitted as `Append`/`Truncate` before any message that reports it.
- The high watermark never moves back while the object lives; it is not persisted.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass

from moldau.raft.log import Entry, Log, PersistedState
from moldau.raft.messages import (
    Action,
    Append,
    BeginEpoch,
    FetchRequest,
    FetchResponse,
    Message,
    Send,
    SetTermVote,
    Truncate,
    VoteRequest,
    VoteResponse,
)


class Role(enum.Enum):
    FOLLOWER = "follower"
    PROSPECTIVE = "prospective"  # collecting pre-votes, term unchanged
    CANDIDATE = "candidate"
    LEADER = "leader"


@dataclass(frozen=True, slots=True)
class Config:
    """Timeouts in milliseconds; the election timeout is drawn uniformly from [min, max)."""

    election_timeout_ms_min: int = 300
    election_timeout_ms_max: int = 600
    fetch_interval_ms: int = 50
    check_quorum_ms: int = 600
    begin_epoch_interval_ms: int = 100
    max_fetch_entries: int = 16


@dataclass(frozen=True, slots=True)
class NotLeader:
    """Returned by `propose` on a non-leader, with the leader it knows of (if any)."""

    leader_id: int | None
    term: int


class RaftNode:
    """One voter of a static quorum. Drive it with `on_message`, `tick` and `propose`, then `drain`."""

    def __init__(self, node_id: int, voters: frozenset[int], state: PersistedState,
                 rng: random.Random, now_ms: int, config: Config | None = None) -> None:
        assert node_id in voters
        self.node_id, self.voters, self.rng = node_id, voters, rng
        self.config = config or Config()
        self.term, self.voted_for = state.term, state.voted_for
        self.log = Log(state.entries)
        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        self.high_watermark = 0
        self._out: list[Action] = []
        self._votes: set[int] = set()
        self._match: dict[int, int] = {}  # leader: offset up to which each voter's log agrees
        self._contact_ms: dict[int, int] = {}  # leader: last fetch from each voter
        self._next_fetch_ms = now_ms
        self._next_begin_ms = now_ms
        self._last_leader_ms: int | None = None
        self._reset_election_timer(now_ms)

    # -- driver interface -------------------------------------------------------------------

    def drain(self) -> list[Action]:
        """Actions produced since the last drain, in the order they must be performed."""
        out, self._out = self._out, []
        return out

    def propose(self, values: list[object], now_ms: int) -> int | NotLeader:
        """Append `values` in the current epoch; returns the offset of the first, or NotLeader."""
        if self.role is not Role.LEADER:
            return NotLeader(self.leader_id, self.term)
        offset = self.log.end_offset
        self._append_local([Entry(self.term, v) for v in values])
        self._advance_leader_hw()
        return offset

    def tick(self, now_ms: int) -> None:
        """Fire whatever timers are due at `now_ms`."""
        if self.role is Role.LEADER:
            self._leader_tick(now_ms)
        elif now_ms >= self._election_deadline_ms:
            self._start_pre_vote(now_ms)
        elif self.role is Role.FOLLOWER and self.leader_id is not None and now_ms >= self._next_fetch_ms:
            self._send_fetch(now_ms)

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
            case FetchRequest():
                self._on_fetch_request(msg, now_ms)
            case FetchResponse():
                self._on_fetch_response(msg, now_ms)

    # -- terms -------------------------------------------------------------------------------

    def _observe_term(self, msg: Message, now_ms: int) -> bool:
        """Adopt a higher term (§5.1); False if the message is stale and fully handled."""
        if isinstance(msg, VoteRequest) and msg.pre_vote:
            return True  # a pre-vote's term is only proposed: it never changes ours
        if isinstance(msg, VoteResponse) and msg.pre_vote and msg.term <= self.term:
            return True  # a lagging voter may still grant a pre-vote for our next term
        if msg.term > self.term:
            from_leader = isinstance(msg, BeginEpoch) or (isinstance(msg, FetchResponse) and msg.ok)
            leader = msg.src if from_leader else None
            self._become_follower(msg.term, leader, now_ms)
            return True
        if msg.term < self.term:
            self._reject_stale(msg)
            return False
        return True

    def _reject_stale(self, msg: Message) -> None:
        if isinstance(msg, VoteRequest):
            self._send(VoteResponse(self.node_id, msg.src, self.term, False, msg.pre_vote))
        elif isinstance(msg, FetchRequest):
            self._send(FetchResponse(self.node_id, msg.src, self.term, False, msg.offset, (), 0))

    def _become_follower(self, term: int, leader: int | None, now_ms: int) -> None:
        if term != self.term:
            self.term, self.voted_for = term, None
            self._out.append(SetTermVote(term, None))
        self.role, self.leader_id = Role.FOLLOWER, leader
        if leader is not None:
            self._last_leader_ms = now_ms
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

    # -- elections (§5.2, pre-vote from the Raft thesis §9.6) --------------------------------

    def _majority(self) -> int:
        return len(self.voters) // 2 + 1

    def _start_pre_vote(self, now_ms: int) -> None:
        """Ask whether peers would vote for us in term+1, without changing our term."""
        self.role, self.leader_id, self._votes = Role.PROSPECTIVE, None, {self.node_id}
        self._reset_election_timer(now_ms)
        self._request_votes(self.term + 1, pre_vote=True)
        self._check_votes(now_ms)

    def _start_election(self, now_ms: int) -> None:
        self.role, self.term, self.voted_for = Role.CANDIDATE, self.term + 1, self.node_id
        self._out.append(SetTermVote(self.term, self.node_id))  # persisted before asking (§5.2)
        self._votes = {self.node_id}
        self._reset_election_timer(now_ms)
        self._request_votes(self.term, pre_vote=False)
        self._check_votes(now_ms)

    def _request_votes(self, term: int, pre_vote: bool) -> None:
        for peer in sorted(self.voters - {self.node_id}):
            self._send(VoteRequest(self.node_id, peer, term, self.log.last_epoch, self.log.end_offset, pre_vote))

    def _log_up_to_date(self, msg: VoteRequest) -> bool:
        """The candidate's log is at least as up to date as ours (§5.4.1)."""
        return (msg.last_epoch, msg.end_offset) >= (self.log.last_epoch, self.log.end_offset)

    def _heard_from_leader(self, now_ms: int) -> bool:
        if self.role is Role.LEADER:
            return True
        last = self._last_leader_ms
        return self.leader_id is not None and last is not None and now_ms - last < self.config.election_timeout_ms_min

    def _on_vote_request(self, msg: VoteRequest, now_ms: int) -> None:
        if msg.pre_vote:
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
        self._send(VoteResponse(self.node_id, msg.src, self.term, granted, msg.pre_vote))

    def _on_vote_response(self, msg: VoteResponse, now_ms: int) -> None:
        expected = Role.PROSPECTIVE if msg.pre_vote else Role.CANDIDATE
        if self.role is expected and msg.granted and msg.src in self.voters:
            self._votes.add(msg.src)
            self._check_votes(now_ms)

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
        self._match = {v: 0 for v in self.voters}
        self._contact_ms = {v: now_ms for v in self.voters}
        self._append_local([Entry(self.term, None)])
        self._next_begin_ms = now_ms + self.config.begin_epoch_interval_ms
        for peer in sorted(self.voters - {self.node_id}):
            self._send(BeginEpoch(self.node_id, peer, self.term))
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
            for peer in sorted(stale - {self.node_id}):
                self._send(BeginEpoch(self.node_id, peer, self.term))

    def _on_fetch_request(self, msg: FetchRequest, now_ms: int) -> None:
        if self.role is not Role.LEADER or msg.src not in self.voters:
            return
        self._contact_ms[msg.src] = now_ms
        if not self.log.matches(msg.offset, msg.last_epoch):
            self._send(self._diverging_response(msg))
            return
        self._match[msg.src] = max(self._match[msg.src], msg.offset)
        self._advance_leader_hw()
        entries = self.log.read(msg.offset, self.config.max_fetch_entries)
        self._send(FetchResponse(self.node_id, msg.src, self.term, True, msg.offset, entries, self.high_watermark))

    def _diverging_response(self, msg: FetchRequest) -> FetchResponse:
        """Point the follower at the end of the last epoch both logs may share, strictly below its offset."""
        _, end = self.log.end_offset_for_epoch(msg.last_epoch)
        end = min(end, msg.offset - 1)
        return FetchResponse(self.node_id, msg.src, self.term, True, msg.offset, (), self.high_watermark, end)

    def _advance_leader_hw(self) -> None:
        """Commit the largest offset a majority holds, only if it is in our own epoch (§5.4.2)."""
        self._match[self.node_id] = self.log.end_offset
        offsets = sorted(self._match.values(), reverse=True)
        candidate = offsets[self._majority() - 1]
        if candidate > self.high_watermark and self.log.epoch_at(candidate - 1) == self.term:
            self.high_watermark = candidate

    # -- follower ----------------------------------------------------------------------------

    def _send_fetch(self, now_ms: int) -> None:
        assert self.leader_id is not None
        self._next_fetch_ms = now_ms + self.config.fetch_interval_ms
        offset = self.log.end_offset
        self._send(FetchRequest(self.node_id, self.leader_id, self.term, offset, self.log.epoch_at(offset - 1)))

    def _on_fetch_response(self, msg: FetchResponse, now_ms: int) -> None:
        if not msg.ok or self.role is Role.LEADER:
            return
        self._follow(msg.src, now_ms)
        if msg.offset != self.log.end_offset:
            return  # an answer to an older fetch (duplicated or reordered); ignore it
        if msg.diverging_end is not None:
            self._truncate(max(msg.diverging_end, 0))
        else:
            self._append_local(list(msg.entries))
            matched = msg.offset + len(msg.entries)
            self.high_watermark = max(self.high_watermark, min(msg.high_watermark, matched))
        if msg.entries or msg.diverging_end is not None:
            self._send_fetch(now_ms)

    def _truncate(self, offset: int) -> None:
        """Drop our divergent suffix; committed entries are never below it (Leader Completeness, §5.4)."""
        assert offset >= self.high_watermark, "truncating committed entries"
        if offset < self.log.end_offset:
            self.log.truncate(offset)
            self._out.append(Truncate(offset))

    # -- helpers -----------------------------------------------------------------------------

    def _append_local(self, entries: list[Entry]) -> None:
        if entries:
            self._out.append(Append(self.log.end_offset, tuple(entries)))
            self.log.append(entries)

    def _send(self, msg: Message) -> None:
        self._out.append(Send(msg))
