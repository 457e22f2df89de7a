"""A seeded, deterministic simulation of the controller's handling of failed log directories (KIP-858).

Four brokers with two log directories each host replicated partitions (three replicas, min.insync.replicas=2)
while random events happen: acks=all appends, replicas assigned to or moved between directories
(AssignReplicasToDirs), directories failing (their replicas stop fetching and stop taking writes) and being
reported in a heartbeat, leaders shrinking the ISR of members that stopped fetching, followers catching up and
rejoining, brokers fenced and restarted with or without a failed directory, and preferred leader elections.
Every change goes through the controller's pure decisions (`broker_heartbeats.decide`, `log_dirs`,
`leader_election`) and the metadata image.

After every step: each leader is an ISR member whose replica is online (its broker live, its directory not
reported offline), holds every acknowledged record, and leader epochs only grow, by one exactly when the leader
changes; a replica in a reported-offline directory is neither leader nor in an ISR with others. At the end, with
every failure reported, every partition that has an online ISR member has a leader.

Replay one seed: `pytest tests/sim/test_log_dir_failover_simulation.py -k 'seed and N'`.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from moldau.metadata import broker_heartbeats, log_dirs
from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage
from moldau.metadata.leader_election import preferred_leader_changes
from moldau.metadata.records import (
    Endpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

BROKERS = (1, 2, 3, 4)
TOPIC_ID = uuid.UUID(int=7)
PARTITIONS = 6
MIN_ISR = 2


def _dir_id(broker: int, index: int) -> str:
    return str(uuid.UUID(int=broker * 16 + index))


@dataclass
class World:
    """The controller's image plus what the image cannot see: the disks and the replicas' logs."""

    rng: random.Random
    image: MetadataImage = field(default_factory=MetadataImage)
    failed: set[str] = field(default_factory=set)  # directories whose disk failed (reported or not)
    log_end: dict[tuple[int, int], int] = field(default_factory=dict)  # (partition, broker) -> records held
    acked: dict[int, int] = field(default_factory=dict)  # partition -> acknowledged records
    epochs: dict[int, tuple[int, int]] = field(default_factory=dict)  # partition -> (leader, leader epoch)
    next_epoch: int = 1000

    def commit(self, records: list[MetadataRecord]) -> None:
        if records:
            self.image = self.image.apply(records, self.image.offset + len(records))
        self.check()

    def partition(self, p: int) -> PartitionImage:
        return self.image.topics_by_id[TOPIC_ID].partitions[p]

    def healthy(self, p: PartitionImage, broker: int) -> bool:
        """The replica's disk works (whether or not the controller knows); an unassigned replica is in dir 0."""
        return (p.directory_of(broker) or _dir_id(broker, 0)) not in self.failed

    # -- events --------------------------------------------------------------------------------------

    def register(self, broker: int) -> None:
        """A (re)start: the broker registers the directories that work, then is unfenced once caught up."""
        online = tuple(_dir_id(broker, i) for i in (0, 1) if _dir_id(broker, i) not in self.failed)
        if not online:
            return  # every directory failed: the broker does not start
        self.next_epoch += 10
        epoch = self.next_epoch
        records: list[MetadataRecord] = broker_heartbeats.fence(self.image, broker)
        records.append(RegisterBrokerRecord(broker, uuid.uuid4(), (Endpoint("PLAINTEXT", "h", broker),), None,
                                            epoch, fenced=True, log_dirs=online))
        self.commit(records)
        self.commit(broker_heartbeats.decide(self.image, broker, epoch, epoch, False, False).records)

    def heartbeat(self, broker: int) -> None:
        registration = self.image.brokers.get(broker)
        if registration is None:
            return
        offline = [d for d in (_dir_id(broker, 0), _dir_id(broker, 1)) if d in self.failed]
        epoch = registration.broker_epoch
        self.commit(broker_heartbeats.decide(self.image, broker, epoch, epoch, False, False,
                                             offline_dirs=offline).records)

    def assign(self, broker: int) -> None:
        registration = self.image.brokers.get(broker)
        if registration is None or registration.fenced:
            return
        p = self.partition(self.rng.randrange(PARTITIONS))
        if broker not in p.replicas or not self.healthy(p, broker):
            return
        target = _dir_id(broker, self.rng.randrange(2))
        if target in self.failed and target in registration.log_dirs:
            return  # a move into a failed disk fails on the broker before anything is assigned
        records, outcomes = log_dirs.assignment_changes(self.image, broker, [(target, TOPIC_ID, p.partition)])
        assert set(outcomes.values()) == {0}
        self.commit(records)

    def fail_dir(self) -> None:
        broker = self.rng.choice(BROKERS)
        self.failed.add(_dir_id(broker, self.rng.randrange(2)))

    def repair_and_restart(self) -> None:
        broker = self.rng.choice(BROKERS)
        for i in (0, 1):
            if self.rng.random() < 0.5:
                self.failed.discard(_dir_id(broker, i))
        self.register(broker)

    def append(self) -> None:
        """An acks=all write: acknowledged once every ISR member has it (which stalls on a failed disk)."""
        p = self.partition(self.rng.randrange(PARTITIONS))
        if p.leader == NO_LEADER or len(p.isr) < MIN_ISR:
            return
        if not all(self.healthy(p, b) and self.image.is_live(b) for b in p.isr):
            return
        self.acked[p.partition] = self.acked.get(p.partition, 0) + 1
        for b in p.isr:
            self.log_end[(p.partition, b)] = self.acked[p.partition]

    def shrink_or_expand(self) -> None:
        """The leader's AlterPartition: drop a member that stopped fetching, or add one that caught up."""
        p = self.partition(self.rng.randrange(PARTITIONS))
        if p.leader == NO_LEADER or not self.healthy(p, p.leader):
            return
        lagging = [b for b in p.isr if b != p.leader and not (self.healthy(p, b) and self.image.is_live(b))]
        if lagging:
            isr = tuple(b for b in p.isr if b not in lagging)
        else:
            joining = [b for b in p.replicas if b not in p.isr and self.healthy(p, b)
                       and self.image.replica_online(b, p)]
            if not joining:
                return
            self.log_end[(p.partition, joining[0])] = self.log_end.get((p.partition, p.leader), 0)
            isr = (*p.isr, joining[0])
        self.commit([PartitionRecord(TOPIC_ID, p.partition, p.replicas, isr, p.leader, p.leader_epoch,
                                     p.partition_epoch + 1)])

    def expire(self) -> None:
        self.commit(broker_heartbeats.fence(self.image, self.rng.choice(BROKERS)))

    def preferred_election(self) -> None:
        self.commit(list(preferred_leader_changes(self.image)))

    # -- invariants ----------------------------------------------------------------------------------

    def check(self) -> None:
        topic = self.image.topics_by_id.get(TOPIC_ID)
        for p in (topic.partitions.values() if topic is not None else ()):
            acked = self.acked.get(p.partition, 0)
            previous_leader, previous_epoch = self.epochs.get(p.partition, (p.leader, p.leader_epoch))
            assert p.leader_epoch == previous_epoch + (p.leader != previous_leader), (p, previous_leader)
            self.epochs[p.partition] = (p.leader, p.leader_epoch)
            for b in p.isr:
                assert self.log_end.get((p.partition, b), 0) >= acked, f"ISR member {b} lacks records of {p}"
            if p.leader != NO_LEADER:
                assert p.leader in p.isr and self.image.replica_online(p.leader, p), p
            registered = {b: r for b, r in self.image.brokers.items() if r.log_dirs}
            offline = [b for b in p.replicas if b in registered and p.directory_of(b)
                       and p.directory_of(b) not in registered[b].log_dirs]
            for b in offline:
                assert p.leader != b and (b not in p.isr or p.isr == (b,)), (b, p)

    def check_final(self) -> None:
        for broker in BROKERS:
            self.heartbeat(broker)
        for p in self.image.topics_by_id[TOPIC_ID].partitions.values():
            if any(self.image.replica_online(b, p) for b in p.isr):
                assert p.leader != NO_LEADER, p


def simulate(seed: int, steps: int = 400) -> World:
    world = World(random.Random(seed))
    for broker in BROKERS:
        world.register(broker)
    records: list[MetadataRecord] = [TopicRecord("t", TOPIC_ID)]
    for p in range(PARTITIONS):
        replicas = tuple(world.rng.sample(BROKERS, 3))
        records.append(PartitionRecord(TOPIC_ID, p, replicas, replicas, replicas[0], 0, 0))
    world.commit(records)
    events = [(world.append, 30), (world.shrink_or_expand, 12), (lambda: world.assign(world.rng.choice(BROKERS)), 12),
              (lambda: world.heartbeat(world.rng.choice(BROKERS)), 12), (world.fail_dir, 2),
              (world.repair_and_restart, 3), (world.expire, 1), (world.preferred_election, 2)]
    actions, weights = zip(*events, strict=True)
    for _ in range(steps):
        world.rng.choices(actions, weights)[0]()
    world.check_final()
    return world


@pytest.mark.parametrize("seed", range(60))
def test_seed(seed: int) -> None:
    simulate(seed)


def test_failures_happen_and_leadership_moves_for_them() -> None:
    """The simulation is not vacuous: directories are reported offline, and leaders move because of it."""
    moved = 0
    for seed in range(60):
        world = simulate(seed)
        moved += sum(1 for r in world.image.brokers.values() if len(r.log_dirs) < 2)
    assert moved > 10
