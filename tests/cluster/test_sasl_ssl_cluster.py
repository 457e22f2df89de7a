"""A three-node cluster whose brokers talk to each other over SASL_SSL: the inter-broker listener is SASL_SSL
with PLAIN (replica fetchers authenticate as the `admin` user of its JAAS config, over TLS), the controller
listener mutual TLS as in test_tls_cluster.py (controller listeners cannot use SASL yet). Clients use the same
SASL_SSL listener with a SCRAM user."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.clients import ck_consume, ck_produce
from tests.support.cluster import LocalCluster
from tests.support.polling import wait_until
from tests.support.replicated import FAST_FAILOVER
from tests.support.sasl import JAAS, ck_conf, create_scram_users, records
from tests.support.tls import make_pki

pytestmark = pytest.mark.slow

# What each node's server.properties says (after the generated node.id, quorum voters, log.dirs), as in
# docs/security.md; {broker}, {controller}, {keystore} and {truststore} are filled in per node.
SERVER_PROPERTIES = f"""
listeners=BROKER://{{broker}},CONTROLLER://{{controller}}
advertised.listeners=BROKER://{{broker}}
listener.security.protocol.map=BROKER:SASL_SSL,CONTROLLER:SSL
inter.broker.listener.name=BROKER
controller.listener.names=CONTROLLER
ssl.keystore.type=PEM
ssl.keystore.location={{keystore}}
ssl.truststore.type=PEM
ssl.truststore.location={{truststore}}
listener.name.controller.ssl.client.auth=required
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.broker.plain.sasl.jaas.config={JAAS}
"""


def parse_properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_brokers_replicate_over_sasl_ssl(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    cluster = LocalCluster(tmp_path, 3, overrides=FAST_FAILOVER)
    for node in cluster.nodes.values():
        node.overrides.update(parse_properties(SERVER_PROPERTIES.format(
            broker=node.kafka_address, controller=node.controller_address, keystore=pki.server, truststore=pki.ca)))
    with cluster:
        admin_conf = ck_conf(cluster.bootstrap, "PLAIN", "admin", "admin-secret", "SASL_SSL", str(pki.ca))
        admin = AdminClient(admin_conf)
        wait_until(lambda: len(admin.list_topics(timeout=5).brokers) == 3, 60, "three brokers registered")
        create_scram_users(cluster.bootstrap, {"SCRAM-SHA-256": ("bob", "bob-secret")}, "SASL_SSL", str(pki.ca))
        admin.create_topics([NewTopic("over-sasl-ssl", 1, 3, config={"min.insync.replicas": "3"})])[
            "over-sasl-ssl"].result(timeout=30)
        wait_until(lambda: len(admin.list_topics("over-sasl-ssl", timeout=5).topics["over-sasl-ssl"]
                               .partitions[0].isrs) == 3, 30, "all three replicas in the ISR")
        client = ck_conf(cluster.bootstrap, "SCRAM-SHA-256", "bob", "bob-secret", "SASL_SSL", str(pki.ca))
        client.pop("bootstrap.servers")
        # acks=all with min.insync.replicas=3: acknowledged only once both followers fetched it over SASL_SSL.
        assert len(ck_produce(cluster.bootstrap, "over-sasl-ssl", records(50), acks="all", **client)) == 50
        got = ck_consume(cluster.bootstrap, "over-sasl-ssl", 50, **client)
        assert [r.value for r in got] == [r["value"] for r in records(50)]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", **client})
        assert consumer.get_watermark_offsets(TopicPartition("over-sasl-ssl", 0), timeout=10) == (0, 50)
        consumer.close()
        for node in cluster.nodes.values():
            assert "authentication to" not in node.log_tail(400)
