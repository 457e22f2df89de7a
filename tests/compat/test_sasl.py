"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on SASL_PLAINTEXT listeners, with the real clients.

One broker serves every test here: a PLAINTEXT listener (topics are created there), a SASL_PLAINTEXT listener,
and a second SASL listener, REAUTH, whose sessions last 1.5 s (KIP-368 re-authentication) and which takes frames
of at most 4 KiB before authentication (the SASL_PLAINTEXT listener has Kafka's default, 512 KiB).
"""

from __future__ import annotations

import asyncio
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0

from moldau.net.ports import free_ports
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.messages import offset_of
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


class SaslBroker:
    def __init__(self, proc: BrokerProcess, sasl_port: int, reauth_port: int) -> None:
        self.proc = proc
        self.plain = proc.bootstrap
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.reauth = f"127.0.0.1:{reauth_port}"


def sasl_overrides(ports: list[int]) -> dict[str, str]:
    plain, sasl, reauth = ports
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},REAUTH://127.0.0.1:{reauth}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.reauth.plain.sasl.jaas.config": JAAS,
        "listener.name.reauth.connections.max.reauth.ms": "1500",
        "listener.name.reauth.sasl.server.max.receive.size": "4096",
        "connection.failed.authentication.delay.ms": "300",
    }


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    ports = free_ports(3)
    proc = BrokerProcess(tmp_path_factory.mktemp("sasl-broker"), sasl_overrides(ports), port=ports[0])
    proc.start()
    try:
        broker = SaslBroker(proc, ports[1], ports[2])
        create_scram_users(broker.sasl, USERS)
        yield broker
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka(sasl_broker: SaslBroker, mechanism: str) -> None:
    topic = topic_name("ck-sasl")
    create_topic(sasl_broker.plain, topic)
    conf = ck_conf(sasl_broker.sasl, mechanism, *USERS[mechanism])
    conf.pop("bootstrap.servers")
    ck_produce(sasl_broker.sasl, topic, records(50), **conf)
    got = ck_consume(sasl_broker.sasl, topic, 50, conf=conf)
    assert sorted(r.value or b"" for r in got) == sorted(r["value"] for r in records(50))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python(sasl_broker: SaslBroker, mechanism: str) -> None:
    topic = topic_name("kp-sasl")
    create_topic(sasl_broker.plain, topic)
    auth = python_client_auth(sasl_broker.sasl, mechanism, *USERS[mechanism])
    assert kafka_python_round_trip(auth, topic, 20) == [r["value"] for r in records(20)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka(sasl_broker: SaslBroker, mechanism: str) -> None:
    topic = topic_name("aio-sasl")
    create_topic(sasl_broker.plain, topic)
    auth = python_client_auth(sasl_broker.sasl, mechanism, *USERS[mechanism])
    assert aiokafka_round_trip(auth, topic, 20) == [r["value"] for r in records(20)]


# -- refusals, with exact codes from a raw client --------------------------------------------------------------


def test_wrong_mechanism_gets_the_enabled_ones_and_closes(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl) as client:
        response = handshake(client, "GSSAPI")
        assert response.error_code == ErrorCode.unsupported_sasl_mechanism
        assert list(response.mechanisms) == MECHANISMS
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("mechanism,user,password,message", [
    ("PLAIN", "alice", "wrong", "Invalid username or password"),
    ("PLAIN", "nobody", "alice-secret", "Invalid username or password"),
])
def test_plain_bad_credentials(sasl_broker: SaslBroker, mechanism: str, user: str, password: str,
                               message: str) -> None:
    with RawClient(sasl_broker.sasl) as client:
        assert handshake(client, mechanism).error_code == ErrorCode.none
        started = time.monotonic()
        response = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
        assert time.monotonic() - started >= 0.25  # connection.failed.authentication.delay.ms
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert message in response.error_message
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("user,password", [("bob", "wrong"), ("nobody", "bob-secret")])
def test_scram_bad_credentials(sasl_broker: SaslBroker, user: str, password: str) -> None:
    import scramp

    scram = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    with RawClient(sasl_broker.sasl) as client:
        assert handshake(client, "SCRAM-SHA-256").error_code == ErrorCode.none
        response = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_first().encode()))
        if response.error_code == ErrorCode.none:
            scram.set_server_first(response.auth_bytes.decode())
            response = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
        assert response.error_code == ErrorCode.sasl_authentication_failed
        assert response.error_message == ("Authentication failed during authentication due to invalid credentials "
                                          "with SASL mechanism SCRAM-SHA-256")
        assert client.is_closed_by_peer()


HOSTILE_TOKENS = [
    b"",  # nothing at all
    b"\xff\xfe\x00\x80" * 64,  # not UTF-8
    b"\0" * 1000,  # only separators
    b"x" * 500_000,  # large, but under the frame limit before authentication (sasl.server.max.receive.size)
    b"n,,n=bob,r=" + b"\0" * 50,  # a SCRAM client-first message with a NUL nonce
    b"c=biws,r=unknown-nonce,p=AAAA",  # a client-final message out of turn
]


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("token", HOSTILE_TOKENS, ids=lambda t: f"{len(t)}-bytes")
def test_hostile_tokens_fail_authentication_and_the_broker_keeps_serving(sasl_broker: SaslBroker, mechanism: str,
                                                                        token: bytes) -> None:
    with RawClient(sasl_broker.sasl) as client:
        assert handshake(client, mechanism).error_code == ErrorCode.none
        response = client.request(SaslAuthenticateRequest(auth_bytes=token))
        assert response.error_code in (ErrorCode.sasl_authentication_failed, ErrorCode.illegal_sasl_state)
        assert client.is_closed_by_peer()
    assert sasl_broker.proc.running
    assert "Traceback" not in sasl_broker.proc.log_path.read_text(errors="replace")
    user, password = USERS[mechanism]
    if mechanism == "PLAIN":
        with RawClient(sasl_broker.sasl) as client:
            handshake(client, "PLAIN")
            answer = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
            assert answer.error_code == ErrorCode.none
    else:
        assert can_authenticate(sasl_broker.sasl, mechanism, user, password)


def test_confluent_kafka_surfaces_bad_password(sasl_broker: SaslBroker) -> None:
    errors: list[str] = []
    producer = Producer({**ck_conf(sasl_broker.sasl, "SCRAM-SHA-512", "carol", "wrong"),
                         "error_cb": lambda err: errors.append(str(err))})
    deadline = time.monotonic() + 15
    while not any("Authentication failed" in e for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    assert any("SCRAM-SHA-512" in e and "invalid credentials" in e for e in errors), errors


def test_requests_before_authentication_close_the_connection(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl) as client:
        client.send_raw(client.encode(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                      include_topic_authorized_operations=False)))
        assert client.is_closed_by_peer()


@pytest.mark.parametrize("listener,limit", [("sasl", 524288), ("reauth", 4096)])
def test_a_frame_over_the_limit_before_authentication_closes_the_connection(sasl_broker: SaslBroker, listener: str,
                                                                            limit: int) -> None:
    """sasl.server.max.receive.size (Kafka's default, and a listener's own): an unauthenticated peer cannot make the
    broker receive a socket.request.max.bytes frame for it."""
    bootstrap = getattr(sasl_broker, listener)
    with RawClient(bootstrap) as client:
        client.send_raw(struct.pack(">i", limit + 1) + bytes(1024))
        assert client.is_closed_by_peer()
    with RawClient(bootstrap) as client:  # the next client is served
        _plain_authenticated(client)
        assert metadata(client).brokers
    assert f"exceeds sasl.server.max.receive.size={limit}" in sasl_broker.proc.log_path.read_text()


@pytest.mark.parametrize("listener", ["sasl", "reauth"])
def test_requests_over_the_limit_are_served_once_authenticated(sasl_broker: SaslBroker, listener: str) -> None:
    """The limit holds until authentication completes; then socket.request.max.bytes applies (a 600 KB record)."""
    topic = topic_name("sasl-large")
    create_topic(sasl_broker.plain, topic)
    conf = ck_conf(getattr(sasl_broker, listener), "PLAIN", *USERS["PLAIN"])
    bootstrap = conf.pop("bootstrap.servers")
    value = bytes(range(256)) * 2400
    ck_produce(str(bootstrap), topic, [{"value": value}], **conf)
    got = ck_consume(str(bootstrap), topic, 1, conf=conf)
    assert [r.value for r in got] == [value]


def _plain_authenticated(client: RawClient, user: str = "alice", password: str = "alice-secret") -> object:
    assert handshake(client, "PLAIN").error_code == ErrorCode.none
    response = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
    assert response.error_code == ErrorCode.none, response.error_message
    return response


def test_unframed_exchange_after_handshake_v0(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.sasl) as client:
        assert client.request(SaslHandshakeV0(mechanism="PLAIN")).error_code == ErrorCode.none
        token = b"\0alice\0alice-secret"
        client.send_raw(struct.pack(">i", len(token)) + token)
        assert client.read_frame() == b""  # PLAIN's (empty) final token, size-prefixed, no Kafka header
        assert metadata(client).brokers


def test_session_expiry_and_reauthentication_on_one_connection(sasl_broker: SaslBroker) -> None:
    with RawClient(sasl_broker.reauth) as expiring, RawClient(sasl_broker.reauth) as renewing:
        for client in (expiring, renewing):
            assert _plain_authenticated(client).session_lifetime.total_seconds() == 1.5  # type: ignore[attr-defined]
            assert metadata(client).brokers
        time.sleep(1.6)
        _plain_authenticated(renewing)  # KIP-368: SaslHandshake + SaslAuthenticate on the same connection
        assert metadata(renewing).brokers
        expiring.send_raw(expiring.encode(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                                          include_topic_authorized_operations=False)))
        assert expiring.is_closed_by_peer()


def test_producer_reauthenticates_without_breaking(sasl_broker: SaslBroker) -> None:
    topic = topic_name("reauth")
    create_topic(sasl_broker.plain, topic)
    expired_before = _expired_closes(sasl_broker.proc.log_path)
    errors: list[str] = []
    delivered: list[int] = []
    producer = Producer({**ck_conf(sasl_broker.reauth, "PLAIN", "alice", "alice-secret"), "linger.ms": 5,
                         "error_cb": lambda err: errors.append(str(err))})
    for i in range(40):  # 4 s: more than two session lifetimes
        producer.produce(topic, value=str(i).encode(), on_delivery=lambda err, msg: delivered.append(
            -1 if err else offset_of(msg)))
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert sorted(delivered) == list(range(40)) and not errors
    assert _expired_closes(sasl_broker.proc.log_path) == expired_before  # it re-authenticated, was never cut off


def _expired_closes(log_path: Path) -> int:
    return log_path.read_text(errors="replace").count("after the SASL session expired")


# -- SCRAM users through `moldau users`, and across a restart ------------------------------------------------


def users_cli(broker: SaslBroker, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.username=admin\nsasl.password=admin-secret\n")
    return subprocess.run([sys.executable, "-m", "moldau", "users", *args, "-b", broker.sasl,
                           "--command-config", str(config)], capture_output=True, text=True, timeout=60)


def test_users_cli_create_list_change_delete(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    created = users_cli(sasl_broker, tmp_path, "create", "dave", "--mechanism", "SCRAM-SHA-512",
                        "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", "--password", "dave-1")
    assert created.returncode == 0, created.stderr
    listed = users_cli(sasl_broker, tmp_path, "list")
    assert listed.returncode == 0, listed.stderr
    rows = {tuple(line.split()) for line in listed.stdout.splitlines()}
    assert {("dave", "SCRAM-SHA-256", "8192"), ("dave", "SCRAM-SHA-512", "8192"),
            ("bob", "SCRAM-SHA-256", "8192")} <= rows
    assert can_authenticate(sasl_broker.sasl, "SCRAM-SHA-512", "dave", "dave-1")
    again = users_cli(sasl_broker, tmp_path, "create", "dave", "--mechanism", "SCRAM-SHA-512", "--password", "x")
    assert again.returncode == 1 and "already has" in again.stderr
    changed = users_cli(sasl_broker, tmp_path, "change-password", "dave", "--mechanism", "SCRAM-SHA-512",
                        "--password", "dave-2")
    assert changed.returncode == 0, changed.stderr
    assert not can_authenticate(sasl_broker.sasl, "SCRAM-SHA-512", "dave", "dave-1")
    assert can_authenticate(sasl_broker.sasl, "SCRAM-SHA-512", "dave", "dave-2")
    deleted = users_cli(sasl_broker, tmp_path, "delete", "dave")
    assert deleted.returncode == 0, deleted.stderr
    assert not can_authenticate(sasl_broker.sasl, "SCRAM-SHA-256", "dave", "dave-1")
    missing = users_cli(sasl_broker, tmp_path, "list", "dave")
    assert missing.returncode == 1 and "no SCRAM credentials" in missing.stderr


def test_scram_users_survive_a_restart(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    created = users_cli(sasl_broker, tmp_path, "create", "erin", "--password", "erin-secret")
    assert created.returncode == 0, created.stderr
    sasl_broker.proc.restart()
    assert can_authenticate(sasl_broker.sasl, "SCRAM-SHA-256", "erin", "erin-secret")  # made by `moldau users`
    assert can_authenticate(sasl_broker.sasl, "SCRAM-SHA-256", "bob", "bob-secret")  # made by AdminClient
    assert can_authenticate(sasl_broker.sasl, "SCRAM-SHA-512", "carol", "carol-secret")


def test_tools_on_moldaus_own_client_authenticate_too(sasl_broker: SaslBroker, tmp_path: Path) -> None:
    """`moldau quotas` and `moldau transactions` speak through Moldau's own connections, not librdkafka's: they
    authenticate with the same `--command-config` (SCRAM here), and a wrong password fails with the reason."""
    config = tmp_path / "bob.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.jaas.config="
                      'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" '
                      'password="bob-secret";\n')

    def tool(*args: str, properties: Path = config) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "moldau", *args, "-b", sasl_broker.sasl,
                               "--command-config", str(properties)], capture_output=True, text=True, timeout=60)

    altered = tool("quotas", "alter", "--entity-type", "clients", "--entity-name", "sasl-tool",
                   "--add-config", "producer_byte_rate=4096")
    assert altered.returncode == 0, altered.stderr
    described = tool("quotas", "describe", "--entity-type", "clients", "--entity-name", "sasl-tool")
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines()]
    assert ["client=sasl-tool", "producer_byte_rate", "4096"] in rows
    listed = tool("transactions", "list")
    assert listed.returncode == 0, listed.stderr

    wrong = tmp_path / "wrong.properties"
    wrong.write_text(config.read_text().replace("bob-secret", "not-it"))
    refused = tool("quotas", "describe", properties=wrong)
    assert refused.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in refused.stderr, refused
    unusable = tmp_path / "gssapi.properties"
    unusable.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n")
    assert "GSSAPI is not supported" in tool("quotas", "describe", properties=unusable).stderr


def test_python_clients_outlive_their_sasl_sessions(sasl_broker: SaslBroker) -> None:
    """aiokafka has no KIP-368 re-authentication: when a session ends the broker closes the connection at the
    next request, as Kafka does, and it reconnects and authenticates again; kafka-python 3 re-authenticates. Neither
    loses a record. Each sends for 4 s on the REAUTH listener, whose sessions last 1.5 s."""
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    topic = topic_name("reauth-python")
    create_topic(sasl_broker.plain, topic)
    expired_before = _expired_closes(sasl_broker.proc.log_path)
    auth = python_client_auth(sasl_broker.reauth, "PLAIN", *USERS["PLAIN"])
    producer = KafkaProducer(**auth, retries=5, acks="all")
    for i in range(40):
        producer.send(topic, value=b"kafka-python %d" % i).get(timeout=30)
        time.sleep(0.1)
    producer.close()

    async def aiokafka_sends() -> None:
        async_producer = AIOKafkaProducer(**auth, acks="all")
        await async_producer.start()
        try:
            for i in range(40):
                await async_producer.send_and_wait(topic, value=b"aiokafka %d" % i)
                await asyncio.sleep(0.1)
        finally:
            await async_producer.stop()
    asyncio.run(aiokafka_sends())

    got = ck_consume(sasl_broker.plain, topic, 80)
    assert sorted(r.value or b"" for r in got) == sorted(
        [b"kafka-python %d" % i for i in range(40)] + [b"aiokafka %d" % i for i in range(40)])
    assert _expired_closes(sasl_broker.proc.log_path) > expired_before  # their sessions did end under them


def test_server_refuses_a_malformed_add_scram_before_starting(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "moldau", "server", "--add-scram", "SCRAM-SHA-1=[name=a,password=b]",
                             "--override", f"log.dirs={tmp_path / 'data'}"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2
    assert "--add-scram: unknown mechanism SCRAM-SHA-1" in result.stderr
    assert not (tmp_path / "data").exists()
