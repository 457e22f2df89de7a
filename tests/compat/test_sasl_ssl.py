"""SASL over TLS (SASL_SSL listeners) with the real clients: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

One broker serves every test here: a PLAINTEXT listener (topics are created there), a SASL_SSL listener whose
certificate the tests make (tests/support/tls.py) and whose PLAIN users come from its JAAS config, and a second
SASL_SSL listener, MTLS, that also requires a client certificate. The authorizer is on but open where no ACL
exists (`allow.everyone.if.no.acl.found=true`), so that an ACL can show whose principal a connection has.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest

from moldau.net.ports import free_ports
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ClientConf, ck_consume, ck_produce, create_topic
from tests.support.raw_client import RawClient
from tests.support.sasl import (
    JAAS,
    MECHANISMS,
    USERS,
    aiokafka_round_trip,
    can_authenticate,
    ck_conf,
    create_scram_users,
    handshake,
    kafka_python_round_trip,
    metadata,
    python_client_auth,
    records,
)
from tests.support.tls import Pki, make_pki


@dataclass(frozen=True)
class SaslSslBroker:
    proc: BrokerProcess
    pki: Pki
    plain: str
    sasl_ssl: str
    mtls: str

    def ck_conf(self, mechanism: str, user: str, password: str) -> ClientConf:
        return ck_conf(self.sasl_ssl, mechanism, user, password, "SASL_SSL", str(self.pki.ca))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslSslBroker]:
    base = tmp_path_factory.mktemp("sasl-ssl-broker")
    pki = make_pki(base / "pki")
    plain, sasl_ssl, mtls = free_ports(3)
    proc = BrokerProcess(base, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        **pki.broker_config("none"),
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "listener.name.mtls.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "100",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": "User:admin;User:ANONYMOUS",  # ANONYMOUS: the PLAINTEXT listener, where topics are made
    }, port=plain)
    proc.start()
    try:
        broker = SaslSslBroker(proc, pki, f"127.0.0.1:{plain}", f"127.0.0.1:{sasl_ssl}", f"127.0.0.1:{mtls}")
        create_scram_users(broker.sasl_ssl, USERS, "SASL_SSL", str(pki.ca))
        yield broker
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(broker: SaslSslBroker, mechanism: str) -> None:
    topic = topic_name("ck-sasl-ssl")
    create_topic(broker.plain, topic)
    conf = broker.ck_conf(mechanism, *USERS[mechanism])
    conf.pop("bootstrap.servers")
    ck_produce(broker.sasl_ssl, topic, records(50), **conf)
    got = ck_consume(broker.sasl_ssl, topic, 50, conf=conf)
    assert sorted(r.value or b"" for r in got) == sorted(r["value"] for r in records(50))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(broker: SaslSslBroker, mechanism: str) -> None:
    topic = topic_name("kp-sasl-ssl")
    create_topic(broker.plain, topic)
    auth = python_client_auth(broker.sasl_ssl, mechanism, *USERS[mechanism], tls=broker.pki.client_context())
    assert kafka_python_round_trip(auth, topic, 20) == [r["value"] for r in records(20)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(broker: SaslSslBroker, mechanism: str) -> None:
    topic = topic_name("aio-sasl-ssl")
    create_topic(broker.plain, topic)
    auth = python_client_auth(broker.sasl_ssl, mechanism, *USERS[mechanism], tls=broker.pki.client_context())
    assert aiokafka_round_trip(auth, topic, 20) == [r["value"] for r in records(20)]


def test_bad_password_is_refused_and_the_broker_keeps_serving(broker: SaslSslBroker) -> None:
    tls = broker.pki.client_context()
    with RawClient(broker.sasl_ssl, tls=tls) as refused:
        assert handshake(refused, "PLAIN").error_code == ErrorCode.none
        response = refused.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong"))
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert "Invalid username or password" in response.error_message
        assert refused.is_closed_by_peer()
    assert not can_authenticate(broker.sasl_ssl, "SCRAM-SHA-512", "carol", "wrong", tls=tls)
    # Nothing else is disturbed: the right password works on the same listener, and clients keep producing.
    assert can_authenticate(broker.sasl_ssl, "SCRAM-SHA-512", "carol", "carol-secret", tls=tls)
    with RawClient(broker.sasl_ssl, tls=tls) as accepted:
        assert handshake(accepted, "PLAIN").error_code == ErrorCode.none
        ok = accepted.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert ok.error_code == ErrorCode.none, ok.error_message
        assert metadata(accepted).brokers
    topic = topic_name("after-refusal")
    create_topic(broker.plain, topic)
    conf = broker.ck_conf("SCRAM-SHA-256", *USERS["SCRAM-SHA-256"])
    conf.pop("bootstrap.servers")
    assert len(ck_produce(broker.sasl_ssl, topic, records(10), **conf)) == 10


def test_the_principal_is_the_sasl_user_even_with_a_client_certificate(broker: SaslSslBroker) -> None:
    """As in Kafka: on SASL_SSL the SASL user is the principal, not the certificate's subject (User:CN=alice,...)."""
    topic = topic_name("not-for-bob")
    create_topic(broker.plain, topic)
    admin = AdminClient({**broker.ck_conf("PLAIN", "admin", "admin-secret"), "bootstrap.servers": broker.mtls,
                         "ssl.certificate.location": str(broker.pki.client_cert),
                         "ssl.key.location": str(broker.pki.client_key)})
    # Everyone may write to the topic but bob (DENY wins); the certificate's subject is not denied.
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", AclOperation.WRITE,
                       permission)
            for principal, permission in (("User:*", AclPermissionType.ALLOW), ("User:bob", AclPermissionType.DENY))]
    for future in admin.create_acls(acls).values():
        future.result(timeout=30)
    certificate = {"ssl.certificate.location": str(broker.pki.client_cert),
                   "ssl.key.location": str(broker.pki.client_key)}

    def produce(mechanism: str) -> object:
        conf = {**broker.ck_conf(mechanism, *USERS[mechanism]), **certificate, "message.timeout.ms": 10_000}
        conf.pop("bootstrap.servers")
        try:
            ck_produce(broker.mtls, topic, records(1), **conf)
        except AssertionError as refused:
            return str(refused)
        return None

    assert "TOPIC_AUTHORIZATION_FAILED" in str(produce("SCRAM-SHA-256"))  # bob
    assert produce("SCRAM-SHA-512") is None  # carol, with the same certificate


def test_a_sasl_ssl_listener_can_require_client_certificates(broker: SaslSslBroker) -> None:
    conf = broker.ck_conf("PLAIN", *USERS["PLAIN"])
    conf["bootstrap.servers"] = broker.mtls
    with pytest.raises(KafkaException):
        AdminClient(conf).list_topics(timeout=5)
