"""A seeded, deterministic simulator of a Raft quorum built from `moldau.raft` nodes.

One `random.Random(seed)` drives everything: network delays, drops, duplicates, partitions,
crashes, resignations, snapshots and client proposals. Events run from a heap ordered by
(virtual time, sequence).

Durability rule (lazy fsync): a node's persist actions are performed in order but become durable
only at a sync point: before the node sends a message (the driver contract: a persist action is
durable before any later Send), and before the driver acts on a higher high watermark (here: the
simulated state machine applies committed entries). A crash happens between events and loses a
random suffix of the unsynced actions, plus all volatile state: role, leader, high watermark,
timers; messages that arrive while it is down are lost (older ones may still arrive after its
restart). A restarted node reloads term, vote, snapshot and log from its `Storage`.

The simulated state machine of each node is the tuple of committed entries it has applied; its
snapshots carry exactly that tuple, so every snapshot is checked against the committed record.

Requests fail as over TCP: one to a node that is down is refused soon after it arrives, and one that is lost, or
whose answer is lost, fails at its sender after `REQUEST_TIMEOUT_MS`; the sender's `on_request_failed` hears of
it (only the incarnation that sent it). Invariant: no node sends a request to a peer within its
`retry_backoff_ms` of hearing that a request to that peer failed.

With `Faults.reconfigure_every_ms`, a leader is asked now and then to change the voter set (KIP-853): first
to make it dynamic, then to add a random non-voter or remove a random voter. Refusals (a change in flight, a
node not caught up) are expected; the invariants say that at most one change is ever uncommitted on a leader,
that consecutive voter sets differ by one voter, and that logs match (Log Matching) whatever the sets were.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.raft import (
    Action,
    Append,
    BeginEpoch,
    Config,
    EndEpoch,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    InstallSnapshot,
    Message,
    NotLeader,
    PersistedState,
    RaftNode,
    Role,
    SaveSnapshot,
    Send,
    SetTermVote,
    Snapshot,
    Truncate,
    VoterChangeRefused,
    VoteRequest,
    VoterInfo,
    VotersRecord,
)

TICK_MS = 10
REQUEST_TIMEOUT_MS = 600  # twice the shortest election timeout, as Kafka's 2 s request timeout is against 1 s
REQUESTS = (VoteRequest, BeginEpoch, EndEpoch, FetchRequest, FetchSnapshotRequest)


class InvariantViolation(AssertionError):
    """An invariant broke; the message names it."""


@dataclass
class Faults:
    """Per-seed fault rates and patterns."""

    drop: float = 0.05
    duplicate: float = 0.05
    delay_ms_max: int = 30
    fault_every_ms: int = 200  # 0: no crashes, partitions or resignations at all
    leader_crash: float = 0.0  # chance that a new leader, or one that just proposed, crashes soon after (Figure 8)
    crash_after_replicating: float = 0.0  # chance that a leader crashes right after sending entries
    snapshot_every_ms: int = 0  # 0: nodes never snapshot
    reconfigure_every_ms: int = 0  # 0: the voter set stays static
    report_failures: bool = True  # False: failed requests fail silently, their senders never hear of it


@dataclass
class Storage:
    """One node's durable state, and the persist actions performed since its last sync."""

    state: PersistedState = field(default_factory=PersistedState)
    pending: list[Action] = field(default_factory=list)

    def sync(self, keep: int | None = None) -> None:
        """Make the first `keep` pending actions (all by default) durable and forget the rest."""
        for action in self.pending[:keep]:
            apply_persist(self.state, action)
        self.pending.clear()


def apply_persist(st: PersistedState, action: Action) -> None:
    """What the driver does on disk for one persist action."""
    start = st.snapshot.end_offset if st.snapshot else 0
    match action:
        case SetTermVote(term, vote):
            st.term, st.voted_for = term, vote
        case Append(offset, entries):
            assert offset == start + len(st.entries), f"append at {offset}, log ends at {start + len(st.entries)}"
            st.entries.extend(entries)
        case Truncate(offset):
            assert offset >= start
            del st.entries[offset - start:]
        case SaveSnapshot(snap):
            assert start <= snap.end_offset <= start + len(st.entries)
            del st.entries[:snap.end_offset - start]
            st.snapshot = snap
        case InstallSnapshot(snap):
            st.entries.clear()
            st.snapshot = snap


class Simulation:
    """A quorum of `n` voters and `observers` observers under faults; `run` raises InvariantViolation."""

    def __init__(self, seed: int, n: int, faults: Faults | None = None, observers: int = 0,
                 config: Config | None = None) -> None:
        self.seed, self.rng = seed, random.Random(seed)
        self.voters = frozenset(range(1, n + 1))
        self.ids = self.voters | frozenset(range(n + 1, n + 1 + observers))
        self.faults = faults or Faults()
        self.config = config or Config()
        self.now_ms = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self.storage = {i: Storage() for i in self.ids}
        self.applied: dict[int, list[Entry]] = {i: [] for i in self.ids}
        self.nodes: dict[int, RaftNode | None] = {i: self._boot(i) for i in self.ids}
        self.blocked: set[tuple[int, int]] = set()  # (src, dst) pairs that drop every message
        self.faulty = True
        self.committed: dict[int, Entry] = {}
        self.leaders: dict[int, int] = {}
        self.seen_term = {i: 0 for i in self.ids}
        self.sent_term = {i: 0 for i in self.ids}
        self.seen_hw = {i: 0 for i in self.ids}
        self.proposed = 0
        self.voter_changes = 0  # voter records leaders appended
        self.failed_requests = 0  # failures reported to senders
        self._backoff_until: dict[tuple[int, int], int] = {}  # (node, peer): no request before, after a failure
        self._touched: set[int] = set()  # nodes an event may have changed: only they need checking

    # -- plumbing ------------------------------------------------------------------------------

    def _boot(self, i: int) -> RaftNode:
        st = self.storage[i].state
        copy = PersistedState(st.term, st.voted_for, list(st.entries), st.snapshot)
        self.applied[i] = list(self._snapshot_entries(st.snapshot))
        return RaftNode(i, self.voters, copy, random.Random(self.rng.random()), self.now_ms, self.config)

    @staticmethod
    def _snapshot_entries(snap: Snapshot | None) -> tuple[Entry, ...]:
        if snap is None:
            return ()
        assert isinstance(snap.data, tuple)
        return snap.data

    def _at(self, when_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when_ms, self._seq, fn))

    def _perform(self, i: int, actions: list[Action], answering: Message | None = None) -> None:
        """Carry out node i's actions; `answering` is the request it was handling, if any."""
        store = self.storage[i]
        self._touched.add(i)
        replicating = False
        for action in actions:
            match action:
                case Send(msg):
                    store.sync()
                    self._note_sent(i, msg)
                    self._transmit(msg, None if isinstance(msg, REQUESTS) else answering)
                    replicating = replicating or (isinstance(msg, FetchResponse) and bool(msg.entries))
                case Truncate(offset) if offset < self.seen_hw[i]:
                    self._fail(f"node {i} truncated to {offset} below its high watermark {self.seen_hw[i]}")
                case SaveSnapshot(snap):
                    self._check_snapshot(i, snap)
                    store.pending.append(action)
                case InstallSnapshot(snap):
                    self._check_snapshot(i, snap)
                    self.applied[i] = list(self._snapshot_entries(snap))  # the state machine is reset
                    store.pending.append(action)
                case _:
                    store.pending.append(action)
        node = self.nodes[i]
        if node is not None and node.high_watermark > self.seen_hw[i]:
            store.sync()  # the state machine is about to apply: what it applies must be durable
        if replicating and self.faulty and self.rng.random() < self.faults.crash_after_replicating:
            self._at(self.now_ms, functools.partial(self._fragile_crash, i))  # after this event's checks
            self._at(self.now_ms + self.rng.randrange(50, 400), functools.partial(self._restart, i))

    def _note_sent(self, i: int, msg: Message) -> None:
        if not (isinstance(msg, VoteRequest) and msg.pre_vote):  # a pre-vote only proposes a term
            self.sent_term[i] = max(self.sent_term[i], msg.term)
        until = self._backoff_until.get((i, msg.dst), 0)
        if isinstance(msg, REQUESTS) and self.now_ms < until:
            self._fail(f"node {i} sent {type(msg).__name__} to {msg.dst}, which it backs off from until {until}ms")

    def _transmit(self, msg: Message, answering: Message | None) -> None:
        """Send `msg` over the faulty network; `answering`: the request `msg` answers, if it is an answer."""
        f = self.faults
        if (msg.src, msg.dst) in self.blocked or (self.faulty and self.rng.random() < f.drop):
            self._request_fails(msg if answering is None else answering)
            return
        copies = 2 if self.faulty and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            delay = 1 + self.rng.randrange(f.delay_ms_max if self.faulty else 5)
            self._at(self.now_ms + delay, functools.partial(self._deliver, msg))

    def _deliver(self, msg: Message) -> None:
        node = self.nodes[msg.dst]
        if (msg.src, msg.dst) in self.blocked:
            self._request_fails(msg)
        elif node is None:
            self._request_fails(msg, refused=True)
        else:
            node.on_message(msg, self.now_ms)
            self._perform(msg.dst, node.drain(), msg if isinstance(msg, REQUESTS) else None)

    def _request_fails(self, msg: Message, refused: bool = False) -> None:
        """If `msg` is a request, its sender learns that it failed: soon when refused (its peer is down), else after
        the request timeout. Not if the sender restarted since."""
        sender = self.nodes[msg.src]
        if not isinstance(msg, REQUESTS) or sender is None or not self.faults.report_failures:
            return
        after_ms = 1 + self.rng.randrange(self.faults.delay_ms_max) if refused else REQUEST_TIMEOUT_MS
        self._at(self.now_ms + after_ms, functools.partial(self._report_failure, msg, sender))

    def _report_failure(self, request: Message, sender: RaftNode) -> None:
        i = request.src
        if self.nodes[i] is not sender:
            return  # it crashed since: the request died with it
        self.failed_requests += 1
        sender.on_request_failed(request, self.now_ms)
        self._backoff_until[(i, request.dst)] = self.now_ms + self.config.retry_backoff_ms
        self._perform(i, sender.drain())

    def _tick(self) -> None:
        for i in sorted(self.ids):
            node = self.nodes[i]
            if node is not None:
                node.tick(self.now_ms)
                self._perform(i, node.drain())
        self._at(self.now_ms + TICK_MS, self._tick)

    # -- faults, snapshots and clients -----------------------------------------------------------

    def _fault(self) -> None:
        if not self.faulty:
            return
        kind = self.rng.randrange(7)
        victim = self.rng.choice(sorted(self.ids))
        if kind == 0:
            self._crash(victim)
        elif kind == 1:
            self._restart(victim)
        elif kind == 2:
            self._partition()
        elif kind == 3 and len(self.ids) > 1:
            other = self.rng.choice(sorted(self.ids - {victim}))
            self.blocked.add((victim, other))  # one-way: victim cannot reach other
        elif kind == 4:
            self._resign()
        else:
            self.blocked.clear()
        self._at(self.now_ms + self.rng.randrange(1, self.faults.fault_every_ms), self._fault)

    def _crash(self, i: int) -> None:
        if self.nodes[i] is None:
            return
        self.nodes[i] = None
        self._backoff_until = {k: t for k, t in self._backoff_until.items() if k[0] != i}  # volatile, like timers
        pending = self.storage[i].pending
        self.storage[i].sync(keep=self.rng.randrange(len(pending) + 1))  # unsynced suffix lost

    def _fragile_crash(self, i: int) -> None:
        if self.faulty:
            self._crash(i)

    def _restart(self, i: int) -> None:
        if self.nodes[i] is not None:
            return
        node = self.nodes[i] = self._boot(i)
        self._touched.add(i)
        if node.term < self.sent_term[i]:
            self._fail(f"node {i} restarted in epoch {node.term} after sending in epoch {self.sent_term[i]}")
        self.seen_term[i] = node.term  # an unsynced term change that nobody heard of may be lost
        self.seen_hw[i] = node.high_watermark  # the HW is not persisted: it restarts at the snapshot

    def _resign(self) -> None:
        """A leader shuts down gracefully: it resigns, and half the time then crashes."""
        leaders = [n for n in self.nodes.values() if n is not None and n.role is Role.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        node.resign(self.now_ms)
        self._perform(node.node_id, node.drain())
        if self.rng.random() < 0.5:
            self._crash(node.node_id)

    def _partition(self) -> None:
        if len(self.ids) < 2:
            return
        ids = sorted(self.ids)
        self.rng.shuffle(ids)
        side = set(ids[: self.rng.randrange(1, len(ids))])
        self.blocked = {(a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)}

    def _snapshot(self) -> None:
        """A random live node snapshots a random part of its applied (committed) prefix."""
        i = self.rng.choice(sorted(self.ids))
        node = self.nodes[i]
        if node is not None and node.high_watermark > node.log.start_offset:
            end = self.rng.randint(node.log.start_offset + 1, node.high_watermark)
            if not node.snapshot(end, tuple(self.applied[i][:end])):
                self._fail(f"node {i} refused a snapshot at {end} within (log start, HW]")
            self._perform(i, node.drain())
        self._at(self.now_ms + self.rng.randrange(1, 2 * self.faults.snapshot_every_ms), self._snapshot)

    def _reconfigure(self) -> None:
        """Ask a leader to add or remove one voter (to go dynamic first); it may refuse."""
        leaders = [n for n in self.nodes.values() if n is not None and n.role is Role.LEADER]
        if leaders and self.faulty:
            node = self.rng.choice(leaders)
            result = self._change(node)
            self._perform(node.node_id, node.drain())
            if not isinstance(result, VoterChangeRefused):
                self.voter_changes += 1
                self.check_log_matching()
        self._at(self.now_ms + self.rng.randrange(1, 2 * self.faults.reconfigure_every_ms), self._reconfigure)

    def _change(self, node: RaftNode) -> int | VoterChangeRefused:
        if not node.history.dynamic:
            return node.enable_dynamic_voters(VotersRecord.of(node.voters), self.now_ms)
        outsiders = sorted(self.ids - node.voters)
        if outsiders and (len(node.voters) < 2 or self.rng.random() < 0.5):
            return node.add_voter(VoterInfo(self.rng.choice(outsiders)), self.now_ms)
        return node.remove_voter(self.rng.choice(sorted(node.voters)), self.now_ms)

    def _client(self) -> None:
        leaders = [n for n in self.nodes.values() if n is not None and n.role is Role.LEADER]
        if leaders:
            node = self.rng.choice(leaders)
            self.proposed += 1
            result = node.propose([f"v{self.proposed}"], self.now_ms)
            assert not isinstance(result, NotLeader)
            self._perform(node.node_id, node.drain())
            self._maybe_crash_soon(node.node_id)
        self._at(self.now_ms + self.rng.randrange(5, 60), self._client)

    def _maybe_crash_soon(self, i: int) -> None:
        """Figure 8 needs leaders that die after replicating to a minority, then come back."""
        if self.faulty and self.rng.random() < self.faults.leader_crash:
            crash_ms = self.now_ms + self.rng.randrange(self.faults.delay_ms_max)
            self._at(crash_ms, functools.partial(self._fragile_crash, i))
            self._at(self.now_ms + self.rng.randrange(50, 400), functools.partial(self._restart, i))

    def heal(self) -> None:
        """Stop every fault: restart crashed nodes, reconnect the network, deliver reliably."""
        self.faulty = False
        self.blocked.clear()
        for i in sorted(self.ids):
            self._restart(i)

    # -- invariants ----------------------------------------------------------------------------

    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"seed={self.seed} t={self.now_ms}ms: {what}")

    def check(self) -> None:
        """Invariants checked after every event, on every node the event touched (no other changed)."""
        for i in sorted(self._touched):
            node = self.nodes[i]
            if node is not None:
                self._check_node(i, node)
        self._touched.clear()

    def _check_node(self, i: int, node: RaftNode) -> None:
        if node.term < self.seen_term[i]:
            self._fail(f"node {i} epoch went back from {self.seen_term[i]} to {node.term}")
        self.seen_term[i] = node.term
        if node.is_observer and node.role is not Role.FOLLOWER:
            self._fail(f"observer {i} became {node.role.value}")
        self._check_voter_history(i, node)
        if node.role is Role.LEADER and node.term not in self.leaders:
            self.leaders[node.term] = i
            self._maybe_crash_soon(i)
        if node.role is Role.LEADER and self.leaders[node.term] != i:
            self._fail(f"two leaders in epoch {node.term}: {self.leaders[node.term]} and {i}")
        hw = node.high_watermark
        if hw < self.seen_hw[i]:
            self._fail(f"node {i} high watermark went back from {self.seen_hw[i]} to {hw}")
        if not node.log.start_offset <= hw <= node.log.end_offset:
            self._fail(f"node {i} high watermark {hw} outside its log [{node.log.start_offset}, {node.log.end_offset}]")
        self._apply(i, node, hw)
        self.seen_hw[i] = hw

    def _check_voter_history(self, i: int, node: RaftNode) -> None:
        """Consecutive voter sets differ by one voter; a leader has at most one uncommitted change."""
        records = node.history.records()
        sets = [node.history.at(node.log.start_offset)] + [r for _, r in records]
        for before, after in itertools.pairwise(sets):
            if before is not None and after is not None and len(before.ids ^ after.ids) > 1:
                self._fail(f"node {i} log changes voters from {sorted(before.ids)} to {sorted(after.ids)} at once")
        if node.role is Role.LEADER:
            pending = [o for o, _ in records if o not in self.committed]  # a restarted leader's HW lags the truth
            if len(pending) > 1:
                self._fail(f"leader {i} has {len(pending)} uncommitted voter changes at offsets {pending}")

    def check_log_matching(self) -> None:
        """Log Matching (§5.3): where two live logs hold an entry of the same epoch at an offset, they agree
        on every offset up to it that both still hold."""
        live = [(i, n) for i, n in sorted(self.nodes.items()) if n is not None]
        for a, (i, x) in enumerate(live):
            for j, y in live[a + 1:]:
                low, high = max(x.log.start_offset, y.log.start_offset), min(x.log.end_offset, y.log.end_offset)
                top = next((o for o in range(high - 1, low - 1, -1)
                            if x.log.entry(o).epoch == y.log.entry(o).epoch), None)
                if top is None:
                    continue
                for o in range(low, top + 1):
                    if x.log.entry(o) != y.log.entry(o):
                        self._fail(f"nodes {i} and {j} agree on the epoch at {top} but differ at {o}")

    def _apply(self, i: int, node: RaftNode, hw: int) -> None:
        """Feed the state machine the newly committed entries, checking each against the record."""
        applied = self.applied[i]
        if len(applied) > hw:
            self._fail(f"node {i} applied {len(applied)} entries, beyond its high watermark {hw}")
        for offset in range(len(applied), hw):
            entry = node.log.entry(offset)
            self._record(i, offset, entry)
            applied.append(entry)

    def _record(self, i: int, offset: int, entry: Entry) -> None:
        if self.committed.setdefault(offset, entry) != entry:
            self._fail(f"node {i} committed {entry} at {offset}, but {self.committed[offset]} was committed")

    def _check_snapshot(self, i: int, snap: Snapshot) -> None:
        data = self._snapshot_entries(snap)
        if len(data) != snap.end_offset or (data[-1].epoch if data else 0) != snap.last_epoch:
            self._fail(f"node {i} snapshot {snap.end_offset}/{snap.last_epoch} does not match its data")
        for offset, entry in enumerate(data):
            self._record(i, offset, entry)

    def check_prefixes(self) -> None:
        """Every live node's state machine, snapshot and log agree with the committed record."""
        for i, node in self.nodes.items():
            if node is None:
                continue
            for offset, entry in enumerate(self.applied[i]):
                if entry != self.committed.get(offset):
                    self._fail(f"node {i} applied {entry} at {offset}, not the committed entry")
            for offset in range(node.log.start_offset, node.high_watermark):
                if node.log.entry(offset) != self.committed[offset]:
                    self._fail(f"node {i} changed committed offset {offset}")
            if node.latest_snapshot is not None:
                self._check_snapshot(i, node.latest_snapshot)

    # -- running -------------------------------------------------------------------------------

    def run_until(self, end_ms: int, stop: Callable[[], bool] | None = None) -> bool:
        """Run events up to `end_ms`; True if `stop` became true first."""
        while self._heap and self._heap[0][0] <= end_ms:
            when, _, fn = heapq.heappop(self._heap)
            self.now_ms = when
            fn()
            self.check()
            if stop is not None and stop():
                return True
        self.now_ms = end_ms
        return False

    def _start(self) -> None:
        """Schedule the first tick, client proposal, fault, snapshot and voter change."""
        self._at(0, self._tick)
        self._at(1, self._client)
        if self.faults.fault_every_ms:
            self._at(self.rng.randrange(1, self.faults.fault_every_ms), self._fault)
        if self.faults.snapshot_every_ms:
            self._at(self.rng.randrange(1, self.faults.snapshot_every_ms), self._snapshot)
        if self.faults.reconfigure_every_ms:
            self._at(self.rng.randrange(1, self.faults.reconfigure_every_ms), self._reconfigure)

    def run(self, fault_ms: int, liveness_ms: int) -> None:
        """Faults for `fault_ms`, then heal: within `liveness_ms` a new proposal must commit and reach every node."""
        self._start()
        self.run_until(fault_ms)
        self.check_prefixes()
        self.check_log_matching()
        self.heal()
        target = self.proposed
        done = self.run_until(self.now_ms + liveness_ms, lambda: self._committed_everywhere_after(target))
        self.check_prefixes()
        self.check_log_matching()
        if not done:
            self._fail(f"liveness: no proposal after v{target} applied on every node within {liveness_ms}ms of healing")

    def elect(self, within_ms: int) -> None:
        """Run from the start, without healing, until some node leads; fail if none did within `within_ms`."""
        self._start()
        if not self.run_until(within_ms, lambda: bool(self.leaders)):
            self._fail(f"liveness: no leader within {within_ms}ms")
        self.check_prefixes()

    def _committed_everywhere_after(self, target: int) -> bool:
        """A proposal made after `target` is committed, and every node (observers too) has applied it."""
        last = len(self.committed) - 1
        value = self.committed[last].value if last >= 0 else None
        after = isinstance(value, str) and int(value[1:]) > target
        return after and all(len(applied) > last for applied in self.applied.values())
