"""Replication policies name remote and internal topics as MirrorMaker 2 names them."""

from __future__ import annotations

import pytest

from moldau.mirror.policy import IdentityReplicationPolicy, ReplicationPolicy, replication_policy


def test_the_default_policy_prefixes_the_source_alias() -> None:
    policy = ReplicationPolicy()
    assert policy.format_remote_topic("east", "orders") == "east.orders"
    assert policy.topic_source("east.orders") == "east"
    assert policy.upstream_topic("west.east.orders") == "east.orders"
    assert policy.original_topic("west.east.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.topic_source("orders.") is None  # trailing separators do not make a remote topic
    assert policy.original_topic("orders") == "orders"


def test_internal_topic_names() -> None:
    policy = ReplicationPolicy()
    assert policy.offset_syncs_topic("east") == "mm2-offset-syncs.east.internal"
    assert policy.checkpoints_topic("east") == "east.checkpoints.internal"
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.is_checkpoints_topic("east.checkpoints.internal")
    assert policy.is_mm2_internal_topic("mm2-offset-syncs.east.internal")
    assert policy.is_heartbeats_topic("west.east.heartbeats")
    for internal in ("__consumer_offsets", "connect-offsets-internal", ".hidden", "mm2-configs.east.internal"):
        assert ReplicationPolicy.is_internal_topic(internal)
    assert not ReplicationPolicy.is_internal_topic("orders")


def test_a_custom_separator_and_the_legacy_internal_names() -> None:
    policy = replication_policy({"replication.policy.separator": "_"})
    assert policy.format_remote_topic("east", "orders") == "east_orders"
    assert policy.checkpoints_topic("east") == "east_checkpoints_internal"
    legacy = replication_policy({"replication.policy.separator": "_",
                                 "replication.policy.internal.topic.separator.enabled": "false"})
    assert legacy.checkpoints_topic("east") == "east.checkpoints.internal"
    assert legacy.offset_syncs_topic("east") == "mm2-offset-syncs.east.internal"


def test_the_identity_policy_keeps_names_but_prefixes_heartbeats() -> None:
    policy = replication_policy({
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "source.cluster.alias": "east"})
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.format_remote_topic("east", "orders") == "orders"
    assert policy.topic_source("orders") == "east"
    assert policy.original_topic("orders") == "orders"
    assert policy.format_remote_topic("east", "heartbeats") == "east.heartbeats"
    assert policy.topic_source("east.heartbeats") == "east"


def test_an_unknown_policy_names_the_config() -> None:
    with pytest.raises(ValueError, match=r"replication\.policy\.class"):
        replication_policy({"replication.policy.class": "com.example.Nope"})
