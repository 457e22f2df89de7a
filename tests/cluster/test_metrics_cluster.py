"""`/metrics` in a three-node cluster. Consumer lag: a group's coordinator reports the lag of every partition the
group committed offsets for, including those other brokers lead (it asks their leaders), so that summing the lag
over the nodes gives the group's whole lag, as kafka_exporter would report it. Replication: a follower stopped
and started again shows as an ISR shrink, an under-replicated partition and an ISR expand on the leader; the
leaders' fetch sessions show how many fetchers (`num.replica.fetchers`) each follower runs towards them."""

from __future__ import annotations

import functools
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.net.ports import free_ports
from moldau.replication.fetcher_ids import fetcher_id
from tests.compat.test_cli import ok
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.cluster import LocalCluster
from tests.support.metrics_scrape import Scrape

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

FAST = {"controller.quorum.election.timeout.ms": "300", "broker.heartbeat.interval.ms": "300",
        "broker.session.timeout.ms": "2500", "replica.lag.time.max.ms": "2000",
        "group.initial.rebalance.delay.ms": "0"}
TOPIC, GROUP, PARTITIONS, PER_PARTITION = "lagging", "lag-across-brokers", 6, 10
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[int, str]]]:
    nodes = LocalCluster(tmp_path_factory.mktemp("metrics-cluster"), 3, overrides=FAST)
    urls = {}
    for node, port in zip(nodes.brokers, free_ports(len(nodes.brokers)), strict=True):
        node.overrides["console.listeners"] = f"http://127.0.0.1:{port}"
        urls[node.node_id] = f"http://127.0.0.1:{port}/metrics"
    with nodes:
        nodes.active_controller()
        yield nodes, urls


def test_lag_covers_partitions_led_by_other_brokers(cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, urls = cluster
    create_topic(nodes.bootstrap, TOPIC, partitions=PARTITIONS)
    ck_produce(nodes.bootstrap, TOPIC, [{"value": b"v", "partition": p}
                                        for p in range(PARTITIONS) for _ in range(PER_PARTITION)])
    consumer = Consumer({"bootstrap.servers": nodes.bootstrap, "group.id": GROUP})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, p) for p in range(PARTITIONS)], asynchronous=False)
    finally:
        consumer.close()
    expected = {str(p): float(PER_PARTITION - p) for p in range(PARTITIONS)}
    seen: list[dict[str, float]] = [{}]

    def lag_everywhere() -> dict[int, set[str]] | None:
        lags = seen[0] = {}
        led: dict[int, set[str]] = {}
        for node_id, url in urls.items():
            scrape = Scrape(url)
            for labels, value in scrape.labelled("kafka_consumergroup_lag", consumergroup=GROUP).items():
                lags[dict(labels)["partition"]] = value
            led[node_id] = {dict(labels)["partition"] for labels in
                            scrape.labelled("kafka_topic_partition_current_offset", topic=TOPIC)}
        return led if lags == expected else None

    led = nodes.wait_until(lag_everywhere, 20, lambda: f"the lag of every partition, not {seen[0]}")
    assert sum(1 for partitions in led.values() if partitions) >= 2, led  # leaders on several brokers
    sums = [Scrape(url).get("kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC)
            for url in urls.values()]
    assert [s for s in sums if s is not None] == [sum(expected.values())]  # from the coordinator only


def test_a_stopped_follower_shows_as_isr_shrink_and_expand(cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, urls = cluster
    topic = "replicated-metrics"
    admin = AdminClient({"bootstrap.servers": nodes.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
    ck_produce(nodes.bootstrap, topic, [{"value": b"v"}], acks="all")
    leader = admin.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    controller = nodes.active_controller().leader_id
    follower = next(n for n in nodes.brokers if n.node_id not in (leader, controller))
    # Partitions whose only replica is the follower go offline with it (the lag test's topic has one replica).
    alone = sum(1 for t in admin.list_topics(timeout=10).topics.values() for p in t.partitions.values()
                if list(p.replicas) == [follower.node_id])
    before = Scrape(urls[leader])
    shrinks = before.value("kafka_server_replicamanager_isrshrinks_total")
    expands = before.value("kafka_server_replicamanager_isrexpands_total")
    follower.stop()
    try:
        ck_produce(nodes.bootstrap, topic, [{"value": b"v"}], acks="1")
        nodes.wait_until(lambda: Scrape(urls[leader]).value("kafka_server_replicamanager_underreplicatedpartitions")
                         >= 1 or None, 20, "the leader to report its partition under-replicated")
        assert Scrape(urls[leader]).value("kafka_server_replicamanager_isrshrinks_total") >= shrinks + 1
        nodes.wait_until(lambda: Scrape(urls[controller]).value(
            "kafka_controller_kafkacontroller_offlinepartitionscount") == alone or None, 20,
            f"the controller to count {alone} offline partitions")
    finally:
        follower.start()
    nodes.wait_until(lambda: Scrape(urls[leader]).value("kafka_server_replicamanager_isrexpands_total")
                     >= expands + 1 or None, 30, "the leader to report the follower back in the ISR")
    nodes.wait_until(lambda: Scrape(urls[leader]).value("kafka_server_replicamanager_underreplicatedpartitions")
                     == 0 or None, 30, "every partition the leader leads fully replicated again")
    nodes.wait_until(lambda: Scrape(urls[controller]).value(
        "kafka_controller_kafkacontroller_offlinepartitionscount") == 0 or None, 20, "no partition offline")


def _set_replica_fetchers(cluster: LocalCluster, value: str | None) -> None:
    """num.replica.fetchers as a cluster-wide dynamic config, as kafka-configs.sh sets it (None deletes it: back to
    the default of 1)."""
    change = ["--delete-config", "num.replica.fetchers"] if value is None else [
        "--add-config", f"num.replica.fetchers={value}"]
    ok(cluster, "configs", "--entity-type", "brokers", "--entity-default", "--alter", *change)


def _fetchers_towards(admin: AdminClient, leader: int, num_fetchers: int) -> int:
    """How many fetchers the other brokers run towards `leader` with `num_fetchers` per leader: per follower, one
    for each fetcher id among the partitions it copies from `leader` (Kafka's spread)."""
    ids: dict[int, set[int]] = {}
    for name, topic in admin.list_topics(timeout=10).topics.items():
        for p in topic.partitions.values():
            if p.leader == leader:
                for follower in p.replicas:
                    if follower != leader:
                        ids.setdefault(follower, set()).add(fetcher_id(name, p.id, num_fetchers))
    return sum(len(s) for s in ids.values())


def _sessions_reach(urls: dict[int, str], wanted: dict[int, float]) -> bool | None:
    return all(Scrape(urls[n]).value(SESSIONS) >= count for n, count in wanted.items()) or None


def test_num_replica_fetchers_spreads_partitions_over_fetch_sessions_and_changes_at_runtime(
        cluster: tuple[LocalCluster, dict[int, str]]) -> None:
    nodes, urls = cluster
    topic, partitions = "fetcher-spread", 12
    admin = AdminClient({"bootstrap.servers": nodes.bootstrap})
    # Every record acknowledged only once both followers copied it: each fetcher's partitions must be fetched.
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "3"})])[topic].result(30)
    records = [{"value": b"v", "partition": p} for p in range(partitions)]
    ck_produce(nodes.bootstrap, topic, records, acks="all")
    try:
        for num_fetchers in (3, 1):
            before = {node_id: Scrape(url).value(SESSIONS) for node_id, url in urls.items()}
            _set_replica_fetchers(nodes, str(num_fetchers))
            # Each follower starts its new fetchers over, each with a full fetch that opens a new session on the
            # leader (the old sessions stay until the leader evicts them, as in Kafka).
            wanted = {node_id: before[node_id] + _fetchers_towards(admin, node_id, num_fetchers) for node_id in urls}
            nodes.wait_until(functools.partial(_sessions_reach, urls, wanted), 30,
                             f"fetch sessions {wanted} with {num_fetchers} fetchers per leader")
            ck_produce(nodes.bootstrap, topic, records, acks="all")
        assert sum(_fetchers_towards(admin, n, 3) for n in urls) > sum(_fetchers_towards(admin, n, 1) for n in urls)
    finally:
        _set_replica_fetchers(nodes, None)
    got = ck_consume(nodes.bootstrap, topic, 3 * partitions)
    assert sorted(r.partition for r in got) == sorted(list(range(partitions)) * 3)
