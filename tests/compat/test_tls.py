"""TLS with the real clients against a real `moldau server` process: one broker with a PLAINTEXT, an SSL and a
mutual-TLS listener at once (the last an SSL listener whose `listener.name.mtls.ssl.client.auth=required`
overrides the plain `ssl.client.auth=none`). Certificates are made by the test (tests/support/tls.py)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.tls import Pki, make_pki


@dataclass(frozen=True)
class TlsBroker:
    proc: BrokerProcess
    pki: Pki
    plaintext: str
    ssl: str
    mtls: str


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    base = tmp_path_factory.mktemp("tls-broker")
    pki = make_pki(base / "pki")
    plain, ssl_port, mtls_port = free_ports(3)
    proc = BrokerProcess(base, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        **pki.broker_config("none"),
        "listener.name.mtls.ssl.client.auth": "required",
    }, port=plain)
    proc.start()
    try:
        yield TlsBroker(proc, pki, f"127.0.0.1:{plain}", f"127.0.0.1:{ssl_port}", f"127.0.0.1:{mtls_port}")
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def records(n: int) -> list[dict[str, bytes]]:
    return [{"key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(n)]


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_confluent_kafka_over_tls(tls_broker: TlsBroker, listener: str) -> None:
    bootstrap = getattr(tls_broker, listener)
    conf = tls_broker.pki.confluent(certificate=listener == "mtls")
    topic = topic_name(f"ck-{listener}")
    create_topic(tls_broker.plaintext, topic, partitions=2)
    acks = ck_produce(bootstrap, topic, records(200), **conf)
    assert len(set(acks)) == 200
    got = ck_consume(bootstrap, topic, 200, conf=conf)
    assert sorted(r.value for r in got if r.value) == sorted(f"v{i}".encode() for i in range(200))


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_kafka_python_over_tls(tls_broker: TlsBroker, listener: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    bootstrap = getattr(tls_broker, listener)
    pki = tls_broker.pki
    client_cert = {"ssl_certfile": str(pki.client_cert), "ssl_keyfile": str(pki.client_key)} \
        if listener == "mtls" else {}
    common = {"bootstrap_servers": bootstrap, "security_protocol": "SSL", "ssl_cafile": str(pki.ca),
              "ssl_check_hostname": True, **client_cert}
    topic = topic_name(f"kp-{listener}")
    create_topic(tls_broker.plaintext, topic)
    producer = KafkaProducer(linger_ms=5, **common)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(100)]
    producer.flush(30)
    assert len({f.get(timeout=30).offset for f in futures}) == 100
    producer.close()
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **common)
    consumer.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(m.value for m in batch)
    consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(100))


@pytest.mark.parametrize("listener", ["ssl", "mtls"])
def test_aiokafka_over_tls(tls_broker: TlsBroker, listener: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.helpers import create_ssl_context

    bootstrap = getattr(tls_broker, listener)
    pki = tls_broker.pki
    topic = topic_name(f"aio-{listener}")
    create_topic(tls_broker.plaintext, topic)

    def context() -> ssl.SSLContext:
        # aiokafka has no type information: its helper's result is typed here.
        if listener == "mtls":
            made: ssl.SSLContext = create_ssl_context(cafile=str(pki.ca), certfile=str(pki.client_cert),
                                                      keyfile=str(pki.client_key))
        else:
            made = create_ssl_context(cafile=str(pki.ca))
        return made

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context())
        await producer.start()
        try:
            for i in range(100):
                await producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context(),
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            out: list[bytes] = []
            async with asyncio.timeout(30):
                while len(out) < 100:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend(m.value for m in batch if m.value is not None)
            return out
        finally:
            await consumer.stop()

    assert sorted(asyncio.run(run())) == sorted(f"v{i}".encode() for i in range(100))


def test_mutual_tls_refuses_a_client_without_certificate(tls_broker: TlsBroker) -> None:
    admin = AdminClient({"bootstrap.servers": tls_broker.mtls, **tls_broker.pki.confluent(certificate=False)})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    # Same refusal at the TLS level, with the standard library's client.
    context = ssl.create_default_context(cafile=str(tls_broker.pki.ca))
    host, port = tls_broker.mtls.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        try:
            tls.sendall(api_versions_request())
            answer = tls.recv(4)
        except (ssl.SSLError, ConnectionError):
            answer = b""
    assert answer == b"", "the broker answered a client without a certificate"
    assert AdminClient({"bootstrap.servers": tls_broker.mtls, **tls_broker.pki.confluent()}).list_topics(timeout=10)


def api_versions_request() -> bytes:
    client_id = b"raw"
    body = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def test_plaintext_client_on_the_ssl_port_fails_cleanly(tls_broker: TlsBroker) -> None:
    host, port = tls_broker.ssl.split(":")
    for _ in range(3):
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            raw.sendall(api_versions_request())
            try:
                answer = raw.recv(1024)
            except ConnectionResetError:
                answer = b""
            # Nothing, or a TLS alert record (content type 21), never a Kafka response; then the broker closes.
            assert answer == b"" or answer[0] == 21, answer
    # The broker keeps serving both kinds of client.
    topic = topic_name("after-garbage")
    create_topic(tls_broker.plaintext, topic)
    ck_produce(tls_broker.ssl, topic, records(10), **tls_broker.pki.confluent(certificate=False))
    assert len(ck_consume(tls_broker.plaintext, topic, 10)) == 10
    assert "Traceback" not in tls_broker.proc.log_tail(200)


def test_tls_settings_errors_stop_the_broker_with_the_config_named(tmp_path: Path) -> None:
    plain, ssl_port = free_ports(2)
    proc = BrokerProcess(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(tmp_path / "missing.pem"),
    }, port=plain)
    with pytest.raises(RuntimeError, match=r"ssl\.keystore\.location.*no such file"):
        proc.start(timeout_s=20)
    proc.cleanup()


def run_cli(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "moldau", *args], input=stdin, capture_output=True, timeout=60,
                          check=False)


def test_cli_tools_take_a_kafka_client_properties_file(tls_broker: TlsBroker, tmp_path: Path) -> None:
    """Kafka's Java-client names (PEM stores) for the mutual-TLS listener; each tool's client understands them."""
    pki = tls_broker.pki
    properties = tmp_path / "client.properties"
    properties.write_text("security.protocol=SSL\n"
                          "ssl.truststore.type=PEM\n"
                          f"ssl.truststore.location={pki.ca}\n"
                          "ssl.keystore.type=PEM\n"
                          f"ssl.keystore.location={pki.client}\n")
    common = ["-b", tls_broker.mtls, "--command-config", str(properties)]
    topic = topic_name("cli-tls")
    for args, stdin in ((["topics", "create", topic, "--partitions", "1"], b""),
                        (["produce", topic], b"one\ntwo\nthree\n")):
        result = run_cli(*args, *common, stdin=stdin)
        assert result.returncode == 0, result.stderr.decode()
    consumed = run_cli("consume", topic, "--from-beginning", "--max-messages", "3", "--timeout-ms", "15000",
                       *common)
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().split() == ["one", "two", "three"]
    for args in (["topics", "list"], ["groups", "list"], ["transactions", "list"],
                 ["partitions", "reassign", "--generate", "--topics", topic]):
        result = run_cli(*args, *common)
        assert result.returncode == 0, (args, result.stderr.decode())
    assert topic in run_cli("topics", "list", *common).stdout.decode()
    # librdkafka's own names work too; without the file the same listener refuses the tool.
    librdkafka = tmp_path / "librdkafka.properties"
    librdkafka.write_text(f"security.protocol=ssl\nssl.ca.location={pki.ca}\n"
                          f"ssl.certificate.location={pki.client_cert}\nssl.key.location={pki.client_key}\n")
    assert topic in run_cli("topics", "list", "-b", tls_broker.mtls, "--command-config",
                            str(librdkafka)).stdout.decode()
    refused = run_cli("topics", "list", "-b", tls_broker.mtls)
    assert refused.returncode != 0 and b"Traceback" not in refused.stderr
