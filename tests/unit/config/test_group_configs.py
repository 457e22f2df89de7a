"""Group configs (GROUP config resources): Kafka's names, types, and the broker's bounds."""

from __future__ import annotations

import re

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.config.group_defs import describe_group_configs, validate_group_configs
from moldau.config.offset_reset import check_auto_offset_reset, duration_ms
from moldau.config.schema import ConfigSource


def test_iso_8601_durations() -> None:
    assert duration_ms("PT1H") == 3_600_000
    assert duration_ms("P1DT30M") == 88_200_000
    assert duration_ms("pt0.5s") == 500
    for bad in ("", "P", "PT", "-PT1H", "1H", "PT1H2", "P1W"):
        with pytest.raises(ValueError):
            duration_ms(bad)
    assert check_auto_offset_reset("by_duration:PT10M") is None
    assert check_auto_offset_reset("Earliest") is None
    assert check_auto_offset_reset("by_duration:PT") is not None
    assert check_auto_offset_reset("newest") is not None


def test_values_are_checked_against_the_broker_bounds() -> None:
    broker = BrokerConfig({"group.share.max.delivery.count.limit": "4"})
    validate_group_configs({"share.delivery.count.limit": "4", "share.isolation.level": "read_committed"}, broker)
    cases = [
        ({"share.delivery.count.limit": "5"}, "range 2 (group.share.min.delivery.count.limit) to 4"),
        ({"share.delivery.count.limit": "1"}, "at least 2"),
        ({"share.record.lock.duration.ms": "14999"}, "group.share.min.record.lock.duration.ms"),
        ({"consumer.session.timeout.ms": "70000"}, "group.consumer.max.session.timeout.ms"),
        ({"share.heartbeat.interval.ms": "15000", "share.session.timeout.ms": "45000"}, None),
        ({"share.session.timeout.ms": "4000"}, "group.share.min.session.timeout.ms"),
        ({"share.auto.offset.reset": "sometime"}, "by_duration"),
        ({"errors.deadletterqueue.copy.record.enable": "maybe"}, "errors.deadletterqueue.copy.record.enable"),
        ({"group.share.delivery.count.limit": "3"}, "Unknown group config name"),
    ]
    for configs, words in cases:
        if words is None:
            validate_group_configs(configs, broker)
            continue
        with pytest.raises(ConfigError, match=re.escape(words)):
            validate_group_configs(configs, broker)
    low = BrokerConfig({"group.share.min.session.timeout.ms": "100", "group.share.heartbeat.interval.ms": "5000"})
    with pytest.raises(ConfigError, match=re.escape("must be greater than share.heartbeat.interval.ms")):
        validate_group_configs({"share.session.timeout.ms": "4000"}, low)


def test_described_values_come_from_the_group_else_the_broker() -> None:
    broker = BrokerConfig({"group.share.delivery.count.limit": "3"})
    entries = {e.name: e for e in describe_group_configs(broker, {"share.record.lock.duration.ms": "20000"})}
    assert (entries["share.record.lock.duration.ms"].value, entries["share.record.lock.duration.ms"].source) == (
        "20000", ConfigSource.GROUP_CONFIG)
    assert (entries["share.delivery.count.limit"].value, entries["share.delivery.count.limit"].source) == (
        "3", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["errors.deadletterqueue.topic.name"].value == ""
    assert entries["share.isolation.level"].source == ConfigSource.DEFAULT_CONFIG
