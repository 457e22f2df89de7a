"""The schema registry on an https listener with HTTP Basic authentication against the cluster's SASL users,
with confluent-kafka's SchemaRegistryClient and serializers, curl-like raw requests and the `moldau` CLI.

One broker serves every test: a PLAINTEXT listener (topics), a SASL_PLAINTEXT listener whose PLAIN users come
from its JAAS config and whose SCRAM users are made through AdminClient, and the registry on
https://127.0.0.1:<port> with `schema.registry.authentication.method=BASIC`.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from moldau.connect.converters.avro import AvroConverter
from moldau.connect.data import INT64_SCHEMA, SchemaBuilder, Struct
from moldau.connect.errors import ConfigException, DataException
from moldau.net.ports import free_ports
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.java_stores import KEY_PASSWORD, STORE_PASSWORD, JavaStores, keytool, make_java_stores
from tests.support.polling import wait_until
from tests.support.registry_schemas import schema_text
from tests.support.sasl import JAAS, MECHANISMS, USERS, ck_conf, create_scram_users
from tests.support.tls import Pki, make_pki

AVRO = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})


class SecuredRegistry:
    def __init__(self, proc: BrokerProcess, sasl: str, url: str, pki: Pki) -> None:
        self.proc = proc
        self.sasl = sasl
        self.url = url
        self.pki = pki

    def client(self, user: str | None, password: str | None) -> SchemaRegistryClient:
        conf = {"url": self.url, "ssl.ca.location": str(self.pki.ca)}
        if user is not None:
            conf["basic.auth.user.info"] = f"{user}:{password}"
        return SchemaRegistryClient(conf)

    def raw(self, path: str, authorization: str | None = None,
            context: ssl.SSLContext | None = None) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(self.url + path, headers={"Authorization": authorization}
                                         if authorization else {})
        try:
            with urllib.request.urlopen(request, timeout=10,
                                        context=context or self.pki.client_context()) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredRegistry]:
    directory = tmp_path_factory.mktemp("registry-security")
    pki = make_pki(directory / "pki")
    plain, sasl, registry = free_ports(3)
    proc = BrokerProcess(directory, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "schema.registry.listeners": f"https://127.0.0.1:{registry}",
        "schema.registry.authentication.method": "BASIC",
        **pki.broker_config(),
    }, port=plain)
    proc.start()
    try:
        create_scram_users(f"127.0.0.1:{sasl}", USERS)
        yield SecuredRegistry(proc, f"127.0.0.1:{sasl}", f"https://127.0.0.1:{registry}", pki)
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_plain_and_scram_users_register_and_read_schemas(secured: SecuredRegistry) -> None:
    alice = secured.client("alice", "alice-secret")  # a PLAIN user of the JAAS config
    schema_id = alice.register_schema("orders-value", Schema(AVRO, "AVRO"))
    for user, password in (USERS["SCRAM-SHA-256"], USERS["SCRAM-SHA-512"]):
        reader = secured.client(user, password)
        assert json.loads(schema_text(reader.get_schema(schema_id))) == json.loads(AVRO)
        assert reader.get_latest_version("orders-value").schema_id == schema_id


def test_serializers_round_trip_through_the_broker(secured: SecuredRegistry) -> None:
    topic = "secured-orders"
    create_topic(secured.proc.bootstrap, topic)
    registry = secured.client(*USERS["SCRAM-SHA-256"])
    serialize = AvroSerializer(registry, AVRO)
    producer = Producer(ck_conf(secured.sasl, "PLAIN", "alice", "alice-secret"))
    for i in range(3):
        producer.produce(topic, serialize({"id": i}, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer(ck_conf(secured.sasl, "SCRAM-SHA-512", *USERS["SCRAM-SHA-512"])
                        | {"group.id": "secured-readers", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deserialize = AvroDeserializer(registry)
    seen: list[int] = []
    try:
        while len(seen) < 3:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                seen.append(deserialize(msg.value(), SerializationContext(topic, MessageField.VALUE))["id"])
    finally:
        consumer.close()
    assert seen == [0, 1, 2]


def test_requests_without_valid_credentials_get_401(secured: SecuredRegistry) -> None:
    for authorization in (None, basic("alice", "wrong"), basic("nobody", "x"), "Bearer token", "Basic !!"):
        status, headers, body = secured.raw("/subjects", authorization)
        assert status == 401, authorization
        assert json.loads(body) == {"error_code": 401, "message": "Unauthorized"}
        assert {k.lower(): v for k, v in headers.items()}["www-authenticate"] == 'Basic realm="SchemaRegistry"'
    with pytest.raises(SchemaRegistryError) as refused:
        secured.client("bob", "not-bob's").get_subjects()
    assert refused.value.http_status_code == 401
    assert secured.raw("/subjects", basic("alice", "alice-secret"))[0] == 200


def test_a_changed_scram_password_takes_effect(secured: SecuredRegistry) -> None:
    admin = AdminClient(ck_conf(secured.sasl, "PLAIN", "admin", "admin-secret"))
    dave = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"one")
    for future in admin.alter_user_scram_credentials([dave]).values():
        future.result(timeout=30)
    assert secured.raw("/subjects", basic("dave", "one"))[0] == 200
    changed = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"two")
    for future in admin.alter_user_scram_credentials([changed]).values():
        future.result(timeout=30)
    # The broker applies the credential from the metadata log it replays: poll until it has.
    wait_until(lambda: secured.raw("/subjects", basic("dave", "two"))[0] == 200, 10, "the new password accepted")
    assert secured.raw("/subjects", basic("dave", "one"))[0] == 401


def test_tls_is_required_and_checked(secured: SecuredRegistry) -> None:
    untrusting = ssl.create_default_context()  # the system's CAs, which did not sign the broker's certificate
    with pytest.raises(urllib.error.URLError) as refused:
        secured.raw("/subjects", basic("alice", "alice-secret"), context=untrusting)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)
    plain_http = secured.url.replace("https://", "http://")
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        urllib.request.urlopen(plain_http + "/subjects", timeout=10)


def test_the_cli_reaches_an_authenticating_https_registry(secured: SecuredRegistry, tmp_path: Path) -> None:
    schema = tmp_path / "order.avsc"
    schema.write_text(AVRO)
    url = secured.url.replace("https://", "https://carol:carol-secret@")

    def moldau(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "moldau", "schemas", *args, "--registry", url,
                               "--registry-ca", str(secured.pki.ca)], capture_output=True, text=True, timeout=60)

    registered = moldau("register", "cli-orders-value", str(schema))
    assert registered.returncode == 0, registered.stderr
    listed = moldau("list")
    assert "cli-orders-value" in listed.stdout.split(), listed.stderr
    wrong = subprocess.run([sys.executable, "-m", "moldau", "schemas", "list", "--registry",
                            secured.url.replace("https://", "https://carol:nope@"), "--registry-ca",
                            str(secured.pki.ca)], capture_output=True, text=True, timeout=60)
    assert wrong.returncode != 0
    assert "401" in wrong.stderr


def test_connect_converters_use_confluents_security_configs(secured: SecuredRegistry) -> None:
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    trust = {"schema.registry.ssl.truststore.location": str(secured.pki.ca)}
    from_user_info = AvroConverter()
    from_user_info.configure({"schema.registry.url": secured.url, "basic.auth.credentials.source": "USER_INFO",
                              "basic.auth.user.info": "bob:bob-secret", **trust}, False)
    data = from_user_info.from_connect_data("connect-secured", schema, Struct(schema).put("id", 7))
    assert data is not None
    from_url = AvroConverter()
    from_url.configure({"schema.registry.url": secured.url.replace("https://", "https://alice:alice-secret@"),
                        **trust}, False)
    assert from_url.to_connect_data("connect-secured", data).value == Struct(schema).put("id", 7)
    # As in Confluent's converters, basic.auth.user.info alone (source URL) sends no credentials.
    ignored = AvroConverter()
    ignored.configure({"schema.registry.url": secured.url, "basic.auth.user.info": "bob:bob-secret", **trust}, False)
    with pytest.raises(DataException):
        ignored.to_connect_data("connect-secured", data)


def test_connect_converters_trust_a_java_trust_store_as_confluents_do(secured: SecuredRegistry,
                                                                      tmp_path: Path) -> None:
    """`schema.registry.ssl.truststore.*` naming a JKS store keytool wrote (Confluent's default type), as a
    Connect worker's converter config says it; a wrong password is refused with the config named."""
    store = tmp_path / "registry-trust.jks"
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(secured.pki.ca), "-storetype", "JKS",
            "-keystore", str(store), "-storepass", "trust-secret")
    trust = {"schema.registry.ssl.truststore.location": str(store),
             "schema.registry.ssl.truststore.password": "trust-secret",
             "basic.auth.credentials.source": "USER_INFO", "basic.auth.user.info": "bob:bob-secret"}
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    converter = AvroConverter()
    converter.configure({"schema.registry.url": secured.url, **trust}, False)
    data = converter.from_connect_data("connect-java-trust", schema, Struct(schema).put("id", 11))
    assert data is not None
    assert converter.to_connect_data("connect-java-trust", data).value == Struct(schema).put("id", 11)
    with pytest.raises(ConfigException, match=r"schema\.registry\.ssl\.truststore\.location.*integrity check fails"):
        AvroConverter().configure({"schema.registry.url": secured.url, **trust,
                                   "schema.registry.ssl.truststore.password": "wrong"}, False)


@pytest.fixture(scope="module")
def client_certificate_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Pki, JavaStores]]:
    """A broker whose https registry requires a client certificate, signed by the test CA or the self-signed one
    of the Java key stores keytool makes (both in its trust store); no HTTP authentication."""
    directory = tmp_path_factory.mktemp("registry-client-certificates")
    pki = make_pki(directory / "pki")
    stores = make_java_stores(directory / "java", pki.ca)
    trusted = directory / "trusted-clients.pem"
    trusted.write_text(pki.ca.read_text() + stores.broker_certificate.read_text())
    plain, registry = free_ports(2)
    proc = BrokerProcess(directory, {
        "schema.registry.listeners": f"https://127.0.0.1:{registry}", **pki.broker_config(),
        "listener.name.schema_registry.ssl.client.auth": "required",
        "listener.name.schema_registry.ssl.truststore.location": str(trusted),
    }, port=plain)
    proc.start()
    try:
        yield f"https://127.0.0.1:{registry}", pki, stores
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def test_connect_converters_present_a_client_certificate_from_any_key_store(
        client_certificate_registry: tuple[str, Pki, JavaStores]) -> None:
    """`schema.registry.ssl.keystore.*` as Confluent names them: a keytool JKS store whose key has its own
    password, the same entry as PKCS12, and a PEM file; without one the registry refuses the TLS handshake, and a
    wrong password is refused with the config named."""
    url, pki, stores = client_certificate_registry
    schema = SchemaBuilder.struct().field("id", INT64_SCHEMA).build()
    trust = {"schema.registry.url": url, "schema.registry.ssl.truststore.location": str(pki.ca)}
    key_stores = {
        "jks": {"schema.registry.ssl.keystore.location": str(stores.jks_keystore),
                "schema.registry.ssl.keystore.password": STORE_PASSWORD,
                "schema.registry.ssl.key.password": KEY_PASSWORD},
        "pkcs12": {"schema.registry.ssl.keystore.location": str(stores.pkcs12_keystore),
                   "schema.registry.ssl.keystore.type": "PKCS12",
                   "schema.registry.ssl.keystore.password": STORE_PASSWORD},
        "pem": {"schema.registry.ssl.keystore.location": str(pki.client)},
    }
    for n, (kind, key_store) in enumerate(key_stores.items()):
        converter = AvroConverter()
        converter.configure({**trust, **key_store}, False)
        data = converter.from_connect_data(f"connect-client-cert-{kind}", schema, Struct(schema).put("id", n))
        assert data is not None, kind
        assert converter.to_connect_data(f"connect-client-cert-{kind}", data).value == Struct(schema).put("id", n)
    without = AvroConverter()
    without.configure(trust, False)
    with pytest.raises(DataException):
        without.from_connect_data("connect-client-cert-none", schema, Struct(schema).put("id", 9))
    with pytest.raises(ConfigException, match=r"schema\.registry\.ssl\.keystore\.location"):
        AvroConverter().configure({**trust, **key_stores["pkcs12"],
                                   "schema.registry.ssl.keystore.password": "wrong"}, False)
