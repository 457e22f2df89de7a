"""A seeded, deterministic simulation of one partition replicated by three brokers.

The rules under test are the real ones: the leader's `LeaderState` (follower positions, high watermark, ISR
shrink and expansion) and `diverging_epoch`, and the follower's `follower_rules` (divergence truncation,
out-of-range, high watermark and log start after a fetch). What surrounds them is modelled, as the replica
manager, the fetcher and the controller drive them: fetches and their answers, AlterPartition, metadata images
naming leaders, producers with acks=all, logs in memory with the real leader epoch cache. The leader handles
AlterPartition answers by the real `proposal_outcome`: a proposal whose outcome is unknown is sent again, as it
was made (with its members' broker epochs, KIP-903), and stays pending meanwhile.

One `random.Random(seed)` drives everything: message delays (so reordering), drops, isolated brokers, crashes
that lose each log's unflushed tail (a torn tail), restarts, and leadership moves by the modelled controller,
among them an ISR expansion that also makes the added member leader, as a reassignment completes (the old leader
is answered NEW_LEADER_ELECTED and learns of its demotion only from the next image).
Unclean election is off: the controller only elects members of the ISR, fences a crashed broker at once
(dropping it from the ISR unless it is the last member), and the simulation never crashes the last live ISR
member, which is the condition under which Kafka promises that acknowledged records survive.

Checked after every event:
- no acknowledged record is lost, and the commit point (the highest high watermark any broker has reached)
  never goes back: every live member of the committed ISR holds every record below it;
- replicas agree on their committed prefix: below its high watermark, every broker holds exactly those records;
- a leader's high watermark never goes back while it leads;
- a truncating follower removes only records its leader does not have (its divergent suffix);
and at the end, with faults healed, every broker holds the same log, fully replicated, in the ISR.
"""

from __future__ import annotations

import functools
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.protocol.errors import ErrorCode
from moldau.replication import follower_rules
from moldau.replication.follower_rules import StartOverAt, TruncateTo
from moldau.replication.leader_state import LeaderState, ProposalOutcome, diverging_epoch, proposal_outcome
from moldau.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache
from tests.sim.simulator import InvariantViolation

TICK_MS = 10
REPLICAS = (1, 2, 3)
MIN_ISR = 2
LAG_MAX_MS = 300
FETCH_TIMEOUT_MS = 200
ALTER_TIMEOUT_MS = 300
CONTROLLER = 0


@dataclass
class Faults:
    drop: float = 0.05
    delay_ms_max: int = 30
    fault_every_ms: int = 150
    crash: float = 0.3  # of a fault: crash a broker (it restarts later)
    isolate: float = 0.3  # of a fault: cut a broker off the network for a while
    move_leader: float = 0.3  # of a fault: the controller moves leadership to another ISR member
    # Of the ISR expansions the controller commits: the member added also takes over as leader in the same change,
    # as when a reassignment completes (the old leader is answered NEW_LEADER_ELECTED).
    hand_over: float = 0.3
    produce_every_ms: int = 20


@dataclass(frozen=True, slots=True)
class Batch:
    base: int
    epoch: int
    values: tuple[str, ...]

    @property
    def next_offset(self) -> int:
        return self.base + len(self.values)


class MemoryEpochs(LeaderEpochCache):
    """The real leader epoch cache, kept in memory: its rules without its checkpoint file."""

    def __init__(self, entries: tuple[EpochEntry, ...] = ()) -> None:
        super().__init__("memory", entries)

    def _replace(self, entries: list[EpochEntry], write: bool = True, owed: bool = True) -> None:
        self._entries = entries


class MemoryLog:
    """A partition log in memory, with PartitionLog's truncation semantics (a straddling batch goes whole).

    The log starts at offset 0 and keeps it (nothing here deletes records from the front), so `values[o]` is the
    (epoch, value) of offset o. `version` changes with every change, so checks can skip unchanged logs.
    """

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.values: list[tuple[int, str]] = []
        self.epochs = MemoryEpochs()
        self.high_watermark = 0
        self.log_start_offset = 0
        self.flushed = 0  # batches durable on disk
        self.checkpointed_hw = 0
        self.version = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.values)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch, self.log_end_offset)

    def append(self, batch: Batch) -> None:
        assert batch.base == self.log_end_offset, (batch, self.log_end_offset)
        self.batches.append(batch)
        self.values.extend((batch.epoch, v) for v in batch.values)
        self.epochs.assign(batch.epoch, batch.base)
        self.version += 1

    def read(self, offset: int, max_batches: int) -> list[Batch]:
        first = next((i for i in range(len(self.batches) - 1, -1, -1) if self.batches[i].base <= offset), 0)
        return [b for b in self.batches[first:first + max_batches + 1] if b.next_offset > offset][:max_batches]

    def truncate_to(self, offset: int) -> None:
        self._keep(sum(1 for b in self.batches if b.next_offset <= offset))
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)

    def crash(self, keep_batches: int) -> None:
        """What a restart finds: the flushed batches and some of the rest (a torn tail loses whole batches, as
        recovery cuts a partial one), the checkpointed high watermark, the epochs cut to the log end."""
        self._keep(keep_batches)
        self.flushed = len(self.batches)
        self.high_watermark = min(self.checkpointed_hw, self.log_end_offset)
        self.epochs.truncate_from_end(self.log_end_offset)

    def _keep(self, batches: int) -> None:
        del self.batches[batches:]
        del self.values[self.batches[-1].next_offset if self.batches else 0:]
        self.flushed = min(self.flushed, len(self.batches))
        self.version += 1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What the controller has committed for the partition; `version` orders the images brokers receive."""

    version: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]


@dataclass
class Broker:
    node_id: int
    log: MemoryLog = field(default_factory=MemoryLog)
    up: bool = True
    incarnation: int = 0
    image: PartitionState | None = None
    leader_state: LeaderState | None = None
    leader_epoch: int = -1
    fetch_id: int = 0  # the outstanding fetch, 0 when none
    fetch_sent_ms: int = 0
    retry_at_ms: int = 0
    pending_acks: list[tuple[Batch, int]] = field(default_factory=list)  # (batch, leader epoch appended in)
    seen_hw: int = 0
    proposed_ms: int = 0  # when the pending ISR proposal last went out
    # What it was made at, sent with it each time: (leader epoch, partition epoch, its members' broker epochs).
    proposed_at: tuple[int, int, tuple[int, ...]] = (-1, -1, ())
    led_with: LeaderState | None = None  # the leadership `seen_hw` was seen in


@dataclass(frozen=True, slots=True)
class FetchAnswer:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    batches: tuple[Batch, ...] = ()
    diverging: tuple[int, int] | None = None
    leader_values: tuple[tuple[int, str], ...] | None = None  # for the checks only: the leader's log then


class ReplicationSimulation:
    def __init__(self, seed: int, faults: Faults | None = None) -> None:
        self.seed, self.rng = seed, random.Random(seed)
        self.faults = faults or Faults()
        self.now_ms = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self.brokers = {n: Broker(n) for n in REPLICAS}
        self.fenced: set[int] = set()
        self.isolated: set[int] = set()
        self.state = PartitionState(1, REPLICAS[0], 0, 0, REPLICAS)
        self.acked: dict[int, tuple[int, str]] = {}
        self.produced = 0
        self.hand_overs = 0  # expansions that also made the added member leader
        self.producing_until_ms = 1 << 62
        self.faulty = True
        self._checked: dict[int, tuple[int, int, int, int, bool]] = {}
        self.committed: list[tuple[int, str]] = []  # the records below the highest high watermark reached
        for broker in self.brokers.values():
            self._publish_to(broker)

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _fail(self, what: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at {self.now_ms} ms: {what}")

    def _at(self, when_ms: int, fn: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when_ms, self._seq, fn))

    def _send(self, src: int, dst: int, fn: Callable[[], None]) -> None:
        """Deliver `fn` at `dst` after a random delay, unless dropped; brokers cut off hear and say nothing."""
        if self.faulty and (src in self.isolated or dst in self.isolated or self.rng.random() < self.faults.drop):
            return
        delay = 1 + self.rng.randrange(self.faults.delay_ms_max if self.faulty else 5)
        self._at(self.now_ms + delay, fn)

    def run(self, fault_ms: int, liveness_ms: int) -> None:
        self._at(0, self._tick)
        self._at(self.faults.fault_every_ms, self._fault)
        self._at(self.faults.produce_every_ms, self._produce)
        self._run_until(fault_ms)
        self._heal()
        self.producing_until_ms = fault_ms + liveness_ms // 2  # then everything must settle
        self._run_until(fault_ms + liveness_ms)
        self._check_converged()

    def _run_until(self, end_ms: int) -> None:
        while self._heap and self._heap[0][0] <= end_ms:
            self.now_ms, _, fn = heapq.heappop(self._heap)
            fn()
            self._check()

    # -- the controller -------------------------------------------------------------------------------------------

    def _commit(self, leader: int, isr: tuple[int, ...], new_leader_epoch: bool) -> None:
        s = self.state
        self.state = PartitionState(s.version + 1, leader, s.leader_epoch + (1 if new_leader_epoch else 0),
                                    s.partition_epoch + 1, tuple(r for r in REPLICAS if r in isr))
        for broker in self.brokers.values():
            self._send(CONTROLLER, broker.node_id, functools.partial(self._publish_to, broker))

    def _elect(self, isr: tuple[int, ...], exclude: int) -> int:
        candidates = [r for r in isr if r != exclude and r not in self.fenced]
        return self.rng.choice(candidates) if candidates else -1

    def _fence(self, node_id: int) -> None:
        self.fenced.add(node_id)
        s = self.state
        isr = tuple(r for r in s.isr if r != node_id) or s.isr  # the last member stays (no unclean election)
        if s.leader == node_id:
            self._commit(self._elect(isr, node_id), isr, new_leader_epoch=True)
        elif isr != s.isr:
            self._commit(s.leader, isr, new_leader_epoch=False)

    def _unfence(self, node_id: int) -> None:
        self.fenced.discard(node_id)
        s = self.state
        if s.leader == -1 and node_id in s.isr:
            self._commit(node_id, s.isr, new_leader_epoch=True)

    def _alter_partition(self, leader: int, leader_epoch: int, partition_epoch: int, isr: tuple[int, ...],
                         member_epochs: tuple[int, ...], incarnation: int) -> None:
        s = self.state
        if leader_epoch != s.leader_epoch or partition_epoch != s.partition_epoch:
            error = ErrorCode.fenced_leader_epoch if leader_epoch != s.leader_epoch else \
                ErrorCode.invalid_update_version
        elif any(r in self.fenced and r not in s.isr for r in isr):
            error = ErrorCode.ineligible_replica  # KIP-841: a fenced broker may not join the ISR
        elif any(e != -1 and e != self.brokers[r].incarnation for r, e in zip(isr, member_epochs, strict=True)):
            error = ErrorCode.ineligible_replica  # KIP-903: it restarted since the fetch it was judged by
        else:
            added = [r for r in isr if r not in s.isr]
            if added and self.brokers[added[0]].up and self.rng.random() < self.faults.hand_over:
                error = ErrorCode.new_leader_elected
                self.hand_overs += 1
                self._commit(added[0], isr, new_leader_epoch=True)
            else:
                error = ErrorCode.none
                self._commit(s.leader, isr, new_leader_epoch=False)
        answer = functools.partial(self._on_alter_answer, self.brokers[leader], incarnation, error, self.state)
        self._send(CONTROLLER, leader, answer)

    # -- a broker: following the image ----------------------------------------------------------------------------

    def _publish_to(self, broker: Broker) -> None:
        """A metadata image reaches a broker; older ones than it has are ignored, as the log is applied in order."""
        state = self.state
        if not broker.up or (broker.image is not None and broker.image.version >= state.version):
            return
        broker.image = state
        new_epoch = state.leader_epoch != broker.leader_epoch
        if state.leader == broker.node_id:
            if new_epoch or broker.leader_state is None:
                broker.leader_epoch = state.leader_epoch
                self._become_leader(broker)
            else:
                broker.leader_state.on_committed(REPLICAS, state.isr, state.partition_epoch, self.now_ms)
                self._advance_hw(broker)
            return
        if broker.leader_state is not None or new_epoch:
            broker.leader_epoch = state.leader_epoch
            self._stop_leading(broker)
            broker.fetch_id = 0  # a fetch towards the old leader is forgotten (the fetcher re-follows)

    def _become_leader(self, broker: Broker) -> None:
        log = broker.log
        log.epochs.assign(broker.leader_epoch, log.log_end_offset)
        assert broker.image is not None
        broker.leader_state = LeaderState(broker.node_id, REPLICAS, broker.image.isr, broker.leader_epoch,
                                          broker.image.partition_epoch, log.log_end_offset, LAG_MAX_MS,
                                          self.now_ms)
        broker.fetch_id = 0
        self._advance_hw(broker)

    def _stop_leading(self, broker: Broker) -> None:
        broker.leader_state = None
        broker.pending_acks.clear()  # answered NOT_LEADER_OR_FOLLOWER: not acknowledged

    # -- a broker: leading --------------------------------------------------------------------------------------

    def _advance_hw(self, broker: Broker) -> None:
        state = broker.leader_state
        if state is None:
            return
        hw = state.advanced_high_watermark(broker.log.log_end_offset, broker.log.high_watermark)
        if hw is not None:
            broker.log.high_watermark = hw
        self._release_acks(broker)

    def _release_acks(self, broker: Broker) -> None:
        state = broker.leader_state
        assert state is not None
        keep = []
        for batch, epoch in broker.pending_acks:
            if batch.next_offset > broker.log.high_watermark:
                keep.append((batch, epoch))
            elif len(state.isr) >= MIN_ISR:
                for i, value in enumerate(batch.values):
                    offset = batch.base + i
                    if self.acked.get(offset, (batch.epoch, value)) != (batch.epoch, value):
                        self._fail(f"offset {offset} acknowledged twice: {self.acked[offset]} then {value}")
                    self.acked[offset] = (batch.epoch, value)
        broker.pending_acks = keep

    def _produce(self) -> None:
        if self.now_ms >= self.producing_until_ms:
            return
        self._at(self.now_ms + self.faults.produce_every_ms, self._produce)
        leader = self.state.leader
        if leader < 0:
            return
        self.produced += 1
        values = tuple(f"v{self.produced}.{i}" for i in range(self.rng.randrange(1, 4)))
        self._send(CONTROLLER, leader, functools.partial(self._on_produce, self.brokers[leader], values))

    def _on_produce(self, broker: Broker, values: tuple[str, ...]) -> None:
        state = broker.leader_state
        if not broker.up or state is None or len(state.isr) < MIN_ISR:
            return  # NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS
        batch = Batch(broker.log.log_end_offset, broker.leader_epoch, values)
        broker.log.append(batch)
        broker.pending_acks.append((batch, broker.leader_epoch))
        self._advance_hw(broker)

    def _on_fetch(self, leader: Broker, follower_id: int, incarnation: int, fetch_id: int, leader_epoch: int,
                  fetch_offset: int, last_fetched_epoch: int) -> None:
        if not leader.up:
            return
        answer = self._answer_fetch(leader, follower_id, incarnation, leader_epoch, fetch_offset,
                                    last_fetched_epoch)
        follower = self.brokers[follower_id]
        self._send(leader.node_id, follower_id,
                   functools.partial(self._on_fetch_answer, follower, incarnation, fetch_id, leader.node_id, answer))

    def _answer_fetch(self, leader: Broker, follower_id: int, incarnation: int, leader_epoch: int, fetch_offset: int,
                      last_fetched_epoch: int) -> FetchAnswer:
        """The Fetch handler's replica path (moldau.server.handlers.fetch) over the in-memory log."""
        state, log = leader.leader_state, leader.log
        if state is None:
            return FetchAnswer(ErrorCode.not_leader_or_follower)
        if leader_epoch != leader.leader_epoch:
            return FetchAnswer(ErrorCode.fenced_leader_epoch if leader_epoch < leader.leader_epoch
                               else ErrorCode.unknown_leader_epoch)
        diverging = diverging_epoch(log, last_fetched_epoch, fetch_offset)
        if diverging is not None:
            return FetchAnswer(ErrorCode.none, log.high_watermark, log.log_start_offset, (), diverging,
                               tuple(log.values))
        end = log.log_end_offset
        # The incarnation stands for the broker epoch: a restart registers the broker again (KIP-903).
        state.on_follower_fetch(follower_id, min(fetch_offset, end), end, self.now_ms, incarnation)
        self._advance_hw(leader)
        expanded = state.expanded_isr(follower_id, log.high_watermark, self.now_ms)
        if expanded is not None:
            self._propose(leader, expanded)
        if fetch_offset > end or fetch_offset < log.log_start_offset:
            return FetchAnswer(ErrorCode.offset_out_of_range, log.high_watermark, log.log_start_offset)
        return FetchAnswer(ErrorCode.none, log.high_watermark, log.log_start_offset,
                           tuple(log.read(fetch_offset, self.rng.randrange(1, 5))))

    def _propose(self, leader: Broker, isr: tuple[int, ...]) -> None:
        state = leader.leader_state
        assert state is not None
        state.propose(isr)
        leader.proposed_at = (state.leader_epoch, state.partition_epoch, state.member_epochs(isr))
        self._advance_hw(leader)
        self._send_proposal(leader)

    def _send_proposal(self, leader: Broker) -> None:
        """Send the pending proposal, made at `proposed_at`; sent again as long as its outcome is unknown."""
        state = leader.leader_state
        assert state is not None and state.pending_isr is not None
        leader.proposed_ms = self.now_ms
        leader_epoch, partition_epoch, member_epochs = leader.proposed_at
        self._send(leader.node_id, CONTROLLER, functools.partial(
            self._alter_partition, leader.node_id, leader_epoch, partition_epoch, state.pending_isr, member_epochs,
            leader.incarnation))

    def _on_alter_answer(self, leader: Broker, incarnation: int, error: ErrorCode, committed: PartitionState) -> None:
        """As the replica manager does (`proposal_outcome`): only a refusal drops the pending proposal."""
        state = leader.leader_state
        if not leader.up or leader.incarnation != incarnation or state is None or state.pending_isr is None:
            return
        outcome = proposal_outcome(error, committed.leader_epoch if error == ErrorCode.none else -1,
                                   state.leader_epoch)
        if outcome is ProposalOutcome.COMMITTED:
            state.on_proposal_committed(committed.isr, committed.partition_epoch, self.now_ms)
            self._advance_hw(leader)
        elif outcome is ProposalOutcome.REFUSED:
            state.on_proposal_refused(self.now_ms)
            self._advance_hw(leader)
        elif outcome is ProposalOutcome.RETRY:
            self._send_proposal(leader)

    # -- a broker: following ------------------------------------------------------------------------------------

    def _fetch(self, broker: Broker) -> None:
        image = broker.image
        if image is None or image.leader in (-1, broker.node_id) or broker.node_id in self.fenced:
            return
        if broker.fetch_id and self.now_ms - broker.fetch_sent_ms < FETCH_TIMEOUT_MS:
            return
        if self.now_ms < broker.retry_at_ms:
            return
        self._seq += 1
        broker.fetch_id, broker.fetch_sent_ms = self._seq, self.now_ms
        log = broker.log
        leader = self.brokers[image.leader]
        self._send(broker.node_id, leader.node_id, functools.partial(
            self._on_fetch, leader, broker.node_id, broker.incarnation, broker.fetch_id, broker.leader_epoch,
            log.log_end_offset, log.epochs.latest_epoch))

    def _on_fetch_answer(self, follower: Broker, incarnation: int, fetch_id: int, leader_id: int,
                         answer: FetchAnswer) -> None:
        if not follower.up or follower.incarnation != incarnation or follower.fetch_id != fetch_id:
            return  # a fetch of an earlier life, or one given up on or re-followed since
        follower.fetch_id = 0
        if follower.leader_state is not None or follower.image is None or follower.image.leader != leader_id:
            return
        delay = self._apply_answer(follower, answer)
        follower.retry_at_ms = self.now_ms + delay

    def _apply_answer(self, follower: Broker, answer: FetchAnswer) -> int:
        """ReplicaManager.on_fetched over the in-memory log; the delay before the next fetch."""
        log = follower.log
        if answer.error == ErrorCode.offset_out_of_range:
            action = follower_rules.out_of_range_action(log, answer.log_start_offset, answer.high_watermark)
            self._execute(follower, action, None)
            return 0 if action is not None else 100
        if answer.error != ErrorCode.none:
            return 50
        if answer.diverging is not None:
            epoch, end = answer.diverging
            action = follower_rules.divergence_truncation(log, epoch, end)
            before = (log.log_end_offset, log.epochs.entries)
            self._execute(follower, action, answer.leader_values)
            return 0 if (log.log_end_offset, log.epochs.entries) != before else 100
        if answer.batches:
            if answer.batches[0].base < log.log_end_offset:
                return 100  # append_as_follower refuses offsets that go back (logged, then retried)
            for batch in answer.batches:
                log.append(batch)
        log.high_watermark = follower_rules.high_watermark_after_fetch(log, answer.high_watermark)
        new_start = follower_rules.log_start_after_fetch(log, answer.log_start_offset)
        if new_start is not None:
            self._fail(f"broker {follower.node_id}: the log start moved without retention or deletion")
        return 0

    def _execute(self, follower: Broker, action: TruncateTo | StartOverAt | None,
                 leader_values: tuple[tuple[int, str], ...] | None) -> None:
        log = follower.log
        if isinstance(action, StartOverAt):
            self._fail(f"broker {follower.node_id} told to start over at {action.offset}, but no log start moved")
        elif isinstance(action, TruncateTo):
            before = list(log.values)
            log.truncate_to(action.offset)
            if leader_values is not None:
                kept_by_leader = [o for o in range(log.log_end_offset, len(before))
                                  if o < len(leader_values) and leader_values[o] == before[o]]
                if kept_by_leader:
                    self._fail(f"broker {follower.node_id} truncated to {log.log_end_offset}, removing offsets "
                               f"{kept_by_leader} its leader has too (only the divergent suffix may go)")

    # -- time and faults ----------------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._at(self.now_ms + TICK_MS, self._tick)
        for broker in self.brokers.values():
            if not broker.up:
                continue
            if broker.node_id not in self.isolated and self.rng.random() < 0.2:
                self._publish_to(broker)  # brokers fetch the metadata log: a lost image still arrives later
            if self.rng.random() < 0.05:
                broker.log.flushed = len(broker.log.batches)
                broker.log.checkpointed_hw = broker.log.high_watermark
            state = broker.leader_state
            if state is not None:
                if self.now_ms % (LAG_MAX_MS // 2) < TICK_MS:
                    shrunk = state.shrunk_isr(self.now_ms)
                    if shrunk is not None:
                        self._propose(broker, shrunk)
                if state.pending_isr is not None and self.now_ms - broker.proposed_ms > ALTER_TIMEOUT_MS:
                    self._send_proposal(broker)  # no answer: applied or not is unknown, so it is sent again
            else:
                self._fetch(broker)

    def _fault(self) -> None:
        if not self.faulty:
            return
        self._at(self.now_ms + self.rng.randrange(1, 2 * self.faults.fault_every_ms), self._fault)
        f, roll = self.faults, self.rng.random()
        if roll < f.crash:
            self._crash_someone()
        elif roll < f.crash + f.isolate:
            self._isolate_someone()
        elif roll < f.crash + f.isolate + f.move_leader:
            s = self.state
            target = self._elect(s.isr, s.leader)
            if target >= 0 and not self.brokers[target].up:
                return
            if target >= 0:
                self._commit(target, s.isr, new_leader_epoch=True)

    def _crash_someone(self) -> None:
        up = [b for b in self.brokers.values() if b.up]
        broker = self.rng.choice(up)
        others_in_isr = [r for r in self.state.isr if r != broker.node_id and self.brokers[r].up
                         and r not in self.fenced]
        if not others_in_isr:
            return  # the last live ISR member: Kafka promises nothing if it goes down
        broker.up = False
        log = broker.log
        log.crash(self.rng.randrange(log.flushed, len(log.batches) + 1))
        broker.incarnation += 1
        broker.image, broker.leader_state, broker.leader_epoch = None, None, -1
        broker.fetch_id, broker.pending_acks = 0, []
        self._fence(broker.node_id)
        self._at(self.now_ms + self.rng.randrange(50, 600), functools.partial(self._restart, broker))

    def _restart(self, broker: Broker) -> None:
        broker.up = True
        self._publish_to(broker)
        self._at(self.now_ms + self.rng.randrange(20, 200), functools.partial(self._unfence, broker.node_id))

    def _isolate_someone(self) -> None:
        node_id = self.rng.choice(REPLICAS)
        self.isolated.add(node_id)
        self._at(self.now_ms + self.rng.randrange(50, 2 * LAG_MAX_MS), functools.partial(self.isolated.discard,
                                                                                        node_id))

    def _heal(self) -> None:
        self.faulty = False
        self.isolated.clear()
        for broker in self.brokers.values():
            if not broker.up:
                self._restart(broker)

    # -- checks -------------------------------------------------------------------------------------------------

    def _check(self) -> None:
        """The invariants, re-checked only for brokers whose log, high watermark or ISR membership changed."""
        for node_id, broker in self.brokers.items():
            if not broker.up:
                continue
            log = broker.log
            self._check_leader_hw(broker)
            in_isr = node_id in self.state.isr and node_id not in self.fenced
            key = (log.version, log.high_watermark, len(self.acked), len(self.committed), in_isr)
            if key == self._checked.get(node_id):
                continue
            self._checked[node_id] = key
            self._check_committed_prefix(broker)
            if in_isr:
                self._check_holds_committed(broker)

    def _check_leader_hw(self, broker: Broker) -> None:
        """A leader's high watermark never goes back while it leads. (A follower copies its leader's, which after
        an election may be behind for a while, as in Kafka: the commit point below is what never goes back.)"""
        state = broker.leader_state
        if state is None:
            broker.led_with = None
            return
        hw = broker.log.high_watermark
        if broker.led_with is state and hw < broker.seen_hw:
            self._fail(f"leader {broker.node_id}'s high watermark went back from {broker.seen_hw} to {hw}")
        broker.led_with, broker.seen_hw = state, hw

    def _check_committed_prefix(self, broker: Broker) -> None:
        """Below its high watermark a broker holds exactly the committed records; a higher high watermark than any
        before moves the commit point up."""
        values, hw, committed = broker.log.values, broker.log.high_watermark, self.committed
        shared = min(hw, len(committed))
        if values[:shared] != committed[:shared]:
            offset = next(o for o in range(shared) if values[o] != committed[o])
            self._fail(f"broker {broker.node_id} has {values[offset]} at offset {offset} below its high watermark "
                       f"{hw}, but {committed[offset]} was committed there")
        if hw > len(committed):
            committed.extend(values[len(committed):hw])

    def _check_holds_committed(self, broker: Broker) -> None:
        """An ISR member holds every committed record, the acknowledged ones among them: so none is ever lost and
        the commit point never goes back."""
        values, committed = broker.log.values, self.committed
        if values[:len(committed)] != committed:
            offset = next(o for o in range(len(committed)) if o >= len(values) or values[o] != committed[o])
            self._fail(f"ISR member {broker.node_id} lost committed offset {offset} ({committed[offset]}): its log "
                       f"ends at {len(values)}")
        lost = [o for o, r in self.acked.items() if o >= len(values) or values[o] != r]
        if lost:
            self._fail(f"ISR member {broker.node_id} lacks acknowledged offsets {sorted(lost)[:5]}")

    def _check_converged(self) -> None:
        s = self.state
        if s.leader < 0 or set(s.isr) != set(REPLICAS):
            self._fail(f"not healed: leader {s.leader}, ISR {s.isr}, fenced {sorted(self.fenced)}")
        leader_log = self.brokers[s.leader].log
        for broker in self.brokers.values():
            if broker.log.batches != leader_log.batches:
                self._fail(f"broker {broker.node_id} ends at {broker.log.log_end_offset} with "
                           f"{broker.log.batches[-3:]}, the leader at {leader_log.log_end_offset} with "
                           f"{leader_log.batches[-3:]}")
            if broker.log.high_watermark != leader_log.log_end_offset and broker.node_id == s.leader:
                self._fail(f"the leader's high watermark {broker.log.high_watermark} is below its log end "
                           f"{leader_log.log_end_offset}")
        self._check_holds_committed(self.brokers[s.leader])
