"""Partition reassignment on a real four-node cluster: `moldau partitions reassign` moves every replica off broker 1
onto broker 4 while an idempotent acks=all producer keeps writing, and no acknowledged record is lost.

Timings are shortened as in the other cluster tests: brokers heartbeat every 300 ms, a follower leaves the ISR
after 2 s without catching up.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from moldau.net.ports import free_ports
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.metrics_scrape import Scrape
from tests.support.replicated import FAST_FAILOVER, Writer, assert_no_loss, read_all

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

TOPIC = "growing"
PARTITIONS = 3
ROOT = Path(__file__).resolve().parents[2]


def moldau(*args: str, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", *args], capture_output=True, text=True,
                          timeout=timeout_s, cwd=ROOT)


def sees_new_replicas(address: str) -> bool | None:
    """True once the broker at `address` answers every partition with replicas 2, 3 and 4."""
    return all(set(r) == {2, 3, 4} for r in replicas(address).values()) or None


def replicas(address: str, topic: str = TOPIC) -> dict[int, tuple[int, ...]]:
    meta = metadata_at(address, [topic])
    return {p.partition_index: tuple(p.replica_nodes) for t in meta.topics for p in t.partitions}


def test_moving_replicas_to_a_new_broker_under_load_loses_nothing(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, 4, overrides=FAST_FAILOVER) as cluster:
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

        with Writer(bootstrap, TOPIC, PARTITIONS) as writer:
            writer.wait_for_acks(2000, report=cluster.report)
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
            writer.wait_for_acks(done + 1000, report=cluster.report)  # and writes go on after the move

        assert not writer.failed, list(writer.failed.items())[:3]
        verified = moldau("partitions", "reassign", "-b", bootstrap, "--verify", "--plan", str(plan_file))
        assert verified.returncode == 0, verified.stdout + verified.stderr
        for node in cluster.brokers:
            assert node.kafka_address is not None
            cluster.wait_until(partial(sees_new_replicas, node.kafka_address), 10,
                               f"broker {node.node_id} to see the new replicas")

        assert_no_loss(writer.acked, read_all(bootstrap, TOPIC, PARTITIONS))

        # Broker 4 holds full copies; broker 1 has deleted its own.
        def deleted_from_broker_1(p: int) -> bool | None:
            return not (cluster[1].data_dir / f"{TOPIC}-{p}").exists() or None

        for p in range(PARTITIONS):
            moved = cluster[4].data_dir / f"{TOPIC}-{p}"
            assert sum(f.stat().st_size for f in moved.glob("*.log")) > 0, f"no data in {moved}"
            cluster.wait_until(partial(deleted_from_broker_1, p), 10, f"broker 1 to delete {TOPIC}-{p}")


THROTTLED = "throttled"
THROTTLE_BYTES_PER_S = 1_000_000
COPIED_BYTES = 5_000_000
FETCH_BYTES = THROTTLE_BYTES_PER_S // 10


def _configs(admin: AdminClient, resource: ConfigResource) -> dict[str, str | None]:
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


@pytest.mark.exclusive  # measures how long a throttled copy takes
def test_a_throttled_reassignment_copies_at_the_throttled_rate_and_then_clears_the_throttle(tmp_path: Path) -> None:
    """`--execute --throttle` (Kafka's option): the new replica copies 5 MB at 1 MB/s, not as fast as it can, then
    the topic's throttled replicas and the brokers' rates are removed. Rates are measured over two windows of a
    second, so that the first second's burst is all the copy gets for free. Meanwhile the leader's and the
    follower's `/metrics` show the throttled bytes' rates.

    The rate's bound follows from Kafka's way of measuring: until `window.num - 1` windows are full the span counts
    as that many, so just before the first window closes the copy may have moved two windows' worth, and a fetch
    is let through whenever the rate is under the limit, adding up to a whole fetch beyond it. Fetches and the
    producer's batches are therefore a tenth of the rate (the peak is then at most 2.1x the limit); with Kafka's
    1 MiB default a single fetch is a second's quota and the peak reached 3x on a slow machine."""
    windows = {"replication.quota.window.num": "2", "replication.quota.window.size.seconds": "1",
               "replica.fetch.max.bytes": str(FETCH_BYTES)}
    cluster = LocalCluster(tmp_path, 3, overrides={**FAST_FAILOVER, **windows})
    metrics = {}
    for node, port in zip(cluster.brokers, free_ports(len(cluster.brokers)), strict=True):
        node.overrides["console.listeners"] = f"http://127.0.0.1:{port}"
        metrics[node.node_id] = f"http://127.0.0.1:{port}/metrics"
    with cluster:
        cluster.active_controller(timeout_s=30)
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(THROTTLED, num_partitions=1, replica_assignment=[[1]])])[
            THROTTLED].result(timeout=30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all",
                             "batch.size": FETCH_BYTES})
        value = b"x" * 10_000
        for _ in range(COPIED_BYTES // len(value)):
            producer.produce(THROTTLED, value)
            producer.poll(0)
        assert producer.flush(60) == 0

        plan_file = tmp_path / "throttled-plan.json"
        plan_file.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": THROTTLED, "partition": 0, "replicas": [1, 2]}]}))
        started = time.monotonic()
        command = [sys.executable, "-m", "moldau", "partitions", "reassign", "-b", bootstrap, "--execute", "--plan",
                   str(plan_file), "--throttle", str(THROTTLE_BYTES_PER_S), "--timeout", "90"]
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as run:
            rates: dict[str, float] = {}
            while run.poll() is None:
                rates["leader"] = max(rates.get("leader", 0.0), Scrape(metrics[1]).value(
                    "kafka_server_leaderreplication_byte_rate"))
                rates["follower"] = max(rates.get("follower", 0.0), Scrape(metrics[2]).value(
                    "kafka_server_followerreplication_byte_rate"))
                time.sleep(0.2)
            out, err = run.communicate(timeout=120)
        elapsed = time.monotonic() - started
        executed = subprocess.CompletedProcess(command, run.returncode, out, err)
        assert executed.returncode == 0, executed.stdout + executed.stderr
        # Each side counts what it moved for the throttled replica: about the limit, never far beyond it.
        assert 0 < rates["leader"] < 2.5 * THROTTLE_BYTES_PER_S, rates
        assert 0 < rates["follower"] < 2.5 * THROTTLE_BYTES_PER_S, rates
        assert f"throttle limit is {THROTTLE_BYTES_PER_S} B/s on brokers 1,2" in executed.stdout
        assert "throttle removed" in executed.stdout
        # 5 MB at 1 MB/s, less a second's burst: at least 3 s (unthrottled it takes well under one here).
        assert elapsed >= 3.0, (elapsed, executed.stdout)
        assert replicas(bootstrap.split(",")[0], THROTTLED) == {0: (1, 2)}

        topic_configs = _configs(admin, ConfigResource(ResourceType.TOPIC, THROTTLED))
        assert topic_configs["leader.replication.throttled.replicas"] == ""
        assert topic_configs["follower.replication.throttled.replicas"] == ""
        for broker in (1, 2):
            limits = _configs(admin, ConfigResource(ResourceType.BROKER, str(broker)))
            assert limits["leader.replication.throttled.rate"] == str(2**63 - 1)
            assert limits["follower.replication.throttled.rate"] == str(2**63 - 1)
