"""A TLS listener's key and trust stores replaced while the broker runs, as Kafka operators do it: with
IncrementalAlterConfigs (confluent-kafka's AdminClient) of `listener.name.<listener>.ssl.keystore.location` and
`...truststore.location` for the broker. New connections get the new certificate and trust; a connection open
before keeps working; a store that cannot be loaded is refused with INVALID_CONFIG and changes nothing; a file
replaced under the same name is loaded when its config is set again; and the broker restarts with the stores
last set. Certificates are made by the test with trustme."""

from __future__ import annotations

import socket
import ssl
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trustme
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic

TIMEOUT_S = 30


@dataclass
class Rotating:
    proc: BrokerProcess
    base: Path
    ca: trustme.CA
    plaintext: str
    ssl_port: int
    mtls_port: int

    def issue(self, common_name: str, ca: trustme.CA | None = None, name: str = "") -> Path:
        path = self.base / (name or f"{common_name}.pem")
        cert = (ca or self.ca).issue_cert("127.0.0.1", "localhost", common_name=common_name)
        cert.private_key_and_cert_chain_pem.write_to_path(str(path))
        return path


@pytest.fixture
def rotating(tmp_path: Path) -> Iterator[Rotating]:
    ca = trustme.CA()
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem.bytes())
    plain, ssl_port, mtls_port = free_ports(3)
    (tmp_path / "broker").mkdir()
    proc = BrokerProcess(tmp_path / "broker", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tmp_path / "ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        # The SSL listener's certificates are told apart by their common names, which Kafka's default refuses to
        # change at runtime; the MTLS listener keeps that default.
        "listener.name.ssl.ssl.allow.dn.changes": "true",
    }, port=plain)
    rotating = Rotating(proc, tmp_path, ca, f"127.0.0.1:{plain}", ssl_port, mtls_port)
    proc.overrides["ssl.keystore.location"] = str(rotating.issue("first"))
    proc.start()
    try:
        yield rotating
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()


def served_name(port: int, ca: Path, client: Path | None = None) -> str:
    """The common name of the certificate a new TLS connection to the port is served."""
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    if client is not None:
        context.load_cert_chain(str(client))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, context.wrap_socket(raw) as tls:
        subject = common_name(tls.getpeercert())
        # With TLS 1.3 a refused client certificate shows after the handshake: the request gets no answer.
        body = struct.pack(">hhih", 18, 0, 7, -1)  # ApiVersions v0, correlation id 7, no client id
        tls.sendall(struct.pack(">i", len(body)) + body)
        answer = b""
        while len(answer) < 8:
            chunk = tls.recv(8 - len(answer))
            if not chunk:
                raise ConnectionError("the broker closed the connection without answering")
            answer += chunk
    return subject


def alter(bootstrap: str, node: str, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
               for name, value in configs.items()]
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, node, incremental_configs=entries)])
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def test_a_listeners_certificate_and_trust_are_replaced_while_it_runs(rotating: Rotating) -> None:
    ca = rotating.base / "ca.pem"
    keystore = "listener.name.ssl.ssl.keystore.location"
    assert served_name(rotating.ssl_port, ca) == "first"
    topic = f"rotate-{uuid.uuid4().hex[:8]}"
    create_topic(rotating.plaintext, topic, partitions=1)
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{rotating.ssl_port}", **conf})
    delivered: list[object] = []
    producer.produce(topic, value=b"before", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0 and delivered == [None]

    alter(rotating.plaintext, "1", **{keystore: str(rotating.issue("second"))})
    assert served_name(rotating.ssl_port, ca) == "second"
    assert served_name(rotating.mtls_port, ca, rotating.issue("client")) == "first"  # another listener's own
    producer.produce(topic, value=b"after", on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(TIMEOUT_S) == 0 and delivered == [None, None]  # the open connection goes on
    got = ck_consume(f"127.0.0.1:{rotating.ssl_port}", topic, 2, conf=conf)
    assert [r.value for r in got] == [b"before", b"after"]

    # A store that cannot be loaded is refused before it is written; the listener keeps the one it has.
    with pytest.raises(KafkaException) as refused:
        alter(rotating.plaintext, "1", **{keystore: str(rotating.base / "missing.pem")})
    error = refused.value.args[0]
    assert error.code() == 40 and "ssl.keystore.location" in error.str(), error  # INVALID_CONFIG
    assert served_name(rotating.ssl_port, ca) == "second"

    # The file replaced under the same name is loaded when its config is set again.
    rotating.issue("third", name="second.pem")
    alter(rotating.plaintext, "1", **{keystore: str(rotating.base / "second.pem")})
    assert served_name(rotating.ssl_port, ca) == "third"

    # Trust: a client certificate of another CA is refused until the listener's trust store includes it.
    other = trustme.CA()
    stranger = rotating.issue("stranger", ca=other)
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        served_name(rotating.mtls_port, ca, stranger)
    both = rotating.base / "both.pem"
    both.write_bytes(rotating.ca.cert_pem.bytes() + other.cert_pem.bytes())
    alter(rotating.plaintext, "1", **{"listener.name.mtls.ssl.truststore.location": str(both)})
    assert served_name(rotating.mtls_port, ca, stranger) == "first"

    # DescribeConfigs shows what was set, and a restart serves it.
    admin = AdminClient({"bootstrap.servers": rotating.plaintext})
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entries = next(iter(described.values())).result(timeout=TIMEOUT_S)
    assert entries[keystore].value == str(rotating.base / "second.pem")
    assert entries[keystore].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    rotating.proc.restart()
    assert served_name(rotating.ssl_port, ca) == "third"
    assert served_name(rotating.mtls_port, ca, stranger) == "first"


def test_a_certificate_of_another_subject_is_refused_by_default(rotating: Rotating) -> None:
    """ssl.allow.dn.changes=false (Kafka's default, the MTLS listener's here): a key store whose certificate names
    another subject is refused with INVALID_CONFIG; the same subject, renewed, is taken."""
    keystore = "listener.name.mtls.ssl.keystore.location"
    ca, client = rotating.base / "ca.pem", rotating.issue("client")
    with pytest.raises(KafkaException) as refused:
        alter(rotating.plaintext, "1", **{keystore: str(rotating.issue("somebody-else"))})
    error = refused.value.args[0]
    assert error.code() == 40 and "Keystore DistinguishedName does not match" in error.str(), error
    assert served_name(rotating.mtls_port, ca, client) == "first"
    # trustme gives every certificate a unique OU: reuse the current subject for the renewal.
    renewed = rotating.base / "first-renewed.pem"
    rotating.ca.issue_cert("127.0.0.1", "localhost", common_name="first", organization_unit_name=_unit(
        rotating.base / "first.pem")).private_key_and_cert_chain_pem.write_to_path(str(renewed))
    alter(rotating.plaintext, "1", **{keystore: str(renewed)})
    assert served_name(rotating.mtls_port, ca, client) == "first"


def _unit(path: Path) -> str:
    """The organizational unit of the certificate at the head of a PEM file."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    certificate = x509.load_pem_x509_certificates(path.read_bytes())[0]
    return str(certificate.subject.get_attributes_for_oid(NameOID.ORGANIZATIONAL_UNIT_NAME)[0].value)


def test_only_a_listeners_stores_change_at_runtime(rotating: Rotating) -> None:
    for name in ("listener.name.ssl.ssl.client.auth", "ssl.client.auth", "ssl.enabled.protocols"):
        with pytest.raises(KafkaException) as refused:
            alter(rotating.plaintext, "1", **{name: "required"})
        assert refused.value.args[0].code() == 40, refused.value  # INVALID_CONFIG


def common_name(certificate: Any) -> str:
    """The subject's common name of a certificate as `getpeercert()` gives it."""
    return next(str(value) for rdn in certificate["subject"] for key, value in rdn if key == "commonName")
