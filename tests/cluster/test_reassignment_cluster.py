"""Partition reassignment on a real four-node cluster: `moldau partitions reassign` moves every replica off broker 1
onto broker 4 while an idempotent acks=all producer keeps writing, and no acknowledged record is lost.

Timings are shortened as in the other cluster tests: brokers heartbeat every 300 ms, a follower leaves the ISR
after 2 s without catching up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import LocalCluster, metadata_at

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
}
TOPIC = "growing"
PARTITIONS = 3
ROOT = Path(__file__).resolve().parents[2]


def moldau(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=ROOT)


def replicas(address: str) -> dict[int, tuple[int, ...]]:
    meta = metadata_at(address, [TOPIC])
    return {p.partition_index: tuple(p.replica_nodes) for t in meta.topics for p in t.partitions}


class Writer:
    """An idempotent acks=all producer writing unique values from a thread, remembering every acknowledgement."""

    def __init__(self, bootstrap: str) -> None:
        self.acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failed: dict[str, str] = {}
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 60_000, "retry.backoff.ms": 50})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            value = f"v{sent}"
            sent += 1
            self._producer.produce(TOPIC, value=value.encode(), partition=sent % PARTITIONS,
                                   on_delivery=self._delivered)
            self._producer.poll(0.002)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            self.failed[msg.value().decode()] = str(err)

    def wait_for_acks(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"{len(self.acked)} of {count} acknowledged; {self.failed}"
            time.sleep(0.05)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        assert self._producer.flush(60) == 0


def read_all(bootstrap: str) -> dict[tuple[int, int], str]:
    """(partition, offset) -> value of every committed record."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    records: dict[tuple[int, int], str] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            records[(msg.partition(), msg.offset())] = msg.value().decode()
            at_end.discard(msg.partition())
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, "did not reach the end of every partition"
    return records


def test_moving_replicas_to_a_new_broker_under_load_loses_nothing(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 4, overrides=FAST) as cluster:
        cluster.active_controller(timeout_s=30)
        bootstrap = cluster.bootstrap
        address = cluster[4].kafka_address
        assert address is not None
        # Placed on brokers 1-3 only, as if broker 4 had just joined; broker 1 leads partition 0.
        assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
        topic = NewTopic(TOPIC, num_partitions=PARTITIONS, config={"min.insync.replicas": "2"},
                         replica_assignment=[assignment[p] for p in range(PARTITIONS)])
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([topic])[TOPIC].result(timeout=30)
        cluster.wait_until(lambda: replicas(address) or None, 10, "the topic on every broker")

        with Writer(bootstrap) as writer:
            writer.wait_for_acks(2000)
            # Retire broker 1: every replica it holds moves to broker 4.
            generated = moldau("partitions", "reassign", "-b", bootstrap, "--generate", "--topics", TOPIC,
                               "--brokers", "2,3,4")
            assert generated.returncode == 0, generated.stderr
            plan = json.loads(generated.stdout)
            assert {(e["partition"], tuple(sorted(e["replicas"]))) for e in plan["partitions"]} == {
                (p, (2, 3, 4)) for p in range(PARTITIONS)}
            plan_file = tmp_path / "plan.json"
            plan_file.write_text(generated.stdout)

            executed = moldau("partitions", "reassign", "-b", bootstrap, "--execute", "--plan", str(plan_file),
                              "--timeout", "60")
            assert executed.returncode == 0, executed.stdout + executed.stderr
            assert "reassignment complete" in executed.stdout
            done = len(writer.acked)
            writer.wait_for_acks(done + 1000)  # and writes go on after the move

        assert not writer.failed, list(writer.failed.items())[:3]
        verified = moldau("partitions", "reassign", "-b", bootstrap, "--verify", "--plan", str(plan_file))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        for node in cluster.brokers:
            assert node.kafka_address is not None
            cluster.wait_until(lambda a=node.kafka_address: all(set(r) == {2, 3, 4} for r in replicas(a).values())
                               or None, 10, f"broker {node.node_id} to see the new replicas")

        records = read_all(bootstrap)
        lost = {v: where for v, where in writer.acked.items() if records.get(where) != v}
        assert not lost, f"{len(lost)} acknowledged records lost, e.g. {list(lost.items())[:5]}"
        assert len(set(records.values())) == len(records), "a record was stored twice"

        # Broker 4 holds full copies; broker 1 has deleted its own.
        for p in range(PARTITIONS):
            moved = cluster[4].data_dir / f"{TOPIC}-{p}"
            assert sum(f.stat().st_size for f in moved.glob("*.log")) > 0, f"no data in {moved}"
            cluster.wait_until(lambda p=p: not (cluster[1].data_dir / f"{TOPIC}-{p}").exists() or None, 10,
                               f"broker 1 to delete {TOPIC}-{p}")
