"""MirrorMaker 2's model between two real Moldau clusters on this machine: a one-node source (east) mirrored by
`moldau mirror MM2.properties` to a 3-node target (west), every mirrored and internal topic with 3 replicas.

- A consumer group reads half of a topic under a steady load on the source, committing as it goes, then fails
  over with `moldau mirror failover --group G --execute` and goes on at the target: no record is skipped, and
  the records it reads twice (printed exactly) stay within what offset syncs and the checkpoint interval allow.
- kill -9 of the target broker that leads a mirrored partition while the mirror copies: replication carries on
  with the new leader, and every record acknowledged on the source reaches the target.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.connect.distributed.kafka_log import end_offset
from moldau.mirror.records import Checkpoint
from tests.support.broker_process import BrokerProcess, signal_and_wait
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.connect_worker import wait_for
from tests.support.mirror import PARTITIONS, Load, copied
from tests.support.replicated import FAST_FAILOVER

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

FAST = {**FAST_FAILOVER, "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
FAILOVER_TOPIC, KILL_TOPIC = "orders", "payments"
GROUP = "billing"
CHECKPOINT_INTERVAL_S = 1.0
FLUSH_INTERVAL_S = 0.5
OFFSET_LAG_MAX = 100
HALF = 1500


@dataclass
class Clusters:
    east: BrokerProcess
    west: LocalCluster
    mm2: Path


def mm2_properties(path: Path, east: str, west: str) -> Path:
    settings = {
        "clusters": "east, west", "east.bootstrap.servers": east, "west.bootstrap.servers": west,
        "east->west.enabled": "true", "east->west.topics": f"{FAILOVER_TOPIC}, {KILL_TOPIC}",
        "offset.flush.interval.ms": str(int(FLUSH_INTERVAL_S * 1000)), "offset.lag.max": str(OFFSET_LAG_MAX),
        "emit.checkpoints.interval.seconds": str(CHECKPOINT_INTERVAL_S), "refresh.groups.interval.seconds": "1",
        # No reverse flow: the one-node east would hold its worker's internal topics.
        "west->east.emit.heartbeats.enabled": "false",
    }
    # Three replicas of everything on the target; the offset syncs live on the one-node source.
    settings.update({f"east->west.{key}": value for key, value in {
        "replication.factor": "3", "checkpoints.topic.replication.factor": "3",
        "heartbeats.topic.replication.factor": "3", "config.storage.replication.factor": "3",
        "offset.storage.replication.factor": "3", "status.storage.replication.factor": "3",
        "offset-syncs.topic.replication.factor": "1"}.items()})
    path.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    return path


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    base = tmp_path_factory.mktemp("mirror-failover")
    (base / "east").mkdir()
    east = BrokerProcess(base / "east", overrides={"group.initial.rebalance.delay.ms": "0"})
    east.start()
    try:
        with LocalCluster(base / "west", 3, overrides=FAST) as west:
            west.active_controller(timeout_s=30)
            admin = AdminClient({"bootstrap.servers": east.bootstrap})
            created = admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (FAILOVER_TOPIC, KILL_TOPIC)])
            for future in created.values():
                future.result(30)
            config = mm2_properties(base / "mm2.properties", east.bootstrap, west.bootstrap)
            log = base / "mirror.log"
            with open(log, "ab") as out:
                mirror = subprocess.Popen([sys.executable, "-m", "moldau", "mirror", str(config)], stdout=out,
                                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                yield Clusters(east, west, config)
            except BaseException:
                print(log.read_text(errors="replace")[-4000:])
                raise
            finally:
                signal_and_wait(mirror, signal.SIGTERM, 60, "mirror")
    finally:
        try:
            east.stop()
        finally:
            east.cleanup()


def committed_on(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)}
    finally:
        consumer.close()


def checkpoints(west: str, group: str) -> dict[int, Checkpoint]:
    """The group's latest checkpoint per partition, from the checkpoints topic on the target."""
    consumer = Consumer({"bootstrap.servers": west, "group.id": "unused", "enable.auto.commit": False})
    topic, found = "east.checkpoints.internal", {}
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return {}  # not created yet
        # Metadata came from a broker that has the topic; the leader may not have replayed its creation yet,
        # and answers as a Kafka broker does until it has: asked again, as Connect asks.
        end = end_offset(consumer, topic, 0, timeout_s=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        read = 0
        while read < end:
            for message in consumer.consume(1000, 1.0):
                if message.error() is None:
                    read = (message.offset() or 0) + 1
                    checkpoint = Checkpoint.from_record(message.key(), message.value())
                    if checkpoint.group == group:
                        found[checkpoint.partition] = checkpoint
    finally:
        consumer.close()
    return found


def number(message: Message) -> int:
    """The number the load wrote as the record's value."""
    return int(message.value() or b"")


def start_group(east: str, west: str) -> list[int]:
    """The group on the source, committed at the start, and a few records written and mirrored, so that the
    checkpoint connector follows the group (its first checkpoints are out) before the steady load begins, as
    for a group that has been consuming for a while. The values of those records (negative numbers)."""
    consumer = Consumer({"bootstrap.servers": east, "group.id": GROUP, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(FAILOVER_TOPIC, p, 0) for p in range(PARTITIONS)],
                        asynchronous=False)
    finally:
        consumer.close()
    producer = Producer({"bootstrap.servers": east, "enable.idempotence": True})
    prefix = list(range(-1, -11, -1))
    for value in prefix:
        producer.produce(FAILOVER_TOPIC, value=str(value).encode(), partition=value % PARTITIONS)
    assert producer.flush(30) == 0
    wait_for(lambda: len(checkpoints(west, GROUP)) == PARTITIONS, 60, "the group's first checkpoints")
    return prefix


def consume_on_source(bootstrap: str, count: int) -> list[int]:
    """Read the first `count` records as the group, as many from each partition, committing after every batch
    what it read, then leave the group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([FAILOVER_TOPIC])
    quota = count // PARTITIONS
    read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    try:
        deadline = time.monotonic() + 60
        while any(len(values) < quota for values in read.values()):
            assert time.monotonic() < deadline, f"read {sum(map(len, read.values()))} of {count} on the source"
            positions = {}
            for message in consumer.consume(200, 0.5):
                partition, offset = message.partition(), message.offset()
                if message.error() is None and partition is not None and offset is not None \
                        and len(read[partition]) < quota:
                    read[partition].append(number(message))
                    positions[partition] = offset + 1
            if positions:
                consumer.commit(offsets=[TopicPartition(FAILOVER_TOPIC, p, o) for p, o in positions.items()],
                                asynchronous=False)
    finally:
        consumer.close()
    return [value for values in read.values() for value in values]


def consume_on_target(bootstrap: str, remote: str, until: set[int]) -> list[int]:
    """Read as the group on the target, from its committed offsets, until every value in `until` was seen."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "latest"})  # never "earliest": a missing offset must fail loudly
    consumer.subscribe([remote])
    values: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while not until <= set(values):
            assert time.monotonic() < deadline, f"{len(until - set(values))} records not read on the target"
            values += [number(m) for m in consumer.consume(500, 0.5) if m.error() is None]
    finally:
        consumer.close()
    return values


def test_a_group_fails_over_to_the_3_node_target_skipping_nothing(clusters: Clusters) -> None:
    east, west = clusters.east.bootstrap, clusters.west.bootstrap
    remote = f"east.{FAILOVER_TOPIC}"
    prefix = start_group(east, west)
    started = time.monotonic()
    with Load(east, FAILOVER_TOPIC) as load:
        on_source = consume_on_source(east, HALF)  # keeping up with the load
        wait_for(lambda: len(load.acked) >= 2 * HALF, 60, "the second half to be written")
    elapsed = time.monotonic() - started
    committed = committed_on(east, GROUP, FAILOVER_TOPIC)
    assert sum(committed.values()) == len(on_source) == HALF

    written = load.acked | set(prefix)
    wait_for(lambda: set(copied(west, remote)) >= written, 90, "the mirror to copy everything")
    latest = wait_for(lambda: (c := checkpoints(west, GROUP)) and all(
        p in c and c[p].upstream_offset == committed[p] for p in range(PARTITIONS)) and c, 60,
        "checkpoints of the group's final offsets")

    failover = subprocess.run([sys.executable, "-m", "moldau", "mirror", "failover", str(clusters.mm2),
                               "--group", GROUP, "--execute"], capture_output=True, text=True, timeout=120,
                              check=False)
    assert failover.returncode == 0, failover.stderr
    assert sorted(failover.stdout.splitlines()) == sorted(
        f"{remote}\t{p}\t{latest[p].downstream_offset}" for p in range(PARTITIONS))

    on_target = consume_on_target(west, remote, written - set(on_source))
    skipped = written - set(on_source) - set(on_target)
    assert not skipped, f"{len(skipped)} records skipped"
    duplicates = len(on_source) + len(on_target) - len(set(on_source) | set(on_target))
    # Per partition, the group re-reads what lies between the offset sync its checkpoint used and its committed
    # offset. Syncs are written at most about 2 * offset.lag.max apart (runs of offset.lag.max records), and the
    # checkpoint task, translating a group d offsets behind the newest sync it has read, places it at most d / 2
    # further back. The checkpoint that counts is the first after the group's last commit: at most one
    # checkpoint interval later, when the mirror has copied at most one interval and one offset commit's worth
    # of records more (with a second to spare on this shared machine).
    rate = len(load.acked) / elapsed / PARTITIONS
    allowed = PARTITIONS * (2 * OFFSET_LAG_MAX + rate * (CHECKPOINT_INTERVAL_S + FLUSH_INTERVAL_S + 1) / 2)
    print(f"\nfailover to the 3-node target: {len(written)} records, the group read {len(on_source)} on the "
          f"source and {len(on_target)} on the target; {duplicates} read twice (allowed {allowed:.0f}), "
          f"0 skipped; translated offsets {dict(sorted((p, c.downstream_offset) for p, c in latest.items()))} "
          f"for committed {committed}")
    assert duplicates <= allowed


def partition_leaders(address: str, topic: str) -> dict[int, int]:
    meta = metadata_at(address, [topic])
    return {p.partition_index: p.leader_id for t in meta.topics if t.name == topic for p in t.partitions}


def test_kill_9_of_a_target_partition_leader_loses_nothing(clusters: Clusters) -> None:
    east, west = clusters.east.bootstrap, clusters.west
    remote = f"east.{KILL_TOPIC}"
    with Load(east, KILL_TOPIC) as load:
        wait_for(lambda: len(copied(west.bootstrap, remote)) > 500, 60, "the mirror to copy")
        some_broker = str(west.brokers[0].kafka_address)
        victim = partition_leaders(some_broker, remote)[0]
        survivor = str(next(b for b in west.brokers if b.node_id != victim).kafka_address)
        west.node(victim).kill()
        west.wait_until(lambda: all(leader not in (victim, -1)
                                    for leader in partition_leaders(survivor, remote).values()),
                        30, f"new leaders for the partitions broker {victim} led")
        copied_at_kill = len(copied(survivor, remote))
        written_at_kill = len(load.acked)
        wait_for(lambda: len(load.acked) > written_at_kill + 500, 60, "more records on the source")
    wait_for(lambda: set(copied(survivor, remote)) >= load.acked, 90, "the mirror to copy everything")
    values = copied(survivor, remote)
    assert len(values) > copied_at_kill
    duplicates = len(values) - len(set(values))
    print(f"\nkill -9 of target broker {victim} (leader of {remote}-0): {len(load.acked)} records, "
          f"{copied_at_kill} copied before the new leaders were in place, all copied, {duplicates} copied twice")
    west.node(victim).start()
