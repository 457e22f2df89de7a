"""`moldau configs`, with kafka-configs.sh's options, as a subprocess against a live broker: broker, cluster-wide
broker default, topic and group configs set, described (only what is set, or `--all`) and deleted; Kafka's
`--add-config` syntax with bracketed lists; refusals reported with the broker's error."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.compat.test_cli import assert_clean_error, moldau, ok


def configs(broker: Any, *args: str) -> Any:
    return moldau(broker, "configs", *args)


def test_broker_and_broker_default_configs(broker: Any) -> None:
    ok(broker, "configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
       "--add-config", "log.retention.ms=3600000,log.cleaner.backoff.ms=20000")
    out = ok(broker, "configs", "--entity-type", "brokers", "--entity-name", "1", "--describe").out
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for broker 1 are:"
    assert any(line.startswith("  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:"
                               "log.retention.ms=3600000") for line in lines), out
    assert len(lines) == 3, out  # only what is set on the broker
    ok(broker, "configs", "--entity-type", "brokers", "--entity-default", "--alter",
       "--add-config", "log.retention.bytes=100000000")
    described = json.loads(ok(broker, "configs", "--entity-type", "brokers", "--entity-default", "--describe",
                              "-o", "json").out)
    assert {(e["name"], e["value"], e["source"]) for e in described} >= {
        ("log.retention.bytes", "100000000", "DYNAMIC_DEFAULT_BROKER_CONFIG")}
    everything = ok(broker, "configs", "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all").out
    assert everything.startswith("All configs for broker 1 are:") and "num.partitions=" in everything
    ok(broker, "configs", "--entity-type", "brokers", "--entity-name", "1", "--alter",
       "--delete-config", "log.retention.ms,log.cleaner.backoff.ms")
    assert ok(broker, "configs", "--entity-type", "brokers", "--entity-name", "1", "--describe").out.strip() == (
        "Dynamic configs for broker 1 are:")
    ok(broker, "configs", "--entity-type", "brokers", "--entity-default", "--alter",
       "--delete-config", "log.retention.bytes")


def test_topic_and_group_configs(broker: Any) -> None:
    topic, group = f"cfg-{uuid.uuid4().hex[:8]}", f"cfg-{uuid.uuid4().hex[:8]}"
    ok(broker, "topics", "create", topic, "--partitions", "1")
    done = ok(broker, "configs", "--entity-type", "topics", "--entity-name", topic, "--alter",
              "--add-config", "cleanup.policy=[compact,delete],retention.ms=1000")
    assert done.out.strip() == f"Completed updating config for topic {topic}."
    described = json.loads(ok(broker, "configs", "--entity-type", "topics", "--entity-name", topic, "--describe",
                              "-o", "json").out)
    assert {(e["name"], e["value"]) for e in described} == {("cleanup.policy", "compact,delete"),
                                                            ("retention.ms", "1000")}
    ok(broker, "configs", "--entity-type", "groups", "--entity-name", group, "--alter",
       "--add-config", "consumer.session.timeout.ms=50000")
    out = ok(broker, "configs", "--entity-type", "groups", "--entity-name", group, "--describe").out
    assert f"Dynamic configs for group {group} are:" in out and "consumer.session.timeout.ms=50000" in out


def test_refusals_are_one_line_errors(broker: Any) -> None:
    assert_clean_error(configs(broker, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                               "--add-config", "no.such.config=1"), "no.such.config")
    assert_clean_error(configs(broker, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                               "--add-config", "num.partitions"), "expected key=value")
    assert_clean_error(configs(broker, "--entity-type", "brokers", "--entity-name", "1", "--alter",
                               "--add-config", "broker.id=2"), "read-only")
    assert_clean_error(configs(broker, "--entity-type", "topics", "--entity-default", "--describe"),
                       "--entity-default is for --entity-type brokers only")
    assert_clean_error(configs(broker, "--entity-type", "brokers", "--entity-name", "1", "--alter"),
                       "nothing to alter")


def test_an_unknown_broker_or_topic(broker: Any) -> None:
    assert_clean_error(configs(broker, "--entity-type", "brokers", "--entity-name", "7", "--describe"),
                       "no broker 7 in the cluster")
    assert_clean_error(configs(broker, "--entity-type", "topics", "--entity-name", "nope", "--describe"),
                       "UNKNOWN_TOPIC_OR_PARTITION")
