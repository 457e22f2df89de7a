"""Multi-process clusters on loopback: the metadata quorum elects a controller, survives losing it, fences
brokers that go silent and lets them back in, and real clients follow leadership through Metadata.

Timeouts are shortened (elections in 0.3-0.6 s, broker sessions of 2.5 s) so each scenario runs in seconds;
the code paths are the production ones.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaProducer

from tests.support.cluster import LocalCluster, QuorumInfo, metadata_at
from tests.support.messages import value_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

FAST = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, overrides=FAST) as started:
        yield started


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def leaders(address: str, topic: str) -> dict[int, int]:
    """Partition -> leader id, as the broker at `address` answers Metadata."""
    answer = metadata_at(address, [topic])
    (found,) = answer.topics
    return {p.partition_index: p.leader_id for p in found.partitions}


def live_brokers(address: str) -> set[int]:
    return {b.node_id for b in metadata_at(address).brokers}


def other_than(cluster: LocalCluster, node_id: int) -> str:
    return next(n.kafka_address for n in cluster.brokers if n.node_id != node_id and n.kafka_address)


def new_leader(cluster: LocalCluster, old: int) -> QuorumInfo:
    return cluster.wait_until(lambda: _leader_other_than(cluster, old), 30, f"a controller other than {old}")


def _leader_other_than(cluster: LocalCluster, old: int) -> QuorumInfo | None:
    found = cluster.agreed_leader()
    return found if found is not None and found.leader_id != old else None


def test_three_nodes_elect_one_controller_and_spread_partitions(cluster: LocalCluster) -> None:
    active = cluster.active_controller()
    assert active.leader_id in (1, 2, 3)
    assert {v.replica_id for v in active.voters} == {1, 2, 3}
    follower = next(n for n in cluster.brokers if n.node_id != active.leader_id)
    assert follower.kafka_address is not None
    create_topic(follower.kafka_address, "spread", 6)  # forwarded to the active controller
    for node in cluster.brokers:  # every broker answers with the same, complete placement
        assert node.kafka_address is not None
        placed = cluster.wait_until(partial(placement, node.kafka_address), 10, "placement")
        assert Counter(placed.values()) == {1: 2, 2: 2, 3: 2}
    assert live_brokers(cluster.bootstrap.split(",")[0]) == {1, 2, 3}

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True})
    for p in range(6):
        producer.produce("spread", value=f"v{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    assert sorted(_consume_all(cluster.bootstrap, "spread", 6, 6)) == [f"v{p}".encode() for p in range(6)]


def placement(address: str) -> dict[int, int] | None:
    """The leaders of "spread" as the broker at `address` answers them, once all six partitions have one."""
    return _complete(leaders(address, "spread"), 6)


def _complete(found: dict[int, int], count: int) -> dict[int, int] | None:
    """The placement once all `count` partitions have a leader, else None (not yet)."""
    return found if len(found) == count and all(leader >= 0 for leader in found.values()) else None


def _consume_all(bootstrap: str, topic: str, partitions: int, count: int, timeout_s: float = 30) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(value_of(message))
    finally:
        consumer.close()
    return values


def test_killing_the_active_controller_keeps_metadata_correct(cluster: LocalCluster) -> None:
    active = cluster.active_controller().leader_id
    survivor = other_than(cluster, active)
    create_topic(survivor, "kept", 6)
    before = cluster.wait_until(lambda: _complete(leaders(survivor, "kept"), 6), 10, "placement")

    cluster[active].kill()
    replacement = new_leader(cluster, active)
    assert replacement.leader_epoch > 0
    # Once the dead broker's session expires it is fenced: gone from Metadata, its partitions leaderless, the
    # others unchanged.
    cluster.wait_until(lambda: active not in live_brokers(survivor), 15, f"broker {active} to be fenced")
    after = leaders(survivor, "kept")
    assert after == {p: (-1 if leader == active else leader) for p, leader in before.items()}

    create_topic(survivor, "after-failover", 2)  # the new controller serves changes
    cluster.wait_until(lambda: _complete(leaders(survivor, "after-failover"), 2), 10, "the new topic")

    cluster[active].start()  # it comes back, registers again and leads its partitions again
    cluster.wait_until(lambda: leaders(survivor, "kept") == before, 30, "leadership to return")
    assert live_brokers(survivor) == {1, 2, 3}



def test_a_paused_controller_is_replaced_and_steps_down_when_it_resumes(cluster: LocalCluster) -> None:
    active = cluster.active_controller().leader_id
    survivor = other_than(cluster, active)
    cluster[active].pause()
    try:
        replacement = new_leader(cluster, active)
        create_topic(survivor, "while-paused", 3)
    finally:
        cluster[active].resume()
    # The old leader wakes up in an old epoch: it learns the new one and follows; exactly one leader remains.
    agreed = cluster.wait_until(lambda: _all_agree(cluster), 20, "all three controllers to agree")
    assert agreed.leader_epoch >= replacement.leader_epoch
    paused_node = cluster[active].kafka_address
    assert paused_node is not None
    cluster.wait_until(lambda: "while-paused" in {t.name for t in metadata_at(paused_node).topics}, 15,
                       "the resumed node to replay the topic created while it was paused")


def _all_agree(cluster: LocalCluster) -> QuorumInfo | None:
    views = cluster.quorum_views()
    found = cluster.agreed_leader()
    return found if found is not None and len(views) == 3 else None


def placed_beside_the_controller(cluster: LocalCluster, topic: str) -> tuple[int, str, dict[int, int]]:
    """Create a 3-partition topic through the active controller's broker; returns another broker's id (the one a
    test disturbs), the controller's address and the placement once every partition has a leader."""
    active = cluster.active_controller().leader_id
    victim = next(n.node_id for n in cluster.brokers if n.node_id != active)
    address = cluster[active].kafka_address
    assert address is not None
    create_topic(address, topic, 3)
    placement = cluster.wait_until(lambda: _complete(leaders(address, topic), 3), 10, "placement")
    return victim, address, placement


def test_a_cut_off_broker_is_fenced_and_readmitted(cluster: LocalCluster) -> None:
    victim, observer, before = placed_beside_the_controller(cluster, "fenced")

    cluster[victim].pause()  # silent: no heartbeats, no fetches
    try:
        cluster.wait_until(lambda: victim not in live_brokers(observer), 15, f"broker {victim} to be fenced")
        assert all(leader == -1 for p, leader in leaders(observer, "fenced").items() if before[p] == victim)
    finally:
        cluster[victim].resume()
    cluster.wait_until(lambda: victim in live_brokers(observer), 15, f"broker {victim} to be unfenced")
    cluster.wait_until(lambda: leaders(observer, "fenced") == before, 15, "its leaderships to return")



def test_clients_follow_leadership_through_metadata(cluster: LocalCluster) -> None:
    """A kafka-python and a confluent-kafka producer keep delivering to a partition whose leader goes away and
    comes back: they learn both changes from Metadata alone."""
    victim, address, placement = placed_beside_the_controller(cluster, "followed")
    partition = next(p for p, leader in placement.items() if leader == victim)

    confluent = Producer({"bootstrap.servers": cluster.bootstrap, "message.timeout.ms": 60000,
                          "topic.metadata.refresh.interval.ms": 500})
    python = KafkaProducer(bootstrap_servers=cluster.bootstrap, request_timeout_ms=5000, retries=20,
                           retry_backoff_ms=500, metadata_max_age_ms=1000, max_block_ms=60000)
    delivered: list[Any] = []
    cluster[victim].kill()
    cluster.wait_until(lambda: leaders(address, "followed")[partition] == -1, 15, "the partition to lose its leader")
    confluent.produce("followed", value=b"from-confluent", partition=partition,
                      on_delivery=lambda err, msg: delivered.append(err))
    future = python.send("followed", value=b"from-kafka-python", partition=partition)
    cluster[victim].start()
    assert confluent.flush(60) == 0 and delivered == [None]
    assert future.get(timeout=60).partition == partition
    python.close()
    values = _consume_all(cluster.bootstrap, "followed", 3, 2)
    assert sorted(values) == [b"from-confluent", b"from-kafka-python"]


def test_separate_controller_and_broker_roles(tmp_path: Path) -> None:
    with LocalCluster(tmp_path, controllers=1, brokers=2, overrides=FAST) as cluster:
        active = cluster.active_controller()
        assert {o.replica_id for o in active.observers} == {b.node_id for b in cluster.brokers}
        address = cluster.brokers[0].kafka_address
        assert address is not None
        create_topic(address, "brokers-only", 4)
        placed = cluster.wait_until(lambda: _complete(leaders(address, "brokers-only"), 4), 10, "placement")
        assert set(placed.values()) == {b.node_id for b in cluster.brokers}
        assert live_brokers(address) == {b.node_id for b in cluster.brokers}
        # Replicas are placed on both brokers, and both are in sync from the start.
        admin = AdminClient({"bootstrap.servers": address})
        admin.create_topics([NewTopic("two-replicas", 2, 2)])["two-replicas"].result(timeout=30)
        (topic,) = cluster.wait_until(lambda: metadata_at(address, ["two-replicas"]).topics, 10, "the topic")
        for p in topic.partitions:
            assert sorted(p.replica_nodes) == sorted(b.node_id for b in cluster.brokers)
            assert sorted(p.isr_nodes) == sorted(p.replica_nodes)
            assert p.leader_id == p.replica_nodes[0]



def test_a_broker_names_a_listed_controller_from_its_first_answer(tmp_path: Path) -> None:
    """A broker's heartbeat can say "unfenced" before the broker applied that record; it must not serve clients
    before it has, or its Metadata leaves itself out of the brokers while naming itself the controller, and an
    admin client waits for that controller until it times out. The race was lost in about one start of fifteen,
    so the broker is restarted several times and asked at once after each start."""
    with LocalCluster(tmp_path, controllers=1, brokers=2, overrides=FAST) as cluster:
        broker = cluster.brokers[0]
        for attempt in range(8):
            if attempt:
                broker.restart()
            address = broker.kafka_address
            assert address is not None
            answer = metadata_at(address)
            listed = {b.node_id for b in answer.brokers}
            assert broker.node_id in listed, f"start {attempt + 1}: brokers {listed} without the answering one"
            assert answer.controller_id in listed


def test_a_node_that_missed_many_changes_catches_up_from_a_snapshot(tmp_path: Path) -> None:
    """With snapshots every few KB, the leader's log start passes a stopped node's log end: on its return the
    node must fetch the snapshot (FetchSnapshot) rather than the log, and then see everything."""
    overrides = {**FAST, "metadata.log.max.record.bytes.between.snapshots": "2000"}
    with LocalCluster(tmp_path, 3, overrides=overrides) as cluster:
        active = cluster.active_controller().leader_id
        absent = next(n.node_id for n in cluster.brokers if n.node_id != active)
        address = cluster[active].kafka_address
        assert address is not None
        cluster[absent].stop()
        for i in range(12):
            create_topic(address, f"while-away-{i}", 2)
        snapshots = list((cluster[active].data_dir / "__cluster_metadata").glob("snapshot-*.checkpoint"))
        assert snapshots, "the leader should have taken a snapshot"
        cluster[absent].start()
        returned = cluster[absent].kafka_address
        assert returned is not None
        wanted = {f"while-away-{i}" for i in range(12)}
        cluster.wait_until(lambda: _topic_names(returned) >= wanted, 30, "the returning node to see every topic")
        assert "installing a metadata snapshot" in (cluster[absent].log_path.read_text())


def _topic_names(address: str) -> set[str]:
    return {t.name for t in metadata_at(address).topics}
