"""Which topics the mirror source copies (filters, internal topics, cycles) and how it splits partitions."""

from __future__ import annotations

import pytest

from moldau.connect.api import ExactlyOnceSupport
from moldau.connect.errors import ConnectException
from moldau.mirror.filters import TopicFilter
from moldau.mirror.policy import ReplicationPolicy
from moldau.mirror.source import MirrorSourceConnector, decode_partition, encode_partition, should_replicate


def test_topics_from_the_target_are_never_copied_back() -> None:
    policy, everything = ReplicationPolicy(), TopicFilter({})
    assert should_replicate("orders", policy, everything, "west")
    assert not should_replicate("west.orders", policy, everything, "west")  # came from the target
    assert not should_replicate("east.west.orders", policy, everything, "west")  # from the target, two hops ago
    assert should_replicate("south.orders", policy, everything, "west")  # a third cluster's: copied on
    assert not should_replicate("__consumer_offsets", policy, everything, "west")
    assert not should_replicate("mm2-offset-syncs.west.internal", policy, everything, "west")


def test_heartbeats_are_copied_whatever_the_filter() -> None:
    only_orders = TopicFilter({"topics": "orders"})
    assert should_replicate("heartbeats", ReplicationPolicy(), only_orders, "west")
    assert should_replicate("south.heartbeats", ReplicationPolicy(), only_orders, "west")
    assert not should_replicate("payments", ReplicationPolicy(), only_orders, "west")


def test_partitions_are_dealt_round_robin() -> None:
    connector = MirrorSourceConnector()
    connector._settings = {"enabled": True}
    connector._partitions = {"a": 3, "b": 2}
    configs = connector.task_configs(2)
    assert [c["task.assigned.partitions"] for c in configs] == ["a-0,a-2,b-1", "a-1,b-0"]
    assert len(connector.task_configs(10)) == 5


def test_topic_partition_encoding_keeps_dashes_in_topic_names() -> None:
    assert decode_partition(encode_partition("my-topic", 12)) == ("my-topic", 12)
    with pytest.raises(ConnectException):
        decode_partition("no_partition")


def test_the_source_connector_refuses_a_config_without_both_clusters() -> None:
    errors = {v.name: v.errors for v in MirrorSourceConnector().config_def().validate(
        {"source.cluster.alias": "east", "source.cluster.bootstrap.servers": "east:9092"})}
    assert errors["target.cluster.bootstrap.servers"] and not errors["source.cluster.bootstrap.servers"]


def test_exactly_once_support_needs_a_read_committed_source_consumer() -> None:
    """MirrorMaker 2's rule; librdkafka's consumers read read_committed unless told otherwise."""
    props = {"source.cluster.bootstrap.servers": "east:9092"}
    connector = MirrorSourceConnector()
    assert connector.exactly_once_support(props) is ExactlyOnceSupport.SUPPORTED
    uncommitted = {**props, "source.consumer.isolation.level": "read_uncommitted"}
    assert connector.exactly_once_support(uncommitted) is ExactlyOnceSupport.UNSUPPORTED
