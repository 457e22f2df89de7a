"""The registry's listener config, its advertised endpoint, and reading a relayed answer (pure parts)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.registry.http.basic_auth import credentials
from moldau.registry.http.forward import FORWARDED_HEADER, _parse_answer, forward
from moldau.registry.service import REGISTRY_LISTENER, RegistryListener, parse_registry_listener, registry_url
from tests.support.tls import make_pki


def test_listener_urls() -> None:
    assert parse_registry_listener("http://127.0.0.1:8081") == RegistryListener("127.0.0.1", 8081)
    assert parse_registry_listener("http://0.0.0.0:0/") == RegistryListener("0.0.0.0", 0)
    assert parse_registry_listener("http://[::1]:9000") == RegistryListener("::1", 9000)
    assert parse_registry_listener("https://127.0.0.1:8443") == RegistryListener("127.0.0.1", 8443, tls=True)
    assert parse_registry_listener("") is None
    for bad in ("ftp://h:1", "http://h", "h:8081", "http://h:1/path"):
        with pytest.raises(ValueError):
            parse_registry_listener(bad)


def test_the_broker_config_checks_the_listener() -> None:
    assert BrokerConfig.from_properties({}).schema_registry_listeners == "http://127.0.0.1:8081"
    assert BrokerConfig.from_properties({"schema.registry.listeners": ""}).schema_registry_listeners == ""
    assert BrokerConfig.from_properties({"schema.registry.listeners": "https://127.0.0.1:0"}) \
        .schema_registry_listeners == "https://127.0.0.1:0"
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"schema.registry.listeners": "ftp://127.0.0.1:21"})
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"schema.registry.authentication.method": "DIGEST"})


def test_registry_endpoint_name_is_no_kafka_listener_name() -> None:
    from moldau.config.addresses import parse_listener

    with pytest.raises(ValueError):
        parse_listener(f"{REGISTRY_LISTENER}://127.0.0.1:1")


def test_registry_url_of_an_endpoint() -> None:
    from moldau.metadata.records import Endpoint

    assert registry_url(Endpoint(REGISTRY_LISTENER, "10.0.0.1", 8081)) == "http://10.0.0.1:8081"
    assert registry_url(Endpoint(REGISTRY_LISTENER, "::1", 8081)) == "http://[::1]:8081"
    assert registry_url(Endpoint(REGISTRY_LISTENER, "h", 8443, "SSL")) == "https://h:8443"


def test_basic_credentials_from_the_authorization_header() -> None:
    assert credentials("Basic YWxpY2U6czNjcjp0") == ("alice", "s3cr:t")  # the password may hold a colon
    assert credentials("basic YWxpY2U6") == ("alice", "")
    for bad in (None, "", "Bearer YWxpY2U6eA==", "Basic !!!", "Basic OnNlY3JldA==", "Basic bm9jb2xvbg=="):
        assert credentials(bad) is None


def test_relayed_answers() -> None:
    plain = b"HTTP/1.1 409 Conflict\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\n" \
            b"content-length: 2\r\n\r\n{}"
    assert _parse_answer(plain) == (409, "application/vnd.schemaregistry.v1+json", b"{}")
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n"
    assert _parse_answer(chunked) == (200, "", b'{"a":1}')
    with pytest.raises(ValueError):
        _parse_answer(b"garbage")


def test_a_relayed_write_goes_over_tls_with_the_clients_credentials(tmp_path: Path) -> None:
    """The writer authenticates a relayed write again: the request carries the client's Authorization header, and
    an https writer is reached over TLS that checks its certificate."""
    pki = make_pki(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(str(pki.server))
    received: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\r\n\r\n") + await reader.readexactly(2))
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{\"id\":1}")
        await writer.drain()
        writer.close()

    async def relay() -> tuple[int, str, bytes]:
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await forward(f"https://127.0.0.1:{port}", "POST", "/subjects/s/versions", "", b"{}", 10,
                                 "Basic YWxpY2U6eA==", pki.client_context())

    assert asyncio.run(relay()) == (200, "application/json", b'{"id":1}')
    head = received[0].decode()
    assert head.startswith("POST /subjects/s/versions HTTP/1.1\r\n")
    assert "\r\nAuthorization: Basic YWxpY2U6eA==\r\n" in head and f"\r\n{FORWARDED_HEADER}: 1\r\n" in head
