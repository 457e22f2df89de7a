"""Consumer lag in a three-node cluster: a group's coordinator reports the lag of every partition the group
committed offsets for, including those other brokers lead (it asks their leaders), so that summing the lag over
the nodes' `/metrics` gives the group's whole lag, as kafka_exporter would report it."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from moldau.net.ports import free_ports
from tests.support.clients import ck_produce, create_topic
from tests.support.cluster import LocalCluster
from tests.support.metrics_scrape import Scrape

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

FAST = {"controller.quorum.election.timeout.ms": "300", "broker.heartbeat.interval.ms": "300",
        "group.initial.rebalance.delay.ms": "0"}
TOPIC, GROUP, PARTITIONS, PER_PARTITION = "lagging", "lag-across-brokers", 6, 10


def test_lag_covers_partitions_led_by_other_brokers(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path, 3, overrides=FAST)
    urls = {}
    for node, port in zip(cluster.brokers, free_ports(len(cluster.brokers)), strict=True):
        node.overrides["console.listeners"] = f"http://127.0.0.1:{port}"
        urls[node.node_id] = f"http://127.0.0.1:{port}/metrics"
    with cluster:
        cluster.active_controller()
        create_topic(cluster.bootstrap, TOPIC, partitions=PARTITIONS)
        ck_produce(cluster.bootstrap, TOPIC, [{"value": b"v", "partition": p}
                                              for p in range(PARTITIONS) for _ in range(PER_PARTITION)])
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP})
        try:
            consumer.commit(offsets=[TopicPartition(TOPIC, p, p) for p in range(PARTITIONS)], asynchronous=False)
        finally:
            consumer.close()
        expected = {str(p): float(PER_PARTITION - p) for p in range(PARTITIONS)}

        seen: list[dict[str, float]] = [{}]

        def lag_everywhere() -> tuple[dict[str, float], dict[int, set[str]]] | None:
            lags = seen[0] = {}
            led: dict[int, set[str]] = {}
            for node_id, url in urls.items():
                scrape = Scrape(url)
                for labels, value in scrape.labelled("kafka_consumergroup_lag", consumergroup=GROUP).items():
                    lags[dict(labels)["partition"]] = value
                led[node_id] = {dict(labels)["partition"] for labels in
                                scrape.labelled("kafka_topic_partition_current_offset", topic=TOPIC)}
            return (lags, led) if lags == expected else None

        _, led = cluster.wait_until(lag_everywhere, 20, lambda: f"the lag of every partition, not {seen[0]}")
        assert sum(1 for partitions in led.values() if partitions) >= 2, led  # leaders on several brokers
        sums = [Scrape(url).get("kafka_consumergroup_lag_sum", consumergroup=GROUP, topic=TOPIC)
                for url in urls.values()]
        assert [s for s in sums if s is not None] == [sum(expected.values())]  # from the coordinator only
