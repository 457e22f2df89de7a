"""SASL helpers shared by the SASL_PLAINTEXT and SASL_SSL tests: the users, the client configs of the three
Python clients, SCRAM users made through confluent-kafka's AdminClient, a raw SCRAM exchange, and a produce /
read-back round trip with kafka-python and with aiokafka."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from moldau.protocol.errors import ErrorCode
from tests.support.clients import ClientConf
from tests.support.raw_client import RawClient

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
# SCRAM users are created through AdminClient; PLAIN users come from the JAAS config.
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}


def ck_conf(bootstrap: str, mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT",
            ca: str | None = None) -> ClientConf:
    """A librdkafka client config; `ca` is the trust store (PEM) of SASL_SSL."""
    conf: ClientConf = {"bootstrap.servers": bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    return conf | ({"ssl.ca.location": ca} if ca is not None else {})


def python_client_auth(bootstrap: str, mechanism: str, user: str, password: str,
                       tls: ssl.SSLContext | None = None) -> dict[str, Any]:
    """The connection arguments kafka-python and aiokafka both take (SASL_SSL when `tls` is given)."""
    auth: dict[str, Any] = {"bootstrap_servers": bootstrap, "sasl_mechanism": mechanism,
                            "sasl_plain_username": user, "sasl_plain_password": password,
                            "security_protocol": "SASL_PLAINTEXT" if tls is None else "SASL_SSL"}
    return auth | ({"ssl_context": tls} if tls is not None else {})


def create_scram_users(bootstrap: str, users: dict[str, tuple[str, str]], protocol: str = "SASL_PLAINTEXT",
                       ca: str | None = None) -> None:
    """Through confluent-kafka's AdminClient, authenticated as the PLAIN admin."""
    admin = AdminClient(ck_conf(bootstrap, "PLAIN", "admin", "admin-secret", protocol, ca))
    upsertions: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(getattr(ScramMechanism, m.replace("-", "_")), 8192),
                                     password.encode())
        for m, (user, password) in users.items() if m != "PLAIN"]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=30)


def records(n: int) -> list[dict[str, bytes]]:
    return [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(n)]


def handshake(client: RawClient, mechanism: str) -> Any:
    return client.request(SaslHandshakeRequest(mechanism=mechanism))


def metadata(client: RawClient) -> Any:
    return client.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                          include_topic_authorized_operations=False))


def can_authenticate(bootstrap: str, mechanism: str, user: str, password: str,
                     tls: ssl.SSLContext | None = None) -> bool:
    """A SCRAM exchange with the broker succeeds (True) or is refused with SASL_AUTHENTICATION_FAILED (False)."""
    import scramp

    scram = scramp.ScramClient([mechanism], user, password)
    with RawClient(bootstrap, tls=tls) as client:
        assert handshake(client, mechanism).error_code == ErrorCode.none
        response = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
        if response.error_code == ErrorCode.none:
            scram.set_server_first(response.auth_bytes.decode())
            response = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
        if response.error_code == ErrorCode.none:
            scram.set_server_final(response.auth_bytes.decode())
            assert metadata(client).brokers
            return True
        assert response.error_code == ErrorCode.sasl_authentication_failed
        return False


def kafka_python_round_trip(auth: dict[str, Any], topic: str, n: int) -> list[bytes]:
    """Produce `records(n)` to partition 0 of `topic` with kafka-python, then read them back; the values read."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**auth)
    for r in records(n):
        producer.send(topic, key=r["key"], value=r["value"])
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(**auth, enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for msg in consumer:
        values.append(msg.value)
        if len(values) == n:
            break
    consumer.close()
    return values


def aiokafka_round_trip(auth: dict[str, Any], topic: str, n: int) -> list[bytes]:
    """The same with aiokafka."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**auth)
        await producer.start()
        try:
            for r in records(n):
                await producer.send_and_wait(topic, key=r["key"], value=r["value"])
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**auth, enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            values: list[bytes] = []
            while len(values) < n:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                values += [m.value for msgs in batch.values() for m in msgs]
            return values
        finally:
            await consumer.stop()

    return asyncio.run(run())
