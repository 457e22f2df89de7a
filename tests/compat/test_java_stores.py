"""A broker configured as Kafka brokers usually are: Java key and trust stores that Java's keytool wrote, under
Kafka's default store type (JKS) and PKCS12, with their passwords. The real clients connect over mutual TLS; the
listener's store is switched to a PKCS12 one while the broker runs; a wrong password is refused with the config
named, at runtime (INVALID_CONFIG) and at startup."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.java_stores import (
    KEY_PASSWORD,
    STORE_PASSWORD,
    TRUST_PASSWORD,
    JavaStores,
    keytool,
    make_java_stores,
)
from tests.support.tls import Pki, make_pki

TIMEOUT_S = 30


@dataclass(frozen=True)
class JavaStoreBroker:
    proc: BrokerProcess
    pki: Pki
    stores: JavaStores
    plaintext: str
    ssl: str

    def client_conf(self) -> dict[str, str]:
        """librdkafka over mutual TLS: alice's certificate, trusting the certificate keytool made for the broker."""
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.stores.broker_certificate),
                "ssl.certificate.location": str(self.pki.client_cert),
                "ssl.key.location": str(self.pki.client_key)}


def java_store_configs(stores: JavaStores) -> dict[str, str]:
    """What a Kafka server.properties says: no store types (Kafka's default is JKS), the JKS key with a password
    of its own, a PKCS12 trust store."""
    return {"ssl.keystore.location": str(stores.jks_keystore), "ssl.keystore.password": STORE_PASSWORD,
            "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(stores.pkcs12_truststore), "ssl.truststore.password": TRUST_PASSWORD,
            "ssl.client.auth": "required"}


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaStoreBroker]:
    base = tmp_path_factory.mktemp("java-stores")
    pki = make_pki(base / "pki")
    stores = make_java_stores(base / "stores", pki.ca)
    plain, ssl_port = free_ports(2)
    (base / "broker").mkdir()
    proc = BrokerProcess(base / "broker", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        "inter.broker.listener.name": "PLAINTEXT", **java_store_configs(stores)}, port=plain)
    proc.start()
    try:
        yield JavaStoreBroker(proc, pki, stores, f"127.0.0.1:{plain}", f"127.0.0.1:{ssl_port}")
    finally:
        try:
            assert proc.stop() == 0, proc.log_tail()
        finally:
            proc.cleanup()


def _alter(bootstrap: str, configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()]
    for future in admin.incremental_alter_configs(
            [ConfigResource(ResourceType.BROKER, "1", incremental_configs=entries)]).values():
        future.result(timeout=TIMEOUT_S)


def _round_trip(broker: JavaStoreBroker, count: int) -> None:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    create_topic(broker.plaintext, topic)
    sent = [{"value": f"r{i}".encode()} for i in range(count)]
    assert len(ck_produce(broker.ssl, topic, sent, **broker.client_conf())) == count
    got = ck_consume(broker.ssl, topic, count, conf=broker.client_conf())
    assert [r.value for r in got] == [r["value"] for r in sent]


def test_clients_reach_a_listener_serving_from_keytool_stores(java_broker: JavaStoreBroker) -> None:
    _round_trip(java_broker, 10)
    # Without a certificate the trust store signed, the client is refused (ssl.client.auth=required).
    stranger = {"security.protocol": "SSL", "ssl.ca.location": str(java_broker.stores.broker_certificate)}
    admin = AdminClient({"bootstrap.servers": java_broker.ssl, **stranger})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)


def test_the_listener_switches_to_a_pkcs12_store_and_refuses_a_wrong_password(java_broker: JavaStoreBroker) -> None:
    prefix = "listener.name.ssl."
    with pytest.raises(KafkaException) as refused:
        _alter(java_broker.plaintext, {prefix + "ssl.keystore.type": "PKCS12",
                                       prefix + "ssl.keystore.location": str(java_broker.stores.pkcs12_keystore),
                                       prefix + "ssl.keystore.password": "not-the-password"})
    error = refused.value.args[0]
    assert error.code() == 40 and "ssl.keystore.location" in error.str() and "password is wrong" in error.str()
    _round_trip(java_broker, 3)  # still served from the JKS store

    _alter(java_broker.plaintext, {prefix + "ssl.keystore.type": "PKCS12",
                                   prefix + "ssl.keystore.location": str(java_broker.stores.pkcs12_keystore),
                                   prefix + "ssl.keystore.password": STORE_PASSWORD})
    _round_trip(java_broker, 3)
    assert "Traceback" not in java_broker.proc.log_tail(200)


def test_the_cli_takes_java_stores_in_a_kafka_client_properties_file(java_broker: JavaStoreBroker,
                                                                     tmp_path: Path) -> None:
    """A client.properties as Kafka's scripts take it: a JKS trust store (keytool) with the broker's certificate,
    alice's certificate and key in a PKCS12 key store, no types (Kafka's default, JKS, reads both formats)."""
    trust = tmp_path / "client-trust.jks"
    keytool("-importcert", "-noprompt", "-alias", "broker", "-file", str(java_broker.stores.broker_certificate),
            "-storetype", "JKS", "-keystore", str(trust), "-storepass", TRUST_PASSWORD)
    key = serialization.load_pem_private_key(java_broker.pki.client_key.read_bytes(), password=None)
    certificate = x509.load_pem_x509_certificate(java_broker.pki.client_cert.read_bytes())
    keystore = tmp_path / "alice.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"alice", key, certificate, None,  # type: ignore[arg-type]  # an RSA key, which PKCS12 takes
        serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    properties = tmp_path / "client.properties"
    properties.write_text(f"security.protocol=SSL\nssl.truststore.location={trust}\n"
                          f"ssl.truststore.password={TRUST_PASSWORD}\nssl.keystore.location={keystore}\n"
                          f"ssl.keystore.password={STORE_PASSWORD}\n")
    topic = f"cli-java-{uuid.uuid4().hex[:8]}"
    create_topic(java_broker.plaintext, topic)
    listed = subprocess.run([sys.executable, "-m", "moldau", "topics", "list", "--bootstrap-server",
                             java_broker.ssl, "--command-config", str(properties)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert listed.returncode == 0 and topic in listed.stdout.split(), listed.stderr
    properties.write_text(properties.read_text().replace(f"truststore.password={TRUST_PASSWORD}",
                                                         "truststore.password=wrong"))
    refused = subprocess.run([sys.executable, "-m", "moldau", "topics", "list", "--bootstrap-server",
                              java_broker.ssl, "--command-config", str(properties)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0 and "ssl.truststore.location" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_wrong_store_password_stops_the_start_with_the_config_named(java_broker: JavaStoreBroker,
                                                                     tmp_path: Path) -> None:
    plain, ssl_port = free_ports(2)
    proc = BrokerProcess(tmp_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        **java_store_configs(java_broker.stores), "ssl.truststore.password": "wrong"}, port=plain)
    with pytest.raises(RuntimeError, match=r"ssl\.truststore\.location.*store password is wrong"):
        proc.start(timeout_s=30)
    proc.cleanup()
