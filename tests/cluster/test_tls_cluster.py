"""A three-node cluster whose brokers and controllers talk to each other over mutual TLS: the inter-broker
listener (replica fetchers) and the controller listener (the metadata quorum, the controller channel) are SSL
with `ssl.client.auth=required`, so every node presents its key store as a client certificate. Then the
inter-broker listener's certificates move to a new CA while the cluster runs (IncrementalAlterConfigs per broker),
and a restarted node's replica fetchers, which open new connections, present and trust the new stores."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from tests.support.cluster import LocalCluster
from tests.support.polling import wait_until
from tests.support.replicated import FAST_FAILOVER
from tests.support.tls import Pki, make_pki, renew_server

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

        # Rotation to a new CA in Kafka's three steps: every node trusts both CAs, then serves the new CA's
        # certificate (same subject and names), then trusts the new CA alone. Each step must keep every node able
        # to reach the others; the new CA's certificate and trust in one step is refused (as in Kafka).
        new = make_pki(tmp_path / "pki-new")
        both = tmp_path / "both-cas.pem"
        both.write_bytes(pki.ca.read_bytes() + new.ca.read_bytes())
        old_client = {**client, "ssl.ca.location": str(both)}
        new_client = {**new.confluent(), "ssl.ca.location": str(both)}
        with pytest.raises(KafkaException) as refused:
            alter_all(cluster.bootstrap, old_client, {"listener.name.broker.ssl.keystore.location": str(new.server),
                                                      "listener.name.broker.ssl.truststore.location": str(new.ca)})
        assert "fail a TLS handshake with the current ones" in refused.value.args[0].str()
        alter_all(cluster.bootstrap, old_client, {"listener.name.broker.ssl.truststore.location": str(both)})
        alter_all(cluster.bootstrap, old_client, {"listener.name.broker.ssl.keystore.location": str(new.server)})
        alter_all(cluster.bootstrap, new_client, {"listener.name.broker.ssl.truststore.location": str(new.ca)})
        # A restarted node opens new connections to the others' inter-broker listener: its fetchers must present
        # the new certificate and trust the new CA (both from the dynamic configs), or it never rejoins the ISR.
        cluster.node(3).restart()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, **new_client})

        def full_isr() -> bool:
            isr = admin.list_topics("over-tls", timeout=5).topics["over-tls"].partitions[0].isrs
            return sorted(isr) == [1, 2, 3]

        wait_until(full_isr, 60, "the restarted node back in the ISR over the new certificates")
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", **new_client})
        for i in range(10):
            producer.produce("over-tls", value=f"after-{i}".encode(), on_delivery=delivered)
        assert producer.flush(60) == 0 and not errors, errors
        assert "keep their key and trust stores" not in cluster.node(3).log_tail(400)

        # A certificate renewed in place (same file) is loaded when its config is set again, also on a broker that
        # forwards the change to the controller (the metadata does not change for it to follow).
        renewed = renew_server(new)
        alter_all(cluster.bootstrap, new_client, {"listener.name.broker.ssl.keystore.location": str(new.server)})
        for node in cluster.nodes.values():
            assert served_certificate(node.kafka_address, new) == renewed, node


def served_certificate(address: str | None, pki: Pki) -> bytes:
    """The DER certificate a new mutual-TLS connection to `address` is served."""
    assert address is not None
    host, port = address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client))
    with socket.create_connection((host, int(port)), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        certificate = tls.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


def alter_all(bootstrap: str, client: dict[str, str], configs: dict[str, str]) -> None:
    """Set these dynamic configs on every broker (each checks that it can load its stores before they are kept)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **client})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    for node in (1, 2, 3):  # one BROKER resource per call (librdkafka sends it to that broker)
        resource = ConfigResource(ResourceType.BROKER, str(node), incremental_configs=entries)
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
