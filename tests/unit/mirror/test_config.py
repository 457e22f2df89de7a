"""MirrorMaker 2's dedicated-mode properties become per-flow worker and connector configs as MM2 makes them."""

from __future__ import annotations

import pytest

from moldau.mirror.config import Flow, MirrorMakerConfig

MM2 = {
    "clusters": "east, west",
    "east.bootstrap.servers": "east-1:9092",
    "west.bootstrap.servers": "west-1:9092",
    "west.security.protocol": "SASL_SSL",
    "east->west.enabled": "true",
    "east->west.topics": "orders, payments.*",
    "emit.checkpoints.interval.seconds": "5",
    "replication.policy.separator": "_",
    "some.unrelated.key": "x",
}


def test_flows_are_the_enabled_pairs_plus_heartbeat_only_pairs() -> None:
    config = MirrorMakerConfig(MM2)
    assert config.flows() == [Flow("east", "west"), Flow("west", "east")]
    assert config.enabled(Flow("east", "west")) and not config.enabled(Flow("west", "east"))
    quiet = MirrorMakerConfig({**MM2, "emit.heartbeats.enabled": "false"})
    assert quiet.flows() == [Flow("east", "west")]


def test_the_worker_talks_to_the_target_with_mm2_internal_topics() -> None:
    worker = MirrorMakerConfig(MM2).worker_config(Flow("east", "west"))
    assert worker["bootstrap.servers"] == "west-1:9092"
    assert worker["security.protocol"] == "SASL_SSL"
    assert worker["producer.security.protocol"] == "SASL_SSL"
    assert worker["group.id"] == "east-mm2"
    assert worker["offset.storage.topic"] == "mm2-offsets.east.internal"
    assert worker["config.storage.topic"] == "mm2-configs.east.internal"
    assert worker["value.converter"] == "org.apache.kafka.connect.converters.ByteArrayConverter"
    assert worker["replication.policy.separator"] == "_"


def test_connector_configs_carry_both_clusters_and_the_flow_overrides() -> None:
    connector = MirrorMakerConfig(MM2).connector_config(Flow("east", "west"), "MirrorSourceConnector",
                                                         "MirrorSourceConnector")
    assert connector["source.cluster.bootstrap.servers"] == "east-1:9092"
    assert connector["target.cluster.bootstrap.servers"] == "west-1:9092"
    assert connector["target.cluster.security.protocol"] == "SASL_SSL"
    assert connector["target.producer.security.protocol"] == "SASL_SSL"
    assert connector["source.cluster.alias"] == "east" and connector["target.cluster.alias"] == "west"
    assert connector["topics"] == "orders, payments.*"
    assert connector["enabled"] == "true"
    assert connector["emit.checkpoints.interval.seconds"] == "5"
    assert connector["replication.policy.separator"] == "_"
    assert "some.unrelated.key" not in connector
    reverse = MirrorMakerConfig(MM2).connector_config(Flow("west", "east"), "MirrorHeartbeatConnector",
                                                       "MirrorHeartbeatConnector")
    assert reverse["enabled"] == "false"


@pytest.mark.parametrize(("props", "key"), [
    ({"clusters": ""}, "clusters"),
    ({"clusters": "a, a"}, "clusters"),
    ({"clusters": "a->b"}, "clusters"),
    ({"clusters": "a, b", "a->b.enabled": "true", "a.bootstrap.servers": "x:1"}, r"b\.bootstrap\.servers"),
    ({"clusters": "a, b", "a->b.enabled": "yes"}, r"a->b\.enabled"),
])
def test_malformed_configs_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        MirrorMakerConfig(props)


def test_the_flow_between_two_clusters_and_their_client_settings() -> None:
    config = MirrorMakerConfig({**MM2, "west.sasl.jaas.config":
                                'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                'username="mirror" password="s3cret";'})
    assert config.flow_between(None, None) == Flow("east", "west")  # the only enabled flow
    assert config.flow_between("east", None) == Flow("east", "west")
    with pytest.raises(ValueError, match="west->east"):
        config.flow_between("west", "east")
    west = config.librdkafka("west")
    assert west["bootstrap.servers"] == "west-1:9092" and west["security.protocol"] == "SASL_SSL"
    assert west["sasl.username"] == "mirror" and west["sasl.password"] == "s3cret"
    assert "sasl.jaas.config" not in west


def test_exactly_once_source_support_reaches_every_flow_s_worker() -> None:
    """MirrorMaker 2 (KIP-618 with KIP-710): top level for every target, `<cluster>.` for one target."""
    everywhere = MirrorMakerConfig({**MM2, "exactly.once.source.support": "enabled"})
    assert everywhere.worker_config(Flow("east", "west"))["exactly.once.source.support"] == "enabled"
    assert everywhere.worker_config(Flow("west", "east"))["exactly.once.source.support"] == "enabled"
    west_only = MirrorMakerConfig({**MM2, "west.exactly.once.source.support": "enabled"})
    assert west_only.worker_config(Flow("east", "west"))["exactly.once.source.support"] == "enabled"
    assert "exactly.once.source.support" not in west_only.worker_config(Flow("west", "east"))
