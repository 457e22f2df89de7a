"""TLS settings, contexts and certificate principals: config errors, mapping rules, and a real handshake over
loopback where a client certificate's subject becomes the connection's principal."""

from __future__ import annotations

import asyncio
import ssl
import struct
from pathlib import Path

import pytest
import trustme
import uvloop

from moldau.config import BrokerConfig, ConfigError
from moldau.net.client import ClientConnection
from moldau.protocol.framing import Frame
from moldau.protocol.wire import ResponsePart
from moldau.security.client_security import ClientSecurity
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.ssl_principal import NoMatchingRule, PrincipalMapper, subject_name
from moldau.security.tls import ListenerTls, TlsSettings, openssl_cipher_name, server_context
from moldau.server.connection import KafkaConnection
from moldau.server.connection_limits import ConnectionLimits, ReceiveBudget


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate for CN=alice,OU=eng,O=Moldau."""
    directory = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("alice@example.com", common_name="alice", organization_name="Moldau",
                           organization_unit_name="eng")
    paths = {"ca": directory / "ca.pem", "server": directory / "server.pem", "client": directory / "client.pem"}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    server.private_key_and_cert_chain_pem.write_to_path(str(paths["server"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    result = {name: str(path) for name, path in paths.items()}
    result["server_chain"] = "".join(blob.bytes().decode() for blob in server.cert_chain_pems)
    result["server_key"] = server.private_key_pem.bytes().decode()
    return result


def ssl_config(pki: dict[str, str], **extra: str) -> BrokerConfig:
    return BrokerConfig({"listeners": "SSL://127.0.0.1:0", "listener.security.protocol.map": "SSL:SSL",
                         "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["server"],
                         "ssl.truststore.type": "PEM", "ssl.truststore.location": pki["ca"], **extra})


# -- subjects and mapping rules ---------------------------------------------------------------------------------

def test_subject_is_rfc2253_most_specific_first_and_escaped() -> None:
    subject = ((("countryName", "CZ"),), (("organizationName", "Moldau, Inc"),),
               (("organizationalUnitName", "eng"),), (("commonName", "alice"),))
    assert subject_name(subject) == "CN=alice,OU=eng,O=Moldau\\, Inc,C=CZ"
    assert subject_name(((("commonName", "#x "),),)) == "CN=\\#x\\ "
    assert subject_name(((("emailAddress", "a@b"),),)) == "1.2.840.113549.1.9.1=#1603614062"
    assert subject_name(((("commonName", "a"), ("userId", "7")),)) == "CN=a+UID=7"


def test_mapping_rules_first_match_wins() -> None:
    mapper = PrincipalMapper("RULE:^CN=([a-zA-Z0-9.]*),OU=ENG.*$/$1@eng/L, RULE:^CN=(.*?),.*$/$1/U, DEFAULT")
    assert mapper.user_name("CN=Bob,OU=ENG,O=M") == "bob@eng"
    assert mapper.user_name("CN=carol,O=M") == "CAROL"
    assert mapper.user_name("O=M") == "O=M"
    assert PrincipalMapper("DEFAULT").user_name("CN=a,O=b") == "CN=a,O=b"
    assert PrincipalMapper("RULE:^CN=(.*)/x\\/$1/").user_name("CN=a,b") == "x/a,b"
    with pytest.raises(NoMatchingRule):
        PrincipalMapper("RULE:^CN=(.*)$/$1/").user_name("O=x")
    with pytest.raises(ValueError, match=r"ssl\.principal\.mapping\.rules"):
        PrincipalMapper("RULES:x")


def test_cipher_suites_take_standard_names() -> None:
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256") == "ECDHE-ECDSA-CHACHA20-POLY1305"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"
    assert openssl_cipher_name("TLS_AES_128_GCM_SHA256") is None
    assert openssl_cipher_name("ECDHE-RSA-AES256-GCM-SHA384") == "ECDHE-RSA-AES256-GCM-SHA384"


# -- settings and their errors ------------------------------------------------------------------------------------

def test_listener_overrides_win(pki: dict[str, str]) -> None:
    config = ssl_config(pki, **{"ssl.client.auth": "none", "listener.name.ssl.ssl.client.auth": "required",
                                "listener.name.other.ssl.client.auth": "requested"})
    assert TlsSettings.for_listener(config, "SSL").client_auth == "required"
    assert TlsSettings.for_listener(config, "PLAIN").client_auth == "none"
    assert ListenerTls.from_config(config, "SSL").context.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match=r"ssl\.client\.auth"):
        BrokerConfig({"listener.name.ssl.ssl.client.auth": "sometimes"})


@pytest.mark.parametrize(("extra", "named"), [
    ({"ssl.keystore.location": "/nonexistent.pem"}, "ssl.keystore.location"),
    ({"ssl.keystore.type": "BKS"}, "ssl.keystore.type"),
    ({"listener.name.ssl.ssl.truststore.type": "JCEKS", "ssl.client.auth": "required"}, "ssl.truststore.type"),
    # A PEM file under a Java store type: the message says to set the type to PEM.
    ({"ssl.keystore.type": "JKS"}, "ssl.keystore.location"),
    ({"listener.name.ssl.ssl.truststore.type": "PKCS12", "ssl.client.auth": "required"}, "ssl.truststore.location"),
    ({"ssl.truststore.location": "/nonexistent.pem", "ssl.client.auth": "requested"}, "ssl.truststore.location"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "ssl.cipher.suites"),
    ({"ssl.enabled.protocols": "TLSv1.3", "ssl.protocol": "TLSv1.2"}, "ssl.enabled.protocols"),
    ({"ssl.principal.mapping.rules": "RULE:broken"}, "ssl.principal.mapping.rules"),
])
def test_bad_settings_name_the_config(pki: dict[str, str], extra: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")) as caught:
        ListenerTls.from_config(ssl_config(pki, **extra), "SSL")
    assert caught.value.name == named


def test_a_key_store_is_required_and_a_key_file_must_hold_a_key(pki: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location.*must be set"):
        server_context(TlsSettings("SSL"))
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        server_context(TlsSettings("SSL", keystore_location=pki["ca"]))  # a certificate without its key


def test_inline_pem_key_store(pki: dict[str, str]) -> None:
    settings = TlsSettings("SSL", keystore_certificate_chain=pki["server_chain"].replace("\n", "\\n"),
                           keystore_key=pki["server_key"])
    assert server_context(settings).verify_mode == ssl.CERT_NONE


# -- a real handshake ---------------------------------------------------------------------------------------------

class PrincipalEcho:
    """Answers each frame with the principal of the connection it came on."""

    async def handle_frame(self, frame: Frame, conn: KafkaConnection) -> list[ResponsePart] | None:
        return [bytes(frame[:4]) + str(conn.principal).encode()]


async def principal_over_tls(config: BrokerConfig, client: ssl.SSLContext) -> str:
    tls = ListenerTls.from_config(config, "SSL")
    connections: set[KafkaConnection] = set()
    limits = ConnectionLimits.from_config(config)
    budget = ReceiveBudget.from_config(config)
    server = await asyncio.get_running_loop().create_server(
        lambda: KafkaConnection(PrincipalEcho(), limits, budget, connections, "SSL", False, None, "SSL",
                                tls.principal_mapper),
        "127.0.0.1", 0, ssl=tls.context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.write(struct.pack(">ii", 4, 42))
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        answer = await reader.readexactly(size)
        writer.close()
        return answer[4:].decode()
    finally:
        server.close()


def client_context(pki: dict[str, str], certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca"])
    if certificate:
        context.load_cert_chain(pki["client"])
    return context


LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


@pytest.mark.parametrize("loop", LOOPS)  # the broker runs on uvloop, whose TLS transport is its own
def test_client_certificate_subject_is_the_principal(pki: dict[str, str], loop: str) -> None:
    def run(config: BrokerConfig, client: ssl.SSLContext) -> str:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            return runner.run(principal_over_tls(config, client))

    config = ssl_config(pki, **{"ssl.client.auth": "required"})
    assert run(config, client_context(pki, certificate=True)) == "User:CN=alice,OU=eng,O=Moldau"
    mapped = ssl_config(pki, **{"ssl.client.auth": "requested",
                                "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/U"})
    assert run(mapped, client_context(pki, certificate=True)) == "User:ALICE"
    assert run(mapped, client_context(pki, certificate=False)) == str(ANONYMOUS)


def test_a_subject_no_mapping_rule_matches_is_refused(pki: dict[str, str]) -> None:
    config = ssl_config(pki, **{"ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=bob,.*$/bob/"})
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        asyncio.run(principal_over_tls(config, client_context(pki, certificate=True)))


def test_required_client_auth_refuses_a_client_without_certificate(pki: dict[str, str]) -> None:
    config = ssl_config(pki, **{"ssl.client.auth": "required"})
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        asyncio.run(principal_over_tls(config, client_context(pki, certificate=False)))


def test_node_client_connects_with_the_listener_security(pki: dict[str, str], tmp_path: Path) -> None:
    """This node's own connections (replica fetchers, controller channel): trust store and client certificate
    from the same configs; the server's host name is checked."""
    config = ssl_config(pki, **{"ssl.client.auth": "required", "ssl.keystore.location": pki["client"],
                                "listener.name.ssl.ssl.keystore.location": pki["server"]})
    security = ClientSecurity.for_listener(ssl_config(pki, **{"ssl.keystore.location": pki["client"]}), "SSL")
    assert security.security_protocol == "SSL" and security.ssl_context is not None
    assert security.ssl_context.check_hostname

    async def run() -> None:
        tls = ListenerTls.from_config(config, "SSL")
        seen: list[KafkaPrincipal] = []
        connections: set[KafkaConnection] = set()

        def make() -> KafkaConnection:
            conn = KafkaConnection(PrincipalEcho(), ConnectionLimits.from_config(config),
                                   ReceiveBudget.from_config(config), connections, "SSL", False, None, "SSL",
                                   tls.principal_mapper)
            return conn

        server = await asyncio.get_running_loop().create_server(make, "127.0.0.1", 0, ssl=tls.context)
        port = server.sockets[0].getsockname()[1]
        client = ClientConnection("127.0.0.1", port, "test", security)
        try:
            await client._connect()
            await asyncio.sleep(0.05)
            seen.extend(conn.principal for conn in connections)
        finally:
            client.close()
            server.close()
        assert seen == [KafkaPrincipal.user("CN=alice,OU=eng,O=Moldau")]

    asyncio.run(run())


def test_listener_overrides_of_passwords_are_hidden() -> None:
    config = BrokerConfig({"listener.name.ssl.ssl.key.password": "secret", "listener.name.ssl.ssl.client.auth":
                           "required"})
    assert config.dump()["listener.name.ssl.ssl.key.password"] == "[hidden]"
    assert config.dump()["listener.name.ssl.ssl.client.auth"] == "required"
    assert config.listener_value("SSL", "ssl.key.password") == "secret"
    assert config.listener_value("OTHER", "ssl.key.password") is None
