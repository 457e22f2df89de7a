"""Transactions on a real 3-node cluster: markers written on other brokers' partitions, KIP-890 checks asked of a
remote coordinator, and the transaction coordinator failing over mid-transaction. Real clients (confluent-kafka).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.coordinator.record_codec import partition_for
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.messages import partition_of, value_of
from tests.support.replicated import FAST_FAILOVER

pytestmark = pytest.mark.slow

FAST = {**FAST_FAILOVER, "offsets.topic.num.partitions": "3", "transaction.state.log.num.partitions": "3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}
TOPIC = "txn-out"
PARTITIONS = 6


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, overrides=FAST) as started:
        started.active_controller(timeout_s=30)
        admin = AdminClient({"bootstrap.servers": started.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(30)
        yield started


def producer(bootstrap: str, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "enable.metrics.push": False,
                  "transaction.timeout.ms": 20_000, "message.timeout.ms": 20_000})
    p.init_transactions(30)
    return p


def send(p: Producer, tag: str, count: int) -> None:
    for i in range(count):
        p.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=i % PARTITIONS)
    p.flush(30)


def read_committed(bootstrap: str, expected: int, timeout_s: float = 30.0) -> list[str]:
    """Every committed value, once the read_committed end offsets are reached (and at least `expected`)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "isolation.level": "read_committed",
                        "enable.auto.commit": False, "enable.metrics.push": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[str] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and (len(at_end) < PARTITIONS or len(values) < expected):
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error:
                if error.code() == -191:  # _PARTITION_EOF: reached the last stable offset
                    at_end.add(partition_of(message))
                continue
            at_end.discard(partition_of(message))
            values.append(value_of(message).decode())
    finally:
        consumer.close()
    return values


def coordinator_of(cluster: LocalCluster, transactional_id: str) -> int:
    partition = partition_for(transactional_id, 3)
    meta = metadata_at(str(cluster.brokers[0].kafka_address), ["__transaction_state"])
    leader: int = next(p.leader_id for t in meta.topics for p in t.partitions if p.partition_index == partition)
    return leader


def test_commit_and_abort_across_every_broker(cluster: LocalCluster) -> None:
    p = producer(cluster.bootstrap, "spread")
    for tag, commit in (("c1", True), ("a1", False), ("c2", True)):
        p.begin_transaction()
        send(p, tag, 60)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    values = read_committed(cluster.bootstrap, 120)
    assert sorted(values) == sorted([f"c1-{i}" for i in range(60)] + [f"c2-{i}" for i in range(60)])


def test_coordinator_failover_mid_transaction_leaves_all_or_nothing(cluster: LocalCluster) -> None:
    p = producer(cluster.bootstrap, "failover")
    p.begin_transaction()
    send(p, "before", 30)
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, "open", 30)
    victim = coordinator_of(cluster, "failover")
    cluster.node(victim).kill()
    try:
        p.commit_transaction(60)
        committed = True
    except KafkaException as exc:
        assert exc.args[0].txn_requires_abort() or exc.args[0].retriable(), exc
        p.abort_transaction(60)
        committed = False
    # Whatever the outcome, the transaction is whole or absent, and the next one works.
    p.begin_transaction()
    send(p, "after", 30)
    p.commit_transaction(60)
    cluster.node(victim).restart()
    values = read_committed(cluster.bootstrap, 60 + (30 if committed else 0))
    expected = [f"before-{i}" for i in range(30)] + [f"after-{i}" for i in range(30)]
    if committed:
        expected += [f"open-{i}" for i in range(30)]
    assert sorted(values) == sorted(expected)
