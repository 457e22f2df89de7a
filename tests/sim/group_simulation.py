"""A seeded, deterministic simulation of the group coordinator over the in-memory record log: classic groups and
one group shared by KIP-848 consumers and classic ones, which moves between the two protocols as they come and go
(upgraded by a KIP-848 member joining it as a classic group with members, downgraded when its last KIP-848
member leaves or is expired).

One `random.Random(seed)` drives everything: classic consumers that join (with the KIP-394 handshake), sync (the
leader assigns the topic's partitions round-robin) and heartbeat; KIP-848 consumers that heartbeat and take the
assignment the coordinator reconciles for them; all of them consume and commit their positions, leave, crash
(their sessions time out through the simulated clock), or pause and come back as zombies that commit a stale
position before they learn they were fenced; time that moves on; replication of the `__consumer_offsets` partitions; and
coordinator failovers, where a new `GroupCoordinator` is rebuilt by replaying the log alone, either with every
write replicated or after losing the unreplicated suffix.

Durability, as the broker has it: `GroupRuntime` answers an OffsetCommit, and a JoinGroup, SyncGroup or
ConsumerGroupHeartbeat, only once the high watermark of the group's partition passes what it holds, and
OffsetFetch shows nothing above the high watermark. Here membership answers are delivered right after their
partition is replicated; a failover then loses only commits nobody was told of. Time only advances once
everything written is replicated (a healthy in-sync replica keeps up within a step).

Checked after every step (`InvariantViolation` names the one that broke):
- ownership: within a classic group's generation, no partition is assigned to two members; in the consumer
  group, no partition is assigned to a member while another holds it (assigned or not yet revoked), neither in
  the coordinator's state nor among the consumers, of either protocol, it still counts as members at their epoch;
- fencing: the committed offset of a partition never goes back while the group stays in one generation (its
  owner's position only moves forward; a stale member's commit must be refused);
- durability: every partition's visible committed offset is the last acknowledged commit, and after a failover
  the new coordinator has every acknowledged offset and the same record for every settled group.

Replay one seed: `python -m tests.sim.group_simulation --seed N`.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from moldau.coordinator.group.classic import GroupLimits, GroupState
from moldau.coordinator.group.consumer import LEAVE_EPOCH, ConsumerSettings, HeartbeatRequest
from moldau.coordinator.group.consumer_protocol import assigned_partitions, encode_assignment
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.member import (
    Completion,
    Handle,
    JoinRequest,
    JoinResult,
    ProtocolMetadata,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.coordinator.group.records import OFFSETS_TOPIC, GroupValue
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.group.shard import ShardSettings
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import SequentialIds, subscription
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

START_MS = 1_700_000_000_000
TOPIC = "t"
OFFSET_PARTITIONS = 2
COMMIT_VERSION = 8
KIP848_COMMIT_VERSION = 9  # the first OffsetCommit whose generation field is a member epoch
PROTOCOLS = (ProtocolMetadata("roundrobin", subscription(TOPIC)),)

TP = tuple[str, int]  # (group, partition of TOPIC)


class InvariantViolation(AssertionError):
    """An invariant broke; the message names it."""


class Phase(Enum):
    OUT = "out"  # must (re)join
    JOINING = "joining"  # a JoinGroup is waiting
    MUST_SYNC = "must sync"
    SYNCING = "syncing"  # a SyncGroup is waiting
    STABLE = "stable"
    PAUSED = "paused"  # a zombie-to-be: does nothing until `wake_ms`
    GONE = "gone"  # left or crashed for good


@dataclass
class Consumer:
    name: str
    group: str
    session_ms: int
    member_id: str = ""
    phase: Phase = Phase.OUT
    generation: int = -1
    leader: bool = False
    members: tuple[str, ...] = ()  # what a leader's JoinGroup answer listed
    owned: frozenset[int] = frozenset()
    positions: dict[int, int] = field(default_factory=dict)
    wake_ms: int = 0
    kip848: bool = False  # a consumer-protocol member: `generation` is its member epoch


@dataclass(frozen=True)
class PendingAck:
    end_offset: int
    tp: TP
    value: int
    log_position: int  # order of the commit in the log (the sim's count of accepted commits)


class GroupSimulation:
    def __init__(self, seed: int, steps: int = 400) -> None:
        self.rng = random.Random(seed)
        rng = self.rng
        self.seed = seed
        self.steps = steps
        self.now = START_MS
        self.groups = [f"g{i}" for i in range(rng.choice((1, 2, 3)))]
        self.consumer_group = "cg"
        self.topic_partitions = rng.choice((1, 3, 6))
        self.max_consumers = rng.choice((2, 4, 6))
        self.rebalance_ms = rng.choice((4_000, 10_000))
        limits = GroupLimits(min_session_timeout_ms=1000, max_session_timeout_ms=60_000,
                             initial_rebalance_delay_ms=rng.choice((0, 0, 500)))
        self.consumer_session_ms = rng.choice((6_000, 10_000))
        consumer = ConsumerSettings(heartbeat_interval_ms=1_000, session_timeout_ms=self.consumer_session_ms)
        self.settings = CoordinatorSettings(ShardSettings(limits, 4096, 7 * 24 * 3600 * 1000, consumer),
                                            OFFSET_PARTITIONS, 1, 600_000)
        self.log = MemoryLog(OFFSETS_TOPIC, OFFSET_PARTITIONS, auto_replicate=False)
        self.image = image_with(TOPIC, self.topic_partitions, image=image_with(OFFSETS_TOPIC, OFFSET_PARTITIONS))
        self.ids = SequentialIds()
        self.coordinator = self._new_coordinator()
        self.consumers: list[Consumer] = []
        self.waiting: dict[Handle, Consumer] = {}
        self.next_handle = 0
        self.owners: dict[tuple[str, int], dict[int, str]] = {}  # (group, generation) -> partition -> member
        self.pending_acks: dict[int, list[PendingAck]] = {p: [] for p in range(OFFSET_PARTITIONS)}
        self.acknowledged: dict[TP, tuple[int, int]] = {}  # tp -> (log position, value) of the last acked commit
        self.commits_accepted = 0
        self.seen: dict[TP, tuple[int, int]] = {}  # tp -> (generation, committed offset) last observed
        self.trace: list[str] = []
        self.stats = {"failovers": 0, "lost_commits": 0, "acked": 0, "rebalances": 0, "zombie_commits": 0,
                      "reconciled": 0, "upgrades": 0, "downgrades": 0}
        self.shared_kind: str | None = None  # "classic" or "consumer" while the shared group has members
        self.shared_was_consumer = False

    # -- plumbing ------------------------------------------------------------------------------------------

    def _new_coordinator(self) -> GroupCoordinator:
        coordinator = GroupCoordinator(NODE_ID, self.settings, lambda: self.image, _topic_exists, self.log, self.ids)
        coordinator.on_image(self.image, self.now)
        return coordinator

    def _fail(self, message: str) -> InvariantViolation:
        tail = "\n  ".join(self.trace[-15:])
        return InvariantViolation(f"seed={self.seed} at {self.now - START_MS} ms: {message}\n  last steps:\n  {tail}")

    def _note(self, text: str) -> None:
        self.trace.append(f"{self.now - START_MS:>7} {text}")

    def _membership(self, completions: list[Completion]) -> None:
        """After a membership call: replicate what it wrote (see the module docstring), then deliver answers."""
        for p in range(OFFSET_PARTITIONS):
            if self.log.parts[p].end > self.log.parts[p].high_watermark:
                self._replicate(p)
        self._deliver(completions)

    def _replicate(self, partition: int) -> None:
        self.log.replicate(partition)
        for ack in self.pending_acks[partition]:
            last = self.acknowledged.get(ack.tp)
            if last is None or last[0] < ack.log_position:
                self.acknowledged[ack.tp] = (ack.log_position, ack.value)
            self.stats["acked"] += 1
        self.pending_acks[partition] = []

    def _handle(self, consumer: Consumer) -> Handle:
        self.next_handle += 1
        self.waiting[self.next_handle] = consumer
        return self.next_handle

    # -- consumers -----------------------------------------------------------------------------------------

    def _join(self, c: Consumer) -> None:
        c.phase, c.owned = Phase.JOINING, frozenset()  # eager: everything is revoked before rejoining
        request = JoinRequest(c.member_id, None, c.name, "/sim", c.session_ms, self.rebalance_ms, "consumer",
                              PROTOCOLS)
        self._note(f"{c.name} joins {c.group} as {c.member_id or '?'}")
        self._membership(self.coordinator.join(c.group, self._handle(c), request, self.now))

    def _sync(self, c: Consumer) -> None:
        assignments: tuple[tuple[str, bytes], ...] = ()
        if c.leader:
            plan: dict[str, list[int]] = {m: [] for m in c.members}
            for p in range(self.topic_partitions):
                plan[c.members[p % len(c.members)]].append(p)
            assignments = tuple((m, encode_assignment(frozenset((TOPIC, p) for p in ps))) for m, ps in plan.items())
        c.phase = Phase.SYNCING
        self._note(f"{c.name} syncs {c.group} gen {c.generation}{' as leader' if c.leader else ''}")
        request = SyncRequest(c.member_id, None, c.generation, "consumer", "roundrobin", assignments)
        self._membership(self.coordinator.sync(c.group, self._handle(c), request, self.now))

    def _deliver(self, completions: list[Completion]) -> None:
        for completion in completions:
            c = self.waiting.pop(completion.handle)
            result = completion.result
            if isinstance(result, JoinResult):
                self._joined(c, result)
            else:
                self._synced(c, result)

    def _joined(self, c: Consumer, result: JoinResult) -> None:
        if result.error == ErrorCode.member_id_required:
            c.member_id = result.member_id
            self._join(c)
        elif result.error == ErrorCode.none:
            c.member_id, c.generation, c.phase = result.member_id, result.generation_id, Phase.MUST_SYNC
            c.leader = result.leader == c.member_id
            c.members = tuple(m.member_id for m in result.members)
            self.stats["rebalances"] += c.leader
        else:
            self._fenced(c, result.error)

    def _synced(self, c: Consumer, result: SyncResult) -> None:
        if result.error != ErrorCode.none:
            self._fenced(c, result.error)
            return
        assigned = assigned_partitions(result.assignment)
        if assigned is None:
            raise self._fail(f"{c.name} got an unreadable assignment {result.assignment!r}")
        owned = frozenset(p for t, p in assigned if t == TOPIC)
        # In a consumer group the generation is the member's own epoch: `_check_consumer_group` checks those.
        in_consumer_group = self.coordinator.find_consumer_group(c.group) is not None
        owners = {} if in_consumer_group else self.owners.setdefault((c.group, c.generation), {})
        for p in owned:
            other = owners.get(p)
            if other is not None and other != c.member_id:
                raise self._fail(f"{c.group} partition {p} owned by {other} and {c.member_id} in generation "
                                 f"{c.generation}")
            owners[p] = c.member_id
        c.phase, c.owned = Phase.STABLE, owned
        # A new owner starts from the committed offset (what OffsetFetch shows).
        c.positions = {p: self._committed((c.group, p)) or 0 for p in owned}
        self._note(f"{c.name} owns {sorted(owned)} of {c.group} in gen {c.generation}")

    def _fenced(self, c: Consumer, error: ErrorCode) -> None:
        if error == ErrorCode.unknown_member_id:
            c.member_id = ""
        c.phase, c.owned = Phase.OUT, frozenset()
        self._note(f"{c.name} told {error.name}")

    def _heartbeat(self, c: Consumer) -> None:
        error = self.coordinator.heartbeat(c.group, c.member_id, None, c.generation, self.now)
        if error != ErrorCode.none:
            self._fenced(c, error)

    def _commit(self, c: Consumer) -> None:
        """Commit the positions of the owned partitions; acknowledged once the high watermark passes them."""
        if not c.owned:
            return
        owned = sorted(c.owned)
        commits = [OffsetCommit(TOPIC, p, c.positions[p], -1, "") for p in owned]
        version = KIP848_COMMIT_VERSION if c.kip848 else COMMIT_VERSION
        errors = self.coordinator.commit_offsets(c.group, c.member_id, None, c.generation, commits, version,
                                                 self.now)
        self._note(f"{c.name} commits {dict(zip(owned, (x.offset for x in commits), strict=True))} gen "
                   f"{c.generation}: {sorted({e.name for e in errors})}")
        target = self.coordinator.replication_target(c.group)
        for p, error in zip(owned, errors, strict=True):
            if error == ErrorCode.none and target is not None:
                self.commits_accepted += 1
                self.pending_acks[target[0]].append(
                    PendingAck(target[1], (c.group, p), c.positions[p], self.commits_accepted))
        if any(e != ErrorCode.none for e in errors):
            self._fenced(c, errors[0])
            if c.kip848:
                c.generation = 0

    # -- KIP-848 consumers ---------------------------------------------------------------------------------

    def _beat(self, c: Consumer, epoch: int | None = None) -> None:
        """A ConsumerGroupHeartbeat: joining (epoch 0), carrying on, or leaving (LEAVE_EPOCH)."""
        epoch = c.generation if epoch is None else epoch
        joining = epoch == 0
        request = HeartbeatRequest(c.member_id, epoch, rebalance_timeout_ms=self.rebalance_ms if joining else -1,
                                   subscribed_topics=(TOPIC,) if joining else None,
                                   owned=frozenset((TOPIC, p) for p in c.owned), client_id=c.name)
        result = self.coordinator.consumer_heartbeat(c.group, request, self.now)
        self._membership(self.coordinator.take_released())  # requests waiting in a classic group it upgraded
        if epoch == LEAVE_EPOCH:
            c.phase, c.owned = Phase.GONE, frozenset()
            self._note(f"{c.name} leaves {c.group}: {result.error.name}")
            return
        if result.error != ErrorCode.none:
            self._note(f"{c.name} told {result.error.name}")
            if result.error == ErrorCode.unknown_member_id:
                c.member_id = ""
            c.phase, c.owned, c.generation = Phase.OUT, frozenset(), 0
            return
        c.member_id, c.generation, c.phase = result.member_id, result.member_epoch, Phase.STABLE
        if result.assignment is not None:
            owned = frozenset(p for t, p in result.assignment if t == TOPIC)
            for p in owned - c.owned:
                c.positions[p] = self._committed((c.group, p)) or 0
            c.owned = owned
            self.stats["reconciled"] += 1
            self._note(f"{c.name} owns {sorted(owned)} of {c.group} at epoch {c.generation}")

    def _check_consumer_group(self) -> None:
        group = self.coordinator.find_consumer_group(self.consumer_group)
        if group is None:
            return
        holders: dict[tuple[str, int], str] = {}
        for member_id, current in group.current.items():
            for tp in current.assigned | current.pending_revocation:
                if tp in holders:
                    raise self._fail(f"{self.consumer_group} {tp} held by {holders[tp]} and {member_id} at group "
                                     f"epoch {group.epoch}")
                holders[tp] = member_id
        believers: dict[int, str] = {}
        for c in self.consumers:
            state = group.current.get(c.member_id) if c.group == group.group_id and c.phase == Phase.STABLE else None
            if state is None or state.member_epoch != c.generation:
                continue
            for p in c.owned:
                if p in believers:
                    raise self._fail(f"{self.consumer_group} partition {p} owned by {believers[p]} and "
                                     f"{c.member_id} at group epoch {group.epoch}")
                believers[p] = c.member_id

    def _act(self, c: Consumer) -> None:
        rng = self.rng
        if c.kip848:
            self._act_kip848(c)
        elif c.phase == Phase.OUT:
            self._join(c)
        elif c.phase == Phase.MUST_SYNC:
            self._sync(c)
        elif c.phase == Phase.STABLE:
            roll = rng.random()
            if roll < 0.45:
                self._heartbeat(c)
            elif roll < 0.75:
                self._consume_and_commit(c)
            elif roll < 0.80:
                self._pause(c)
            elif roll < 0.83:
                self._crash(c)
            elif roll < 0.86:
                c.phase = Phase.GONE
                error, _, completions = self.coordinator.leave(c.group, [(c.member_id, None)], self.now)
                self._note(f"{c.name} leaves {c.group}: {error.name}")
                self._membership(completions)
            else:
                self._heartbeat(c)
        elif c.phase == Phase.PAUSED and self.now >= c.wake_ms:
            self._wake_zombie(c, self._heartbeat)

    def _consume_and_commit(self, c: Consumer) -> None:
        for p in c.owned:
            c.positions[p] += self.rng.randint(1, 5)
        self._commit(c)

    def _pause(self, c: Consumer) -> None:
        c.phase = Phase.PAUSED
        c.wake_ms = self.now + self.rng.randint(1_000, 3 * c.session_ms)
        self._note(f"{c.name} pauses until {c.wake_ms - START_MS}")

    def _crash(self, c: Consumer) -> None:
        c.phase = Phase.GONE
        self._note(f"{c.name} crashes")

    def _wake_zombie(self, c: Consumer, heartbeat: Callable[[Consumer], object]) -> None:
        """A zombie wakes up and commits what it had before it learns of the generations it missed; then, if it
        still takes itself for a stable member (the commit may have told it otherwise), it heartbeats."""
        c.phase = Phase.STABLE
        self.stats["zombie_commits"] += 1
        self._commit(c)
        if c.phase == Phase.STABLE:
            heartbeat(c)

    def _act_kip848(self, c: Consumer) -> None:
        rng = self.rng
        if c.phase == Phase.OUT:
            self._beat(c, 0)
        elif c.phase == Phase.STABLE:
            roll = rng.random()
            if roll < 0.5:
                self._beat(c)
            elif roll < 0.8:
                self._consume_and_commit(c)
            elif roll < 0.85:
                self._pause(c)
            elif roll < 0.88:
                self._crash(c)
            elif roll < 0.91:
                self._beat(c, LEAVE_EPOCH)
            else:
                self._beat(c)
        elif c.phase == Phase.PAUSED and self.now >= c.wake_ms:
            self._wake_zombie(c, self._beat)

    # -- the world -----------------------------------------------------------------------------------------

    def _advance(self) -> None:
        for p in range(OFFSET_PARTITIONS):
            self._replicate(p)
        self.now += self.rng.randint(50, 2_500)
        self._membership(self.coordinator.tick(self.now))

    def _failover(self, lossy: bool) -> None:
        before = {g: grp.to_record() for g in self.groups if (grp := self.coordinator.find_group(g)) is not None
                  and grp.state in (GroupState.STABLE, GroupState.EMPTY)}
        shared = self._shared_state()
        self._deliver(self.coordinator.close())
        lost = 0
        for p in range(OFFSET_PARTITIONS):
            if lossy:
                lost += len(self.pending_acks[p])
                self.pending_acks[p] = []
                self.log.lose_unreplicated(p)
            else:
                self._replicate(p)
                self.log.move_leadership(p)
        self.stats["failovers"] += 1
        self.stats["lost_commits"] += lost
        self._note(f"failover ({'losing ' + str(lost) + ' unacknowledged commits' if lossy else 'clean'})")
        self.coordinator = self._new_coordinator()
        for g, record in before.items():
            group = self.coordinator.find_group(g)
            after: GroupValue | None = group.to_record() if group is not None else None
            if after != record:
                raise self._fail(f"{g} replayed as {after}, was {record}")
        # Membership records are replicated before anyone hears of them, so the shared group comes back whole,
        # its classic members with what they joined with.
        if self._shared_state() != shared:
            raise self._fail(f"{self.consumer_group} replayed as {self._shared_state()}, was {shared}")

    def _shared_state(self) -> object:
        consumer = self.coordinator.find_consumer_group(self.consumer_group)
        if consumer is None:
            return None
        return consumer.epoch, consumer.members, consumer.targets, consumer.current, consumer.target_epoch

    def _committed(self, tp: TP) -> int | None:
        error, fetched = self.coordinator.fetch_offsets(tp[0], [(TOPIC, [tp[1]])])
        if error != ErrorCode.none:
            raise self._fail(f"OffsetFetch of {tp[0]} failed: {error.name}")
        value = fetched[0][1][0][1]
        if isinstance(value, ErrorCode):
            raise self._fail(f"OffsetFetch of {tp} failed: {value.name}")
        return None if value is None else value.offset

    def _generation(self, group_id: str) -> int:
        """The classic group's generation, or the consumer group's epoch."""
        consumer = self.coordinator.find_consumer_group(group_id)
        if consumer is not None:
            return consumer.epoch
        group = self.coordinator.find_group(group_id)
        return group.generation_id if group is not None else -1

    def _count_conversions(self) -> None:
        """Count the shared group's conversions while it has members (the ones the migration policy governs)."""
        consumer = self.coordinator.find_consumer_group(self.consumer_group)
        classic = self.coordinator.find_group(self.consumer_group)
        kind = ("consumer" if consumer is not None and not consumer.is_empty()
                else "classic" if classic is not None and not classic.is_empty() else None)
        if kind is not None and self.shared_kind is not None and kind != self.shared_kind:
            self.stats["upgrades" if kind == "consumer" else "downgrades"] += 1
            self._note(f"{self.consumer_group} is now a {kind} group")
        self.shared_kind = kind
        if self.shared_was_consumer and consumer is None:
            # A classic group again: its generations start over (from the downgrade's epoch, or from 0 after
            # an empty consumer group), so earlier classic generations say nothing about the new ones.
            self.owners = {key: owners for key, owners in self.owners.items() if key[0] != self.consumer_group}
        self.shared_was_consumer = consumer is not None

    def check(self) -> None:
        self._count_conversions()
        self._check_consumer_group()
        for g in [*self.groups, self.consumer_group]:
            generation = self._generation(g)
            for p in range(self.topic_partitions):
                tp = (g, p)
                committed = self._committed(tp)
                acked = self.acknowledged.get(tp)
                if (acked[1] if acked else None) != committed:
                    raise self._fail(f"{g}/{TOPIC}-{p} shows {committed}, the last acknowledged commit is "
                                     f"{acked[1] if acked else None}")
                if committed is None:
                    continue
                seen = self.seen.get(tp)
                if seen is not None and seen[0] == generation and committed < seen[1]:
                    raise self._fail(f"{g}/{TOPIC}-{p} went back from {seen[1]} to {committed} in generation "
                                     f"{generation}")
                self.seen[tp] = (generation, committed)

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        live = [c for c in self.consumers if c.phase not in (Phase.GONE, Phase.JOINING, Phase.SYNCING)]
        if roll < 0.08 and len([c for c in self.consumers if c.phase != Phase.GONE]) < self.max_consumers:
            group = rng.choice([*self.groups, self.consumer_group])
            # The shared group gets consumers of both protocols: it converts as they come and go.
            kip848 = group == self.consumer_group and rng.random() < 0.6
            session_ms = self.consumer_session_ms if kip848 else rng.choice((6_000, 10_000))
            c = Consumer(f"c{len(self.consumers)}", group, session_ms, kip848=kip848)
            self.consumers.append(c)
            self._act(c)
        elif roll < 0.65 and live:
            self._act(rng.choice(live))
        elif roll < 0.85:
            self._advance()
        elif roll < 0.95:
            self._replicate(rng.randrange(OFFSET_PARTITIONS))
        elif roll < 0.97:
            self._failover(lossy=rng.random() < 0.5)
        self.check()

    def run(self) -> dict[str, int]:
        for _ in range(self.steps):
            self.step()
        return self.stats


def _topic_exists() -> None:
    raise AssertionError("the offsets topic exists from the start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    stats = GroupSimulation(args.seed, args.steps).run()
    print(f"seed={args.seed}: ok {stats}")


if __name__ == "__main__":
    main()
