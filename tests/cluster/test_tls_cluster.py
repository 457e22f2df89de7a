"""A three-node cluster whose brokers and controllers talk to each other over mutual TLS: the inter-broker
listener (replica fetchers) and the controller listener (the metadata quorum, the controller channel) are SSL
with `ssl.client.auth=required`, so every node presents its key store as a client certificate."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.cluster import LocalCluster
from tests.support.polling import wait_until
from tests.support.replicated import FAST_FAILOVER
from tests.support.tls import make_pki

pytestmark = pytest.mark.slow


def test_brokers_replicate_over_ssl(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    cluster = LocalCluster(tmp_path, 3, overrides={**FAST_FAILOVER, **pki.broker_config("required")})
    for node in cluster.nodes.values():
        node.overrides.update({
            "listeners": f"BROKER://{node.kafka_address},CONTROLLER://{node.controller_address}",
            "advertised.listeners": f"BROKER://{node.kafka_address}",
            "listener.security.protocol.map": "BROKER:SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "BROKER",
        })
    client = pki.confluent()
    with cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **client})
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, "three brokers registered")
        topic = NewTopic("over-tls", 1, 3, config={"min.insync.replicas": "3"})
        admin.create_topics([topic])["over-tls"].result(timeout=30)
        # acks=all with min.insync.replicas=3: acknowledged only once both followers fetched it over TLS.
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **client})
        errors: list[object] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(err)

        for i in range(50):
            producer.produce("over-tls", value=f"r{i}".encode(), on_delivery=delivered)
        assert producer.flush(60) == 0 and not errors, errors
        isr = admin.list_topics("over-tls", timeout=10).topics["over-tls"].partitions[0].isrs
        assert sorted(isr) == [1, 2, 3]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", **client})
        assert consumer.get_watermark_offsets(TopicPartition("over-tls", 0), timeout=10) == (0, 50)
        consumer.close()
