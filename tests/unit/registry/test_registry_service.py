"""The registry's listener config, its advertised endpoint, and reading a relayed answer (pure parts)."""

from __future__ import annotations

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.registry.http.forward import _parse_answer
from moldau.registry.service import REGISTRY_LISTENER, parse_registry_listener, registry_url


def test_listener_urls() -> None:
    assert parse_registry_listener("http://127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert parse_registry_listener("http://0.0.0.0:0/") == ("0.0.0.0", 0)
    assert parse_registry_listener("http://[::1]:9000") == ("::1", 9000)
    assert parse_registry_listener("") is None
    for bad in ("https://h:1", "http://h", "h:8081", "http://h:1/path"):
        with pytest.raises(ValueError):
            parse_registry_listener(bad)


def test_the_broker_config_checks_the_listener() -> None:
    assert BrokerConfig.from_properties({}).schema_registry_listeners == "http://127.0.0.1:8081"
    assert BrokerConfig.from_properties({"schema.registry.listeners": ""}).schema_registry_listeners == ""
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"schema.registry.listeners": "ftp://127.0.0.1:21"})


def test_registry_endpoint_name_is_no_kafka_listener_name() -> None:
    from moldau.config.addresses import parse_listener

    with pytest.raises(ValueError):
        parse_listener(f"{REGISTRY_LISTENER}://127.0.0.1:1")


def test_registry_url_of_an_endpoint() -> None:
    from moldau.metadata.records import Endpoint

    assert registry_url(Endpoint(REGISTRY_LISTENER, "10.0.0.1", 8081)) == "http://10.0.0.1:8081"
    assert registry_url(Endpoint(REGISTRY_LISTENER, "::1", 8081)) == "http://[::1]:8081"


def test_relayed_answers() -> None:
    plain = b"HTTP/1.1 409 Conflict\r\ncontent-type: application/vnd.schemaregistry.v1+json\r\n" \
            b"content-length: 2\r\n\r\n{}"
    assert _parse_answer(plain) == (409, "application/vnd.schemaregistry.v1+json", b"{}")
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n"
    assert _parse_answer(chunked) == (200, "", b'{"a":1}')
    with pytest.raises(ValueError):
        _parse_answer(b"garbage")
