"""Replicated partitions on real multi-process clusters: failover without loss, min.insync.replicas, ISR recovery,
and the group coordinator moving with its partition's leadership. Real clients (confluent-kafka) throughout.

Timings are shortened (`FAST_FAILOVER`) so that a failure is noticed in about a second.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.net.ports import free_ports
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.messages import value_of
from tests.support.metrics_scrape import Scrape
from tests.support.replicated import FAST_FAILOVER, Writer, assert_no_loss, read_all

pytestmark = pytest.mark.slow

FAST = {**FAST_FAILOVER, "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
TOPIC = "replicated"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, overrides=FAST) as started:
        started.active_controller(timeout_s=30)
        yield started


def create_topic(bootstrap: str, name: str, partitions: int, replicas: int = 3, min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, replicas, config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([topic])[name].result(timeout=30)


def partitions_of(address: str, topic: str) -> dict[int, Any]:
    """Partition index -> Metadata partition (leader_id, replica_nodes, isr_nodes) as the node sees it."""
    meta = metadata_at(address, [topic])
    return {p.partition_index: p for t in meta.topics if t.name == topic for p in t.partitions}


def test_killing_any_one_broker_under_load_loses_no_acknowledged_record(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, 3)
    survivor = cluster.brokers[0]
    with Writer(cluster.bootstrap, TOPIC) as writer:
        writer.wait_for_acks(300, 30)
        victim = partitions_of(str(survivor.kafka_address), TOPIC)[1].leader_id
        survivor = next(b for b in cluster.brokers if b.node_id != victim)
        cluster.node(victim).kill()
        acked_before = len(writer.acked)
        cluster.wait_until(
            lambda: all(p.leader_id not in (victim, -1)
                        for p in partitions_of(str(survivor.kafka_address), TOPIC).values()),
            20, f"new leaders for the partitions broker {victim} led")
        writer.wait_for_acks(acked_before + 300, 30)
    assert not writer.failed, f"writes failed: {list(writer.failed.items())[:3]}"
    assert_no_loss(writer.acked, read_all(cluster.bootstrap, TOPIC, 3))
    cluster.node(victim).start()
    cluster.wait_until(
        lambda: all(len(p.isr_nodes) == 3 for p in partitions_of(str(survivor.kafka_address), TOPIC).values()),
        30, "the restarted broker back in every ISR")


def test_followers_replicate_in_incremental_fetch_sessions(tmp_path: Path) -> None:
    """Each follower keeps one fetch session per leader (KIP-227): every node leading partitions holds the sessions
    of its two followers, with the partitions they follow from it, while acks=all writes go through."""
    consoles = dict(zip((1, 2, 3), free_ports(3), strict=True))
    per_node = {node_id: {"console.listeners": f"http://127.0.0.1:{port}"} for node_id, port in consoles.items()}
    with LocalCluster(tmp_path, 3, overrides=FAST, node_overrides=per_node) as cluster:
        cluster.active_controller(timeout_s=30)
        create_topic(cluster.bootstrap, TOPIC, 6)
        with Writer(cluster.bootstrap, TOPIC) as writer:
            writer.wait_for_acks(600, 30)
        assert not writer.failed, f"writes failed: {list(writer.failed.items())[:3]}"
        assert_no_loss(writer.acked, read_all(cluster.bootstrap, TOPIC, 6))
        led = {node_id: 0 for node_id in consoles}
        for p in partitions_of(cluster.bootstrap.split(",")[0], TOPIC).values():
            led[p.leader_id] += 1

        def sessions_cover_every_follower() -> bool:
            for node_id, port in consoles.items():
                scrape = Scrape(f"http://127.0.0.1:{port}/metrics")
                sessions = scrape.value("kafka_server_fetchsessioncache_numincrementalfetchsessions")
                cached = scrape.value("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached")
                # Two followers of each partition led here (and of __consumer_offsets partitions, if any).
                if led[node_id] and (sessions < 2 or cached < 2 * led[node_id]):
                    return False
            return True

        cluster.wait_until(sessions_cover_every_follower, 20, "a fetch session of each follower on each leader")


def test_group_carries_on_from_committed_offsets_when_its_coordinator_dies(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, 3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(300):
        producer.produce(TOPIC, key=str(i).encode(), value=f"m{i}".encode())
    producer.flush(30)
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": "survivors", "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    consumed_first = consume(consumer, 150, 30)
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(TOPIC, p) for p in range(3)], timeout=10)}
    consumer.close()

    coordinator = find_coordinator(cluster.bootstrap, "survivors")
    cluster.node(coordinator).kill()
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    try:
        consumed_after = consume(consumer, 300 - len(consumed_first), 60)
        resumed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(3)], timeout=10)}
    finally:
        consumer.close()
    assert resumed == committed, "the committed offsets survived the coordinator's broker"
    assert not set(consumed_first) & set(consumed_after), "the group resumed from its committed offsets"
    assert len(set(consumed_first) | set(consumed_after)) == 300


def consume(consumer: Consumer, count: int, timeout_s: float) -> list[str]:
    values: list[str] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(value_of(msg).decode())
    assert len(values) >= count, f"consumed {len(values)} of {count}"
    return values


def find_coordinator(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    return int(description.coordinator.id)


def test_two_brokers_down_refuses_writes_but_serves_committed_reads(tmp_path: Path) -> None:
    # A separate controller keeps the metadata quorum alive while two of the three brokers are down.
    with LocalCluster(tmp_path, controllers=1, brokers=3, overrides=FAST) as cluster:
        cluster.active_controller(timeout_s=30)
        create_topic(cluster.bootstrap, TOPIC, 1)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "message.timeout.ms": 8000})
        for i in range(100):
            producer.produce(TOPIC, value=f"c{i}".encode())
        assert producer.flush(30) == 0
        survivor, *victims = cluster.brokers
        leader = partitions_of(str(survivor.kafka_address), TOPIC)[0].leader_id
        if leader != survivor.node_id:  # keep the leader alive, so the test is about the ISR, not election
            survivor, victims = cluster.node(leader), [b for b in cluster.brokers if b.node_id != leader]
        for broker in victims:
            broker.kill()
        address = str(survivor.kafka_address)
        cluster.wait_until(lambda: partitions_of(address, TOPIC)[0].isr_nodes == (survivor.node_id,), 20,
                           "the ISR shrunk to the survivor")
        # No retries, so the broker's answer reaches the application instead of being retried until a timeout.
        once = Producer({"bootstrap.servers": address, "acks": "all", "retries": 0, "enable.idempotence": False})
        errors: list[Any] = []
        once.produce(TOPIC, value=b"refused", on_delivery=lambda err, msg: errors.append(err))
        once.flush(15)
        assert errors and errors[0] is not None
        assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors[0]
        values = sorted(read_all(survivor_bootstrap(survivor), TOPIC, 1).values(), key=lambda v: int(v[1:]))
        assert values == [f"c{i}" for i in range(100)]
        for broker in victims:
            broker.start()
        cluster.wait_until(lambda: len(partitions_of(address, TOPIC)[0].isr_nodes) == 3, 30, "the ISR recovered")
        ok: list[Any] = []
        producer.produce(TOPIC, value=b"accepted", on_delivery=lambda err, msg: ok.append(err))
        producer.flush(15)
        assert ok == [None]


def survivor_bootstrap(node: Any) -> str:
    return str(node.kafka_address)


def test_preferred_leaders_come_back_by_elect_leaders_and_by_automatic_rebalancing(tmp_path: Path) -> None:
    rebalance = {**FAST, "leader.imbalance.check.interval.seconds": "1"}
    with LocalCluster(tmp_path, 3, overrides=rebalance, node_overrides={
            n: {"auto.leader.rebalance.enable": "false"} for n in (1, 2, 3)}) as cluster:
        cluster.active_controller(timeout_s=30)
        create_topic(cluster.bootstrap, TOPIC, 3)
        address = str(cluster.brokers[0].kafka_address)
        preferred = preferred_leaders(cluster, address)
        moved = moved_leadership(cluster, preferred)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, moved)]).result(timeout=30)
        assert result[TopicPartition(TOPIC, moved)] is None
        cluster.wait_until(lambda: partitions_of(address, TOPIC)[moved].leader_id == preferred[moved], 10,
                           "the preferred replica to lead again")
        again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(TOPIC, moved)]).result(timeout=30)
        assert again[TopicPartition(TOPIC, moved)].code() == KafkaError.ELECTION_NOT_NEEDED

    with LocalCluster(tmp_path / "auto", 3, overrides=rebalance) as cluster:
        cluster.active_controller(timeout_s=30)
        create_topic(cluster.bootstrap, TOPIC, 3)
        address = str(cluster.brokers[0].kafka_address)
        preferred = preferred_leaders(cluster, address)
        moved = moved_leadership(cluster, preferred)
        cluster.wait_until(lambda: partitions_of(address, TOPIC)[moved].leader_id == preferred[moved], 20,
                           "automatic rebalancing to give leadership back")


def preferred_leaders(cluster: LocalCluster, address: str) -> dict[int, int]:
    """Partition -> first replica, once the broker at `address` knows every partition of the new topic (the
    broker that created it may have applied the change before this one)."""
    parts = cluster.wait_until(lambda: partitions_of(address, TOPIC) if len(partitions_of(address, TOPIC)) == 3
                               else None, 10, "the new topic on every broker")
    return {i: p.replica_nodes[0] for i, p in parts.items()}


def moved_leadership(cluster: LocalCluster, preferred: dict[int, int]) -> int:
    """Restart the preferred leader of partition 0 and wait until it is back in the ISR while another replica
    leads; returns the partition."""
    victim = preferred[0]
    survivor = next(b for b in cluster.brokers if b.node_id != victim)
    address = str(survivor.kafka_address)
    cluster.node(victim).kill()
    cluster.wait_until(lambda: partitions_of(address, TOPIC)[0].leader_id not in (victim, -1), 20,
                       "another leader for partition 0")
    cluster.node(victim).start()
    cluster.wait_until(lambda: victim in partitions_of(address, TOPIC)[0].isr_nodes, 30,
                       "the restarted broker back in the ISR")
    return 0
