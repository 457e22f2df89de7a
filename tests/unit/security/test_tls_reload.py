"""A listener's key and trust stores replaced while it runs (`ListenerTls.reload`), checked with real handshakes
through memory BIOs, and the dynamic configs that carry them (`listener.name.<listener>.ssl.*`)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
import trustme

from moldau.config import BrokerConfig, ConfigError
from moldau.config.describe import describe_broker_configs
from moldau.security.client_security import PLAINTEXT, ClientSecurity
from moldau.security.keystore_compat import memory_handshake
from moldau.security.tls import ListenerTls, TlsSettings

STATIC = {"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL",
          "ssl.keystore.type": "PEM", "ssl.truststore.type": "PEM"}


def issue(ca: trustme.CA, path: Path, name: str) -> str:
    ca.issue_cert("127.0.0.1", common_name=name).private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


def handshake(server: ssl.SSLContext, ca: trustme.CA, client_cert: Path | None = None) -> str:
    """The common name the server's certificate has, after a handshake through memory BIOs. Raises SSLError."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ca.configure_trust(client)
    client.check_hostname = False
    client.maximum_version = ssl.TLSVersion.TLSv1_2  # a refused client certificate fails the handshake itself
    if client_cert is not None:
        client.load_cert_chain(str(client_cert))
    client_side, _ = memory_handshake(server, client)
    return common_name(client_side.getpeercert())


def test_new_handshakes_get_the_reloaded_stores_and_a_bad_store_changes_nothing(tmp_path: Path) -> None:
    ca = trustme.CA()
    first = issue(ca, tmp_path / "first.pem", "first")
    # Certificates of other names, to tell them apart in the handshakes (keystore_compat is tested below).
    config = BrokerConfig({**STATIC, "ssl.keystore.location": first, "ssl.allow.dn.changes": "true"})
    listener = ListenerTls.from_config(config, "SSL")
    assert handshake(listener.context, ca) == "first"
    assert not listener.reload(TlsSettings.for_listener(config, "SSL"))  # nothing changed
    dynamic = config.with_dynamic({"listener.name.ssl.ssl.keystore.location": issue(ca, tmp_path / "b.pem", "b")},
                                  per_broker=True)
    assert listener.reload(TlsSettings.for_listener(dynamic, "SSL"))
    assert handshake(listener.context, ca) == "b"  # the socket's context is the same; the handshake switched
    missing = config.with_dynamic({"ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match="no such file"):
        listener.reload(TlsSettings.for_listener(missing, "SSL"))
    assert handshake(listener.context, ca) == "b"
    issue(ca, tmp_path / "b.pem", "b-again")  # the same name, a new file: loaded again
    assert listener.reload(TlsSettings.for_listener(dynamic, "SSL"))
    assert handshake(listener.context, ca) == "b-again"
    required = BrokerConfig({**STATIC, "ssl.keystore.location": first, "ssl.client.auth": "required",
                             "ssl.truststore.location": str(tmp_path / "first.pem"), "ssl.allow.dn.changes": "true"})
    with pytest.raises(ConfigError, match="only the key and trust stores"):
        listener.reload(TlsSettings.for_listener(required, "SSL"))


def test_a_reloaded_trust_store_verifies_new_clients(tmp_path: Path) -> None:
    ca, other = trustme.CA(), trustme.CA()
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem.bytes())
    (tmp_path / "both.pem").write_bytes(ca.cert_pem.bytes() + other.cert_pem.bytes())
    stranger = tmp_path / "stranger.pem"
    issue(other, stranger, "stranger")
    config = BrokerConfig({**STATIC, "ssl.keystore.location": issue(ca, tmp_path / "server.pem", "server"),
                           "ssl.truststore.location": str(tmp_path / "ca.pem"), "ssl.client.auth": "required"})
    listener = ListenerTls.from_config(config, "SSL")
    with pytest.raises(ssl.SSLError):
        handshake(listener.context, ca, stranger)
    trusting = config.with_dynamic({"ssl.truststore.location": str(tmp_path / "both.pem")}, per_broker=True)
    assert listener.reload(TlsSettings.for_listener(trusting, "SSL"))
    assert handshake(listener.context, ca, stranger) == "server"


def test_dynamic_listener_configs_are_the_stores_only_and_prefixed_ones_win(tmp_path: Path) -> None:
    config = BrokerConfig({**STATIC, "ssl.keystore.location": "/static.pem",
                           "listener.name.ssl.ssl.truststore.location": "/static-prefixed.pem"})
    dynamic = config.with_dynamic({"ssl.truststore.location": "/dynamic.pem"})
    # Kafka merges the layers, then lets prefixed names override: a static prefixed value beats a dynamic plain one.
    assert dynamic.listener_value("SSL", "ssl.truststore.location") == "/static-prefixed.pem"
    assert dynamic.listener_value("OTHER", "ssl.truststore.location") == "/dynamic.pem"
    mine = dynamic.with_dynamic({"listener.name.ssl.ssl.keystore.location": "/mine.pem"}, per_broker=True)
    assert mine.listener_value("SSL", "ssl.keystore.location") == "/mine.pem"
    assert mine.listener_value("OTHER", "ssl.keystore.location") == "/static.pem"
    for refused in ("listener.name.ssl.ssl.client.auth", "ssl.client.auth", "ssl.cipher.suites"):
        with pytest.raises(ConfigError, match="dynamically"):
            config.with_dynamic({refused: "required"}, per_broker=True)
    described = {e.name: e for e in describe_broker_configs(mine)}
    entry = described["listener.name.ssl.ssl.keystore.location"]
    assert (entry.value, entry.read_only, entry.source.name) == ("/mine.pem", False, "DYNAMIC_BROKER_CONFIG")
    assert described["ssl.keystore.location"].read_only is False
    assert described["ssl.client.auth"].read_only is True


def common_name(certificate: Any) -> str:
    """The subject's common name of a certificate as `getpeercert()` gives it."""
    return next(str(value) for rdn in certificate["subject"] for key, value in rdn if key == "commonName")


def client_handshake(client: ssl.SSLContext, server_ca: trustme.CA, trusted_clients: trustme.CA) -> str:
    """A node's outgoing handshake with a listener whose certificate `server_ca` issued and which requires a client
    certificate from `trusted_clients`; the common name the client presented. Raises SSLError."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ca.issue_cert("127.0.0.1", common_name="peer").configure_cert(server)
    trusted_clients.configure_trust(server)
    server.verify_mode = ssl.CERT_REQUIRED
    server.maximum_version = ssl.TLSVersion.TLSv1_2  # a refused client certificate fails the handshake itself
    _, server_side = memory_handshake(server, client, server_hostname="127.0.0.1")
    return common_name(server_side.getpeercert())


def test_a_nodes_outgoing_connections_follow_the_reloaded_stores(tmp_path: Path) -> None:
    """ClientSecurity.reload: after the listener's stores are replaced, new outgoing handshakes present the new
    certificate and trust the new CA; unchanged settings and files reload nothing."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    (tmp_path / "old-ca.pem").write_bytes(old_ca.cert_pem.bytes())
    (tmp_path / "new-ca.pem").write_bytes(new_ca.cert_pem.bytes())
    config = BrokerConfig({**STATIC, "ssl.keystore.location": issue(old_ca, tmp_path / "old.pem", "old-node"),
                           "ssl.truststore.location": str(tmp_path / "old-ca.pem"), "ssl.client.auth": "required"})
    security = ClientSecurity.for_listener(config, "SSL")
    assert security.ssl_context is not None
    assert client_handshake(security.ssl_context, old_ca, old_ca) == "old-node"
    assert not security.reload(TlsSettings.for_listener(config, "SSL"))
    rotated = config.with_dynamic({"listener.name.ssl.ssl.keystore.location": issue(new_ca, tmp_path / "new.pem",
                                                                                     "new-node"),
                                   "listener.name.ssl.ssl.truststore.location": str(tmp_path / "new-ca.pem")},
                                  per_broker=True)
    with pytest.raises(ssl.SSLError):  # peers that moved to the new CA refuse the old context
        client_handshake(security.ssl_context, new_ca, new_ca)
    assert security.reload(TlsSettings.for_listener(rotated, "SSL"))
    assert client_handshake(security.ssl_context, new_ca, new_ca) == "new-node"
    missing = config.with_dynamic({"ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(ConfigError, match="no such file"):
        security.reload(TlsSettings.for_listener(missing, "SSL"))
    assert client_handshake(security.ssl_context, new_ca, new_ca) == "new-node"  # a bad store changes nothing
    assert not PLAINTEXT.reload(TlsSettings.for_listener(rotated, "SSL"))  # no TLS: nothing to reload


def node_cert(ca: trustme.CA, path: Path, *hosts: str, unit: str = "nodes") -> str:
    """A node's certificate with a fixed subject (CN=node,OU=<unit>,O=Moldau) for the given host names."""
    ca.issue_cert(*hosts, common_name="node", organization_name="Moldau",
                  organization_unit_name=unit).private_key_and_cert_chain_pem.write_to_path(str(path))
    return str(path)


def test_a_replaced_certificate_keeps_its_subject_and_alternative_names(tmp_path: Path) -> None:
    """As Kafka: another subject (ssl.allow.dn.changes) or fewer alternative names (ssl.allow.san.changes) refuse the
    change; the same subject with the same or more names is a renewal."""
    ca = trustme.CA()
    first = node_cert(ca, tmp_path / "a.pem", "127.0.0.1", "n1")
    renewed = node_cert(ca, tmp_path / "renewed.pem", "127.0.0.1", "n1", "n1.example.com")
    fewer = node_cert(ca, tmp_path / "fewer.pem", "127.0.0.1")
    renamed = node_cert(ca, tmp_path / "renamed.pem", "127.0.0.1", "n1", "n1.example.com", unit="other")
    for allow in ({}, {"ssl.allow.dn.changes": "true", "ssl.allow.san.changes": "true"}):
        config = BrokerConfig({**STATIC, "ssl.keystore.location": first, **allow})
        listener = ListenerTls.from_config(config, "SSL")

        def keystore(path: str, config: BrokerConfig = config) -> TlsSettings:
            return TlsSettings.for_listener(config.with_dynamic({"ssl.keystore.location": path}), "SSL")

        listener.check(keystore(renewed))  # same subject, one name more
        assert listener.reload(keystore(renewed))
        if allow:
            listener.check(keystore(fewer))
            listener.check(keystore(renamed))
            continue
        with pytest.raises(ConfigError, match="Keystore SubjectAltNames do not match"):
            listener.check(keystore(fewer))
        with pytest.raises(ConfigError, match=r"Keystore DistinguishedName does not match.*OU=other"):
            listener.check(keystore(renamed))


def test_the_inter_broker_listeners_new_stores_must_trust_the_current_ones_both_ways(tmp_path: Path) -> None:
    """Between brokers a new CA in one step is refused (peers on the current stores could not connect); trusting
    both CAs first, then the new certificate, then the new CA alone goes through, as in Kafka."""
    old_ca, new_ca = trustme.CA(), trustme.CA()
    (tmp_path / "old-ca.pem").write_bytes(old_ca.cert_pem.bytes())
    (tmp_path / "new-ca.pem").write_bytes(new_ca.cert_pem.bytes())
    (tmp_path / "both.pem").write_bytes(old_ca.cert_pem.bytes() + new_ca.cert_pem.bytes())
    old_cert = node_cert(old_ca, tmp_path / "old.pem", "127.0.0.1")
    new_cert = node_cert(new_ca, tmp_path / "new.pem", "127.0.0.1")
    static = {**STATIC, "ssl.client.auth": "required", "ssl.keystore.location": old_cert,
              "ssl.truststore.location": str(tmp_path / "old-ca.pem")}
    listener = ListenerTls.from_config(BrokerConfig(static), "SSL")

    def stores(keystore: str, truststore: str) -> TlsSettings:
        return TlsSettings.for_listener(BrokerConfig({**static, "ssl.keystore.location": keystore,
                                                      "ssl.truststore.location": str(tmp_path / truststore)}), "SSL")

    with pytest.raises(ConfigError, match="fail a TLS handshake with the current ones"):
        listener.check(stores(new_cert, "new-ca.pem"), between_brokers=True)
    listener.check(stores(new_cert, "new-ca.pem"))  # a client-only listener is not checked so
    for step in (stores(old_cert, "both.pem"), stores(new_cert, "both.pem"), stores(new_cert, "new-ca.pem")):
        listener.check(step, between_brokers=True)
        assert listener.reload(step)
