"""MirrorMaker 2's topic, group and config-property filters: defaults, includes, excludes and old names."""

from __future__ import annotations

import pytest

from moldau.mirror.filters import ConfigPropertyFilter, GroupFilter, TopicFilter


def test_by_default_every_topic_but_internal_ones() -> None:
    topics = TopicFilter({})
    assert topics.should_replicate("orders")
    for internal in ("__consumer_offsets", "mm2-offset-syncs.b.internal", "connect-offsets-internal", "x.replica"):
        assert not topics.should_replicate(internal)


def test_includes_are_whole_names_or_regexes_and_excludes_win() -> None:
    topics = TopicFilter({"topics": "orders, pay.*", "topics.exclude": "payments-test"})
    assert topics.should_replicate("orders")
    assert not topics.should_replicate("orders-v2")  # a whole-name match, not a prefix
    assert topics.should_replicate("payments")
    assert not topics.should_replicate("payments-test")


def test_the_deprecated_blacklist_names_still_work() -> None:
    assert not TopicFilter({"topics.blacklist": "secret"}).should_replicate("secret")
    assert TopicFilter({"topics.blacklist": "secret", "topics.exclude": ""}).should_replicate("secret")


def test_groups() -> None:
    groups = GroupFilter({})
    assert groups.should_replicate("billing")
    assert not groups.should_replicate("console-consumer-123")
    assert not groups.should_replicate("connect-file-sink")
    assert not GroupFilter({"groups": ""}).should_replicate("billing")


def test_config_properties() -> None:
    props = ConfigPropertyFilter({})
    assert props.should_replicate("retention.ms")
    assert not props.should_replicate("min.insync.replicas")
    assert ConfigPropertyFilter({"config.properties.exclude": ""}).should_replicate("min.insync.replicas")


def test_a_bad_regex_names_the_config() -> None:
    with pytest.raises(ValueError, match=r"topics\.exclude"):
        TopicFilter({"topics.exclude": "("})
