"""A seeded, deterministic simulator of a Raft quorum built from `moldau.raft` nodes.

One `random.Random(seed)` drives everything: network delays, drops, duplicates, partitions,
crashes and client proposals. Events run from a heap ordered by (virtual time, sequence).

Durability rule (fsync model): a node's actions are performed in order and a persist action is
durable (fsynced) once performed, so it survives any later crash. A crash happens between events,
so it loses only volatile state: role, leader, high watermark and timers; messages that arrive
while it is down are lost (older ones may still arrive after its restart). A restarted node
reloads term, vote and log from its `Storage`.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.raft import (
    Action,
    Append,
    Config,
    Entry,
    Message,
    NotLeader,
    PersistedState,
    RaftNode,
    Role,
    Send,
    SetTermVote,
    Truncate,
)

TICK_MS = 10


class InvariantViolation(AssertionError):
    """An invariant broke; the message names it."""


@dataclass
class Faults:
    """Per-seed network and node fault rates."""

    drop: float = 0.05
    duplicate: float = 0.05
    delay_ms_max: int = 30
    fault_every_ms: int = 200


@dataclass
class Storage:
    """One node's durable state."""

    state: PersistedState = field(default_factory=PersistedState)


class Simulation:
    """A quorum of `n` voters under faults; `run` raises InvariantViolation on a broken invariant."""

    def __init__(self, seed: int, n: int, faults: Faults | None = None) -> None:
        self.seed, self.rng = seed, random.Random(seed)
        self.ids = frozenset(range(1, n + 1))
        self.faults = faults or Faults()
        self.config = Config()
        self.now_ms = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self.storage = {i: Storage() for i in self.ids}
        self.nodes: dict[int, RaftNode | None] = {i: self._boot(i) for i in self.ids}
        self.blocked: set[tuple[int, int]] = set()  # (src, dst) pairs that drop every message
        self.faulty = True
        self.committed: dict[int, Entry] = {}
        self.leaders: dict[int, int] = {}
        self.seen_term = {i: 0 for i in self.ids}
        self.seen_hw = {i: 0 for i in self.ids}
        self.proposed = 0

    # -- plumbing ------------------------------------------------------------------------------

    def _boot(self, i: int) -> RaftNode:
        st = self.storage[i].state
        copy = PersistedState(st.term, st.voted_for, list(st.entries))
        return RaftNode(i, self.ids, copy, random.Random(self.rng.random()), self.now_ms, self.config)

    def _at(self, when_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when_ms, self._seq, fn))

    def _perform(self, i: int, actions: list[Action]) -> None:
        store = self.storage[i]
        for action in actions:
            match action:
                case SetTermVote(term, vote):
                    store.state.term, store.state.voted_for = term, vote
                case Append(offset, entries):
                    assert offset == len(store.state.entries)
                    store.state.entries.extend(entries)
                case Truncate(offset):
                    if offset < self.seen_hw[i]:
                        self._fail(f"node {i} truncated to {offset} below its high watermark {self.seen_hw[i]}")
                    del store.state.entries[offset:]
                case Send(msg):
                    self._transmit(msg)

    def _transmit(self, msg: Message) -> None:
        f = self.faults
        if (msg.src, msg.dst) in self.blocked or (self.faulty and self.rng.random() < f.drop):
            return
        copies = 2 if self.faulty and self.rng.random() < f.duplicate else 1
        for _ in range(copies):
            delay = 1 + self.rng.randrange(f.delay_ms_max if self.faulty else 5)
            self._at(self.now_ms + delay, functools.partial(self._deliver, msg))

    def _deliver(self, msg: Message) -> None:
        node = self.nodes[msg.dst]
        if node is not None and (msg.src, msg.dst) not in self.blocked:
            node.on_message(msg, self.now_ms)
            self._perform(msg.dst, node.drain())

    def _tick(self) -> None:
        for i in sorted(self.ids):
            node = self.nodes[i]
            if node is not None:
                node.tick(self.now_ms)
                self._perform(i, node.drain())
        self._at(self.now_ms + TICK_MS, self._tick)

    # -- faults and clients --------------------------------------------------------------------

    def _fault(self) -> None:
        if not self.faulty:
            return
        kind = self.rng.randrange(6)
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
        else:
            self.blocked.clear()
        self._at(self.now_ms + self.rng.randrange(1, self.faults.fault_every_ms), self._fault)

    def _crash(self, i: int) -> None:
        if self.nodes[i] is None:
            return
        self.nodes[i] = None

    def _restart(self, i: int) -> None:
        if self.nodes[i] is None:
            self.nodes[i] = self._boot(i)
            self.seen_hw[i] = 0  # the high watermark is not persisted: it restarts at 0

    def _partition(self) -> None:
        if len(self.ids) < 2:
            return
        ids = sorted(self.ids)
        self.rng.shuffle(ids)
        side = set(ids[: self.rng.randrange(1, len(ids))])
        self.blocked = {(a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)}

    def _client(self) -> None:
        leaders = [n for n in self.nodes.values() if n is not None and n.role is Role.LEADER]
        if leaders:
            node = self.rng.choice(leaders)
            self.proposed += 1
            result = node.propose([f"v{self.proposed}"], self.now_ms)
            assert not isinstance(result, NotLeader)
            self._perform(node.node_id, node.drain())
        self._at(self.now_ms + self.rng.randrange(5, 60), self._client)

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
        """Invariants checked after every event."""
        for i, node in self.nodes.items():
            if node is not None:
                self._check_node(i, node)

    def _check_node(self, i: int, node: RaftNode) -> None:
        if node.term < self.seen_term[i]:
            self._fail(f"node {i} epoch went back from {self.seen_term[i]} to {node.term}")
        self.seen_term[i] = node.term
        if node.role is Role.LEADER and self.leaders.setdefault(node.term, i) != i:
            self._fail(f"two leaders in epoch {node.term}: {self.leaders[node.term]} and {i}")
        hw = node.high_watermark
        if hw < self.seen_hw[i]:
            self._fail(f"node {i} high watermark went back from {self.seen_hw[i]} to {hw}")
        if hw > node.log.end_offset:
            self._fail(f"node {i} high watermark {hw} beyond its log end {node.log.end_offset}")
        for offset in range(self.seen_hw[i], hw):
            entry = node.log.entries[offset]
            if self.committed.setdefault(offset, entry) != entry:
                self._fail(f"node {i} committed {entry} at {offset}, but {self.committed[offset]} was committed")
        self.seen_hw[i] = hw

    def check_prefixes(self) -> None:
        """Every live node's log agrees with the committed record up to its high watermark."""
        for i, node in self.nodes.items():
            if node is None:
                continue
            for offset in range(node.high_watermark):
                if node.log.entries[offset] != self.committed[offset]:
                    self._fail(f"node {i} changed committed offset {offset}")

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

    def run(self, fault_ms: int, liveness_ms: int) -> None:
        """Faults for `fault_ms`, then heal: within `liveness_ms` a new proposal must commit."""
        self._at(0, self._tick)
        self._at(1, self._client)
        self._at(self.rng.randrange(1, self.faults.fault_every_ms), self._fault)
        self.run_until(fault_ms)
        self.check_prefixes()
        self.heal()
        target = self.proposed
        committed = self.run_until(self.now_ms + liveness_ms, lambda: self._committed_after(target))
        self.check_prefixes()
        if not committed:
            self._fail(f"liveness: no proposal after v{target} committed within {liveness_ms}ms of healing")

    def _committed_after(self, target: int) -> bool:
        last = len(self.committed) - 1
        value = self.committed[last].value if last >= 0 else None
        return isinstance(value, str) and int(value[1:]) > target
