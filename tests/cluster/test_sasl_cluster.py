"""SCRAM users live in the metadata log: one created through any broker authenticates on every broker."""

from __future__ import annotations

from pathlib import Path

from moldau.net.ports import free_ports
from tests.support.cluster import LocalCluster
from tests.support.polling import wait_until
from tests.support.sasl import JAAS, can_authenticate, create_scram_users


def test_scram_user_created_on_one_broker_authenticates_on_the_others(tmp_path: Path) -> None:
    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    cluster = LocalCluster(tmp_path, nodes=3)
    # A SASL_PLAINTEXT listener next to the generated PLAINTEXT and CONTROLLER ones, on every node.
    sasl = {}
    for node_id, node in cluster.nodes.items():
        plain = f"PLAINTEXT://{node.spec.kafka_address}"
        sasl[node_id] = f"127.0.0.1:{ports[node_id]}"
        node.overrides.update({
            "listeners": f"{plain},SASL_PLAINTEXT://{sasl[node_id]},CONTROLLER://{node.spec.controller_address}",
            "advertised.listeners": f"{plain},SASL_PLAINTEXT://{sasl[node_id]}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        })
    with cluster:
        cluster.active_controller(timeout_s=30)
        create_scram_users(sasl[1], {"SCRAM-SHA-512": ("frank", "frank-secret")})
        for node_id in (2, 3):
            wait_until(lambda n=node_id: can_authenticate(sasl[n], "SCRAM-SHA-512", "frank", "frank-secret"),
                       15, f"frank authenticates on node {node_id}")
        assert not can_authenticate(sasl[3], "SCRAM-SHA-512", "frank", "wrong")


def test_brokers_replicate_over_a_sasl_inter_broker_listener(tmp_path: Path) -> None:
    """Followers fetch from leaders on the SASL_PLAINTEXT listener, authenticated with PLAIN as `admin`."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    ports = dict(zip((1, 2, 3), free_ports(3), strict=True))
    cluster = LocalCluster(tmp_path, nodes=3)
    for node_id, node in cluster.nodes.items():
        plain = f"PLAINTEXT://{node.spec.kafka_address}"
        sasl = f"SASL_PLAINTEXT://127.0.0.1:{ports[node_id]}"
        node.overrides.update({
            "listeners": f"{plain},{sasl},CONTROLLER://{node.spec.controller_address}",
            "advertised.listeners": f"{plain},{sasl}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        })
    with cluster:
        cluster.active_controller(timeout_s=30)
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("replicated", 1, 3, config={"min.insync.replicas": "3"})
        admin.create_topics([topic])["replicated"].result(30)

        def full_isr() -> bool:
            partition = admin.list_topics("replicated", timeout=5).topics["replicated"].partitions[0]
            return len(partition.isrs) == 3

        wait_until(full_isr, 30, "all three replicas in the ISR")
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        failures: list[object] = []

        def delivered(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(err)

        for i in range(20):
            producer.produce("replicated", value=str(i).encode(), on_delivery=delivered)
        # acks=all with min.insync.replicas=3: every follower fetched over the SASL listener.
        assert producer.flush(30) == 0 and not failures
        for node in cluster.nodes.values():
            assert "authentication to" not in node.log_tail(400)
