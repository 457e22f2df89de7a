"""A failed log directory on one broker of a 3-node cluster (KIP-112 / KIP-858): the broker reports it offline in
its heartbeat, the controller moves leadership of the partitions in it to another ISR member, and an acks=all
producer carries on without losing an acknowledged record, while the broker keeps serving the partitions of its
other directory. A broker that cannot report the failure within log.dir.failure.timeout.ms stops instead. Real
processes and confluent-kafka throughout."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaAdminClient

from tests.support.cluster import LocalCluster, metadata_at
from tests.support.replicated import FAST_FAILOVER, Writer, assert_no_loss, read_all

pytestmark = pytest.mark.slow

TOPIC = "two-disks"
VICTIM = 1
REPORT_TIMEOUT_MS = 4000


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    # A reported failure leaves the broker running, well within the short log.dir.failure.timeout.ms.
    overrides = {**FAST_FAILOVER, "log.segment.bytes": "1048576", "offsets.topic.num.partitions": "1",
                 "log.dir.failure.timeout.ms": str(REPORT_TIMEOUT_MS)}
    # The victim's second disk; its first holds the metadata log as well.
    second = {VICTIM: {"log.dirs": f"{tmp_path / 'victim-a'},{tmp_path / 'victim-b'}"}}
    with LocalCluster(tmp_path, 3, overrides=overrides, node_overrides=second) as started:
        started.active_controller(timeout_s=30)
        yield started


def _partitions(address: str) -> dict[int, Any]:
    meta = metadata_at(address, [TOPIC])
    return {p.partition_index: p for t in meta.topics if t.name == TOPIC for p in t.partitions}


def _place(cluster: LocalCluster, first: Path, second: Path) -> None:
    """Partition 0 of the victim in its second directory, partition 1 in its first, both led by the victim."""
    others = [b.node_id for b in cluster.brokers if b.node_id != VICTIM]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = NewTopic(TOPIC, 2, replica_assignment=[[VICTIM, *others], [VICTIM, *reversed(others)]],
                     config={"min.insync.replicas": "2"})
    admin.create_topics([topic])[TOPIC].result(timeout=30)
    kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        kafka_admin.alter_replica_log_dirs({(TOPIC, 0, VICTIM): str(second), (TOPIC, 1, VICTIM): str(first)})
    finally:
        kafka_admin.close()
    cluster.wait_until(lambda: (second / f"{TOPIC}-0").is_dir() and (first / f"{TOPIC}-1").is_dir()
                       and not (first / f"{TOPIC}-0").exists() and not (second / f"{TOPIC}-1").exists(),
                       20, "the victim's replicas in the directories asked for")


def _fill_segment(bootstrap: str, acks: str = "all") -> None:
    """Large records to partition 0 so its active segment rolls, which fails on the broken disk; their delivery
    may fail or succeed, only what the writer was acknowledged is checked."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "message.timeout.ms": 20_000})
    for _ in range(24):
        producer.produce(TOPIC, partition=0, value=bytes(100_000), on_delivery=lambda err, msg: None)
        producer.poll(0)
    producer.flush(30)


def test_a_failed_log_dir_moves_leadership_and_loses_no_acknowledged_record(
        cluster: LocalCluster, tmp_path: Path) -> None:
    first, second = tmp_path / "victim-a", tmp_path / "victim-b"
    _place(cluster, first, second)
    survivor = next(b for b in cluster.brokers if b.node_id != VICTIM)
    address = str(survivor.kafka_address)
    cluster.wait_until(lambda: all(p.leader_id == VICTIM and len(p.isr_nodes) == 3
                                   for p in _partitions(address).values()), 20, "the victim leading, full ISRs")
    before = {i: p.leader_epoch for i, p in _partitions(address).items()}
    with Writer(cluster.bootstrap, TOPIC, partitions=2) as writer:
        writer.wait_for_acks(300, 30)
        shutil.rmtree(second / f"{TOPIC}-0")  # the disk loses the partition's files
        _fill_segment(cluster.bootstrap)
        moved = cluster.wait_until(
            lambda: (p := _partitions(address)[0]).leader_id not in (VICTIM, -1) and p, 15,
            lambda: f"a new leader for partition 0: {_partitions(address)[0]}")
        assert VICTIM not in moved.isr_nodes and moved.offline_replicas == (VICTIM,)
        assert moved.leader_epoch > before[0]
        acked_at_failover = _acked_per_partition(writer)
        cluster.wait_until(lambda: all(n > acked_at_failover[p] + 100 for p, n in _acked_per_partition(writer).items()),
                           30, "both partitions acknowledging writes after the failover")
    assert not writer.failed, f"writes failed: {list(writer.failed.items())[:3]}"
    still = _partitions(address)[1]  # the victim's other directory serves on, as leader, with its ISR
    assert still.leader_id == VICTIM and still.leader_epoch == before[1] and len(still.isr_nodes) == 3
    assert_no_loss(writer.acked, {k: v for k, v in read_all(cluster.bootstrap, TOPIC, 2).items()
                                  if not v.startswith("\0")})
    victim = cluster.node(VICTIM)
    assert victim.is_running
    log_text = victim.log_path.read_text(errors="replace")
    assert "Traceback" not in log_text, log_text[log_text.index("Traceback") - 2000:][:6000]


def _acked_per_partition(writer: Writer) -> dict[int, int]:
    counts = dict.fromkeys((0, 1), 0)
    for partition, _ in list(writer.acked.values()):
        counts[partition] += 1
    return counts


def test_a_failure_the_controller_cannot_hear_of_stops_the_broker(cluster: LocalCluster, tmp_path: Path) -> None:
    """With two of the three voters down there is no controller to tell: the victim stops once its failed
    directory has gone unreported for log.dir.failure.timeout.ms, with the reason, as Kafka's broker does."""
    first, second = tmp_path / "victim-a", tmp_path / "victim-b"
    _place(cluster, first, second)
    victim = cluster.node(VICTIM)
    cluster.wait_until(lambda: all(p.leader_id == VICTIM for p in _partitions(str(victim.kafka_address)).values()),
                       20, "the victim leading both partitions")
    for node in cluster.brokers:
        if node.node_id != VICTIM:
            node.stop()
    shutil.rmtree(second / f"{TOPIC}-0")
    failed_at = time.monotonic()
    _fill_segment(str(victim.kafka_address), acks="1")  # no quorum, so no ISR change: the victim still appends
    cluster.wait_until(lambda: not victim.is_running, 30, lambda: f"the victim stopped:\n{victim.log_tail()}")
    assert time.monotonic() - failed_at >= REPORT_TIMEOUT_MS / 1000 - 1  # not before the timeout (less a poll)
    assert victim.exit_code == 1
    tail = victim.log_tail(60)
    assert "is offline after an I/O error" in tail and f"log.dir.failure.timeout.ms={REPORT_TIMEOUT_MS}" in tail
    assert "error: broker stopped" in tail, tail
