"""A secured three-node cluster, from server.properties a Kafka user would write: the brokers talk to each other
over SASL_SSL with PLAIN (replica fetchers authenticate as the `admin` user of its JAAS config, over TLS), the
controller listener is mutual TLS as in test_tls_cluster.py (test_sasl_cluster.py has SASL there), and the
StandardAuthorizer is on with `admin` (the brokers' SASL user) and `node` (the nodes' certificate, on the controller
listener) as super users. Clients use the same SASL_SSL listener with a SCRAM user
who may do only what its ACLs allow, and at the rate its user quota allows; a client certificate from the same CA
gets nowhere on the controller listener."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest
from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i32, i64

from moldau.protocol.errors import ErrorCode
from tests.support.clients import ClientConf, ck_consume, ck_produce
from tests.support.cluster import LocalCluster
from tests.support.polling import wait_until
from tests.support.quota_rates import produce_for, rate
from tests.support.raw_client import RawClient
from tests.support.replicated import FAST_FAILOVER
from tests.support.sasl import JAAS, ck_conf, create_scram_users, records
from tests.support.tls import Pki, make_pki

pytestmark = pytest.mark.slow

CONSUMER_GROUP = "unused-assign-only"  # the group tests.support.clients.ck_consume names
QUOTA = 100_000  # bytes per second for bob's producer
JAAS_ADMIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret";')

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
listener.name.controller.ssl.principal.mapping.rules=RULE:^CN=([^,]+),OU=nodes,O=Moldau$/$1/,DEFAULT
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.broker.plain.sasl.jaas.config={JAAS}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:node
allow.everyone.if.no.acl.found=false
"""


def parse_properties(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def produce_error(bootstrap: str, client: ClientConf) -> int | None:
    """The error code of one record's delivery to over-sasl-ssl, None when it was delivered."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "retries": 0, **client})
    outcome: list[KafkaError | None] = []
    producer.produce("over-sasl-ssl", value=b"x", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0].code() if outcome[0] is not None else None


def allow_bob(admin: AdminClient) -> None:
    """What `moldau acls add --allow-principal User:bob --producer --consumer --topic over-sasl-ssl --group G`
    grants, G being the group the test's consumers name (librdkafka looks its coordinator up even when assigning)."""
    bindings = [AclBinding(ResourceType.TOPIC, "over-sasl-ssl", ResourcePatternType.LITERAL, "User:bob", "*", op,
                           AclPermissionType.ALLOW)
                for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, CONSUMER_GROUP, ResourcePatternType.LITERAL, "User:bob", "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def test_a_secured_cluster_replicates_over_sasl_ssl_and_enforces_acls(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    # Quota rates over 2 windows of 1 s, so a few seconds of producing average out (see tests/compat/test_quotas.py).
    cluster = LocalCluster(tmp_path, 3, overrides={**FAST_FAILOVER, "quota.window.num": "2"})
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
        assert produce_error(cluster.bootstrap, client) == KafkaError.TOPIC_AUTHORIZATION_FAILED
        allow_bob(admin)
        # CreateAcls answers once the controller committed the ACLs; each broker applies them from the metadata log
        # a moment later, as in Kafka. Until the broker a client asks has them, the client is refused: so one probe
        # record, retried until it is accepted.
        wait_until(lambda: produce_error(cluster.bootstrap, client) is None, 30, "bob's ACLs on every broker")
        # acks=all with min.insync.replicas=3: acknowledged only once both followers fetched it over SASL_SSL.
        assert len(ck_produce(cluster.bootstrap, "over-sasl-ssl", records(50), acks="all", **client)) == 50
        got = ck_consume(cluster.bootstrap, "over-sasl-ssl", 51, conf=client)
        assert [r.value for r in got] == [b"x"] + [r["value"] for r in records(50)]
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "unused", **client})
        assert consumer.get_watermark_offsets(TopicPartition("over-sasl-ssl", 0), timeout=10) == (0, 51)
        consumer.close()
        for node in cluster.nodes.values():
            assert "authentication to" not in node.log_tail(400)
        node = next(iter(cluster.nodes.values()))
        assert node.controller_address is not None
        assert controller_listener_errors(node.controller_address, pki) == (
            ErrorCode.cluster_authorization_failed, ErrorCode.cluster_authorization_failed)
        assert_user_quota_holds(cluster.bootstrap, tmp_path, pki, client)


def assert_user_quota_holds(bootstrap: str, tmp_path: Path, pki: Pki, client: ClientConf) -> None:
    """The admin sets a producer_byte_rate on user bob with `moldau quotas` over SASL_SSL; bob's producer, under
    ACLs on the same listener, is then held to within 20% of it."""
    admin_properties = tmp_path / "admin.properties"
    admin_properties.write_text(f"security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location="
                                f"{pki.ca}\nsasl.mechanism=PLAIN\nsasl.jaas.config={JAAS_ADMIN}\n")
    altered = subprocess.run([sys.executable, "-m", "moldau", "quotas", "alter", "-b", bootstrap, "--command-config",
                              str(admin_properties), "--entity-type", "users", "--entity-name", "bob",
                              "--add-config", f"producer_byte_rate={QUOTA}"], capture_output=True, text=True,
                             timeout=60)
    assert altered.returncode == 0, altered.stderr
    time.sleep(1.0)  # the quota reaches every broker through the metadata log
    acked: list[tuple[float, int]] = []
    start = time.monotonic()
    produce_for(bootstrap, "over-sasl-ssl", "bobs-app", 5.0, acked, **client)
    measured = rate(acked, start + 1.0, start + 5.0)
    assert 0.8 * QUOTA <= measured <= 1.2 * QUOTA, measured


def controller_listener_errors(address: str, pki: Pki) -> tuple[int, int]:
    """alice, with a certificate the CA signed, on a controller listener: a BrokerHeartbeat (for nodes only) and a
    DescribeQuorum (an admin request, KIP-919, that needs DESCRIBE on the cluster, which she lacks)."""
    tls = ssl.create_default_context(cafile=str(pki.ca))
    tls.load_cert_chain(str(pki.client))
    heartbeat = BrokerHeartbeatRequest(broker_id=BrokerId(99), broker_epoch=i64(1), current_metadata_offset=i64(0),
                                       want_fence=False,
                                       want_shut_down=False, offline_log_dirs=())
    describe = DescribeQuorumRequest(topics=(TopicData(topic_name=TopicName("__cluster_metadata"), partitions=(
        PartitionData(partition_index=i32(0)),)),))
    with RawClient(address, tls=tls) as client:
        return client.request(heartbeat).error_code, client.request(describe).error_code
