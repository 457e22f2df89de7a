"""Client settings: override policies by short and class name, Java client names translated or refused, and
max.poll.records."""

from __future__ import annotations

import re

import pytest

from moldau.connect.errors import ConfigException
from moldau.connect.worker.client_overrides import (
    OverridePolicy,
    connector_settings,
    max_poll_records,
    override_errors,
    parse_policy,
    worker_settings,
)


def test_policies_by_short_and_class_name() -> None:
    assert parse_policy(None) is OverridePolicy.ALL
    assert parse_policy("None") is OverridePolicy.NONE
    package = "org.apache.kafka.connect.connector.policy."
    assert parse_policy(package + "PrincipalConnectorClientConfigOverridePolicy") is OverridePolicy.PRINCIPAL
    assert parse_policy(package + "AllConnectorClientConfigOverridePolicy") is OverridePolicy.ALL
    with pytest.raises(ConfigException, match=re.escape("connector.client.config.override.policy")):
        parse_policy("Some")


def test_principal_policy_allows_only_the_principal() -> None:
    config = {"producer.override.sasl.mechanism": "PLAIN", "producer.override.linger.ms": "5"}
    errors = {v.name: v.errors for v in override_errors(OverridePolicy.PRINCIPAL, config)}
    assert errors["producer.override.sasl.mechanism"] == []
    assert "'Principal' policy" in errors["producer.override.linger.ms"][0]


def test_java_names_are_translated_or_refused() -> None:
    raw = {"producer.buffer.memory": "33554432", "producer.max.request.size": "2000000",
           "consumer.max.poll.records": "10", "consumer.fetch.min.bytes": "1"}
    assert worker_settings("producer", raw) == {"queue.buffering.max.kbytes": "32768",
                                                "message.max.bytes": "2000000"}
    assert worker_settings("consumer", raw) == {"fetch.min.bytes": "1"}
    assert max_poll_records(raw, {}) == 10
    assert max_poll_records(raw, {"consumer.override.max.poll.records": "3"}) == 3
    assert max_poll_records({}, {}) == 500
    with pytest.raises(ConfigException, match=re.escape("consumer.override.max.poll.records")):
        max_poll_records({}, {"consumer.override.max.poll.records": "0"})
    with pytest.raises(ConfigException, match=re.escape("producer.override.value.serializer")):
        connector_settings("producer", {"producer.override.value.serializer": "x"})


def test_jaas_config_becomes_librdkafka_credentials() -> None:
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3;cret";'
    assert connector_settings("producer", {"producer.override.sasl.jaas.config": jaas}) == {
        "sasl.username": "alice", "sasl.password": "s3;cret"}
    errors = override_errors(OverridePolicy.PRINCIPAL, {"consumer.override.sasl.jaas.config": jaas})
    assert [v.errors for v in errors] == [[]]
    with pytest.raises(ConfigException, match="username and password"):
        connector_settings("admin", {"admin.override.sasl.jaas.config": "Nope required;"})
