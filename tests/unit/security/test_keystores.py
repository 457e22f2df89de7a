"""Java key and trust stores written by Java's keytool (JKS and PKCS12) read into what OpenSSL uses, a TLS handshake
served from them, and every way a store can be wrong refused with what is wrong and the config named."""

from __future__ import annotations

import dataclasses
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from moldau.config import ConfigError
from moldau.security import keystores
from moldau.security.keystore_compat import check_identity, memory_handshake
from moldau.security.tls import TlsSettings, server_context
from tests.support.java_stores import KEY_PASSWORD, STORE_PASSWORD, TRUST_PASSWORD, JavaStores, make_java_stores
from tests.support.tls import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> JavaStores:
    return make_java_stores(tmp_path_factory.mktemp("java-stores"), pki.ca)


def _public(entry: keystores.KeyEntry) -> bytes:
    return entry.key.public_key().public_bytes(serialization.Encoding.DER,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)


def _broker_certificate(stores: JavaStores) -> x509.Certificate:
    return x509.load_pem_x509_certificate(stores.broker_certificate.read_bytes())


@pytest.mark.parametrize("which", ["jks", "pkcs12"])
def test_a_key_store_keytool_wrote_gives_the_broker_key_and_its_certificate(stores: JavaStores, which: str) -> None:
    path, key_password = ((stores.jks_keystore, KEY_PASSWORD) if which == "jks"
                          else (stores.pkcs12_keystore, None))
    entry = keystores.read_key_store(path.read_bytes(), STORE_PASSWORD, key_password)
    certificate = _broker_certificate(stores)
    assert entry.chain == (certificate,)
    assert _public(entry) == certificate.public_key().public_bytes(serialization.Encoding.DER,
                                                                   serialization.PublicFormat.SubjectPublicKeyInfo)


@pytest.mark.parametrize(("which", "password"), [("jks", TRUST_PASSWORD), ("jks", None), ("pkcs12", TRUST_PASSWORD)])
def test_a_trust_store_keytool_wrote_gives_its_ca(stores: JavaStores, pki: Pki, which: str,
                                                  password: str | None) -> None:
    path = stores.jks_truststore if which == "jks" else stores.pkcs12_truststore
    ca = x509.load_pem_x509_certificate(pki.ca.read_bytes())
    assert keystores.read_trust_store(path.read_bytes(), password) == (ca,)


def _flip_a_byte(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


@pytest.mark.parametrize(("case", "message"), [
    ("jks, wrong store password", "integrity check fails: the store password is wrong"),
    ("jks, wrong key password", "private key's password is wrong"),
    ("jks, key password left out and not the store's", "private key's password is wrong"),
    ("jks, no password", "needs its password (ssl.keystore.password)"),
    ("jks, truncated", "ends early: the file is damaged"),
    ("jks, a byte changed", "integrity check fails"),
    ("pkcs12, wrong password", "PKCS12 store that cannot be opened: the store password is wrong"),
    ("pkcs12, truncated", "cannot be opened"),
    ("jceks", "JCEKS store, which Moldau cannot read: convert it with `keytool -importkeystore"),
    ("a pem file", "a PEM file, not a Java store: set the store's type to PEM"),
    ("nothing", "neither a PKCS12 nor a JKS store"),
    ("a trust store as key store", "holds no private key"),
])
def test_a_key_store_that_cannot_be_used_is_refused_saying_why(stores: JavaStores, pki: Pki, case: str,
                                                               message: str) -> None:
    jks, p12 = stores.jks_keystore.read_bytes(), stores.pkcs12_keystore.read_bytes()
    data, store_password, key_password = {
        "jks, wrong store password": (jks, "wrong", KEY_PASSWORD),
        "jks, wrong key password": (jks, STORE_PASSWORD, "wrong"),
        "jks, key password left out and not the store's": (jks, STORE_PASSWORD, None),
        "jks, no password": (jks, None, KEY_PASSWORD),
        "jks, truncated": (jks[:len(jks) // 2], STORE_PASSWORD, KEY_PASSWORD),
        "jks, a byte changed": (_flip_a_byte(jks, len(jks) // 2), STORE_PASSWORD, KEY_PASSWORD),
        "pkcs12, wrong password": (p12, "wrong", None),
        "pkcs12, truncated": (p12[:len(p12) // 2], STORE_PASSWORD, None),
        "jceks": (stores.jceks_keystore.read_bytes(), STORE_PASSWORD, None),
        "a pem file": (pki.server.read_bytes(), STORE_PASSWORD, None),
        "nothing": (b"", STORE_PASSWORD, None),
        "a trust store as key store": (stores.jks_truststore.read_bytes(), TRUST_PASSWORD, None),
    }[case]
    with pytest.raises(keystores.StoreError, match=message.replace("(", r"\(").replace(")", r"\)")):
        keystores.read_key_store(data, store_password, key_password)


def test_a_pkcs12_trust_store_needs_its_password(stores: JavaStores) -> None:
    with pytest.raises(keystores.StoreError, match="it needs its password"):
        keystores.read_trust_store(stores.pkcs12_truststore.read_bytes(), None)


def _java_settings(stores: JavaStores, keystore_type: str, keystore: Path, **changes: str | None) -> TlsSettings:
    fields: dict[str, str | None] = {
        "keystore_type": keystore_type, "keystore_location": str(keystore), "keystore_password": STORE_PASSWORD,
        "key_password": KEY_PASSWORD if keystore == stores.jks_keystore else None,
        "truststore_type": "JKS", "truststore_location": str(stores.jks_truststore),
        "truststore_password": TRUST_PASSWORD, **changes}
    return TlsSettings("SSL", client_auth="required", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("keystore_type", "which"), [("JKS", "jks"), ("PKCS12", "pkcs12"),
                                                      ("JKS", "pkcs12"), ("PKCS12", "jks")])
def test_a_listener_serves_from_java_stores_and_verifies_clients_against_them(
        stores: JavaStores, pki: Pki, keystore_type: str, which: str) -> None:
    """Either format under either type, as Java reads them: a PKCS12 file under Kafka's default type JKS is what
    keytool has written since Java 9."""
    keystore = stores.jks_keystore if which == "jks" else stores.pkcs12_keystore
    server = server_context(_java_settings(stores, keystore_type, keystore))
    client = ssl.create_default_context(cafile=str(stores.broker_certificate))
    client.load_cert_chain(str(pki.client))
    client_side, server_side = memory_handshake(server, client, "localhost")
    subject = dict(item[0] for item in server_side.getpeercert()["subject"])  # type: ignore[index, misc]
    assert subject["commonName"] == "alice"
    assert client_side.getpeercert()["subject"]  # type: ignore[index]

    stranger = ssl.create_default_context(cafile=str(stores.broker_certificate))  # no client certificate
    with pytest.raises(ssl.SSLError):
        memory_handshake(server, stranger, "localhost")


@pytest.mark.parametrize(("changes", "config", "message"), [
    ({"keystore_password": "wrong"}, "ssl.keystore.location", "integrity check fails"),
    ({"keystore_password": None}, "ssl.keystore.location", "needs its password"),
    ({"key_password": "wrong"}, "ssl.keystore.location", "private key's password is wrong"),
    ({"truststore_password": "wrong"}, "ssl.truststore.location", "integrity check fails"),
    ({"truststore_type": "PKCS12", "truststore_location": "<pkcs12 trust store>", "truststore_password": None},
     "ssl.truststore.location", "it needs its password"),
    ({"keystore_location": "<pem>"}, "ssl.keystore.location", "a PEM file, not a Java store"),
    ({"keystore_location": "/nonexistent/broker.jks"}, "ssl.keystore.location", "no such file"),
    ({"keystore_type": "BKS"}, "ssl.keystore.type", "BKS is not supported: Moldau reads PEM, PKCS12, JKS"),
    ({"keystore_location": None, "keystore_certificate_chain": "<inline>"}, "ssl.keystore.location",
     "inline certificates are PEM only"),
])
def test_a_java_store_setting_that_does_not_work_names_its_config(
        stores: JavaStores, pki: Pki, changes: dict[str, str | None], config: str, message: str) -> None:
    places = {"<pkcs12 trust store>": str(stores.pkcs12_truststore), "<pem>": str(pki.server),
              "<inline>": pki.server.read_text()}
    resolved = {name: places.get(value, value) if value is not None else None for name, value in changes.items()}
    with pytest.raises(ConfigError, match=message) as refused:
        server_context(dataclasses.replace(_java_settings(stores, "JKS", stores.jks_keystore),
                                           **resolved))  # type: ignore[arg-type]  # str fields only
    assert refused.value.name == config and "(listener SSL)" in str(refused.value)


def test_a_renewed_java_key_store_is_checked_for_the_same_identity(stores: JavaStores, pki: Pki) -> None:
    """A listener's store replaced at runtime keeps its subject (ssl.allow.dn.changes): read from Java stores too."""
    jks = _java_settings(stores, "JKS", stores.jks_keystore)
    check_identity(jks, _java_settings(stores, "PKCS12", stores.pkcs12_keystore))  # the same entry: accepted
    pem = TlsSettings("SSL", keystore_type="PEM", keystore_location=str(pki.server))
    with pytest.raises(ConfigError, match="Keystore DistinguishedName does not match"):
        check_identity(jks, pem)


def test_connect_https_listeners_take_java_stores_as_kafka_connect_configures_them(stores: JavaStores,
                                                                                  pki: Pki) -> None:
    from moldau.connect.errors import ConfigException
    from moldau.connect.worker.rest_listeners import rest_tls

    worker = {"listeners.https.ssl.keystore.location": str(stores.jks_keystore),
              "listeners.https.ssl.keystore.password": STORE_PASSWORD,
              "listeners.https.ssl.key.password": KEY_PASSWORD,
              "listeners.https.ssl.truststore.type": "PKCS12",
              "listeners.https.ssl.truststore.location": str(stores.pkcs12_truststore),
              "listeners.https.ssl.truststore.password": TRUST_PASSWORD,
              "listeners.https.ssl.client.auth": "required"}
    client = ssl.create_default_context(cafile=str(stores.broker_certificate))
    client.load_cert_chain(str(pki.client))
    memory_handshake(rest_tls(worker).server_context(), client, "localhost")
    with pytest.raises(ConfigException, match=r"listeners\.https\.ssl\.keystore\.location.*password is wrong"):
        rest_tls({**worker, "listeners.https.ssl.keystore.password": "wrong"}).server_context()


def test_client_tools_read_java_stores_from_a_kafka_client_properties_file(stores: JavaStores, pki: Pki) -> None:
    """`--command-config` (the CLI, Connect's and the mirror's clients): Java stores become PEM for librdkafka, and
    a context for Moldau's own client; without a type the file says what it is (a Kafka client's default is JKS,
    these tools took PEM files without one before)."""
    from moldau.cli.command_config import check_stores, to_client_security, to_librdkafka

    props = {"security.protocol": "SSL", "ssl.truststore.location": str(stores.jks_truststore),
             "ssl.truststore.password": TRUST_PASSWORD, "ssl.keystore.type": "PKCS12",
             "ssl.keystore.location": str(stores.pkcs12_keystore), "ssl.keystore.password": STORE_PASSWORD}
    translated = to_librdkafka(props)
    assert set(translated) == {"security.protocol", "ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"}
    assert translated["ssl.ca.pem"] == pki.ca.read_text()
    assert x509.load_pem_x509_certificate(translated["ssl.certificate.pem"].encode()) == _broker_certificate(stores)
    assert "ENCRYPTED" not in translated["ssl.key.pem"]  # librdkafka gets the key as text, no password
    pem = {"security.protocol": "SSL", "ssl.truststore.location": str(pki.ca)}  # no type: a PEM file
    assert to_librdkafka(pem) == {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}

    # Moldau's own client: its context presents the key store's certificate to a server that trusts it.
    context = to_client_security({**props, "ssl.truststore.location": str(stores.jks_truststore)}).ssl_context
    assert context is not None
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pki.server))
    server.verify_mode = ssl.CERT_REQUIRED
    server.load_verify_locations(cafile=str(stores.broker_certificate))
    context.check_hostname = False
    memory_handshake(server, context)

    with pytest.raises(ValueError, match=r"ssl\.truststore\.location=.*integrity check fails"):
        check_stores({**props, "ssl.truststore.password": "wrong"})


def test_a_connect_workers_clients_get_its_java_stores_as_pem(stores: JavaStores, pki: Pki) -> None:
    from moldau.connect.errors import ConfigException
    from moldau.connect.worker.client_overrides import librdkafka_security

    worker = {"security.protocol": "SSL", "ssl.truststore.location": str(stores.pkcs12_truststore),
              "ssl.truststore.password": TRUST_PASSWORD, "ssl.client.auth": "required"}
    assert librdkafka_security(worker) == {"security.protocol": "SSL", "ssl.ca.pem": pki.ca.read_text()}
    with pytest.raises(ConfigException, match=r"ssl\.truststore\.location") as refused:
        librdkafka_security({**worker, "ssl.truststore.password": "wrong"})
    assert "password is wrong" in str(refused.value)


def test_a_jks_store_declaring_huge_counts_and_lengths_is_refused_without_reading_past_its_end() -> None:
    """The header's entry count, a certificate's length and an alias's length are declared by the file: a store that
    declares four billion entries, or a 4 GiB certificate, in a few bytes ends early, it allocates nothing."""
    header = (0xFEEDFEED).to_bytes(4, "big") + (2).to_bytes(4, "big")
    huge_count = header + (2**32 - 1).to_bytes(4, "big")
    huge_certificate = (header + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\x00\x02ca" + bytes(8)
                        + b"\x00\x05X.509" + (2**32 - 1).to_bytes(4, "big") + b"\x30")
    huge_alias = header + (1).to_bytes(4, "big") + (2).to_bytes(4, "big") + b"\xff\xff" + b"a"
    for data in (huge_count, huge_certificate, huge_alias):
        with pytest.raises(keystores.StoreError, match="ends early"):
            keystores.read_trust_store(data, None)
