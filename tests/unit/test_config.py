"""Tests for moldau.config: broker configs, properties files, topic configs and DescribeConfigs views."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from moldau.config import (
    BROKER_CONFIGS,
    LONG_MAX,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigEntryView,
    ConfigError,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
    Listener,
    Voter,
    describe_broker_configs,
    dynamic_broker_config_names,
    effective_topic_configs,
    load_properties,
    log_config,
    parse_listener,
    parse_overrides,
    parse_properties,
    parse_voter,
    validate_dynamic_broker_configs,
    validate_topic_configs,
)
from moldau.storage.log_config import LogConfig, TimestampType

HOUR_MS = 3_600_000

# --- defaults and tables ---------------------------------------------------------------------------


def test_defaults() -> None:
    config = BrokerConfig()
    assert config.node_id == 1
    assert config.process_roles == ["broker", "controller"]
    assert config.listeners == [Listener("PLAINTEXT", "127.0.0.1", 9092)]
    assert config.advertised_listeners == config.listeners
    assert config.log_dirs == ["./data"]
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.auto_create_topics_enable and config.auto_create_topics
    assert config.delete_topic_enable
    assert config.log_retention_ms == 168 * HOUR_MS
    assert config.log_retention_bytes == -1
    assert config.log_segment_bytes == 1 << 30
    assert config.log_roll_ms == 168 * HOUR_MS
    assert config.log_retention_check_interval_ms == 300_000
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.queued_max_requests == 500
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_retention_ms == 7 * 24 * HOUR_MS
    assert config.group_initial_rebalance_delay_ms == 3000
    assert config.transactional_id_expiration_ms == 604800000
    assert config.producer_id_expiration_ms == 86400000
    assert config.min_insync_replicas == 1
    assert not config.unclean_leader_election_enable
    assert config.cluster_id is None and config.broker_rack is None
    assert config.controller_quorum_voters == []
    assert config.log_cleanup_policy == ["delete"]


def test_every_default_is_valid_and_every_type_has_a_code() -> None:
    for definition in BROKER_CONFIGS.values():
        if definition.default is not None:
            definition.parse(definition.default)
        assert definition.type in ConfigType


def test_topic_configs_have_matching_broker_synonyms() -> None:
    for topic in TOPIC_CONFIGS.values():
        for synonym in topic.synonyms:
            assert BROKER_CONFIGS[synonym.name].topic_config == topic.name
    providers = {d.topic_config for d in BROKER_CONFIGS.values() if d.topic_config}
    # A topic config without a broker default has its own.
    assert providers == {t.name for t in TOPIC_CONFIGS.values() if t.default is None}
    assert all(t.synonyms == () for t in TOPIC_CONFIGS.values() if t.default is not None)


def test_default_log_config_matches_storage_defaults() -> None:
    assert log_config(BrokerConfig(), {}) == LogConfig()


# --- precedence ------------------------------------------------------------------------------------


def test_flags_override_file_override_defaults(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("node.id=3\nnum.partitions=4\n")
    config = BrokerConfig.load(path, ["num.partitions=6", "broker.rack = r1"])
    assert config.node_id == 3
    assert config.num_partitions == 6
    assert config.broker_rack == "r1"
    assert config.default_replication_factor == 1
    assert config.source("num.partitions") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("default.replication.factor") is ConfigSource.DEFAULT_CONFIG


def test_load_without_file_uses_overrides_only() -> None:
    assert BrokerConfig.load(None, ["node.id=9"]).node_id == 9


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, 168 * HOUR_MS),
        ({"log.retention.hours": "1"}, HOUR_MS),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
        ({"log.retention.minutes": "-1", "log.retention.hours": "3"}, -1),
    ],
)
def test_retention_ms_wins_over_minutes_over_hours(props: dict[str, str], expected: int) -> None:
    config = BrokerConfig(props)
    assert config.log_retention_ms == expected
    assert log_config(config, {}).retention_ms == expected


def test_roll_ms_wins_over_hours() -> None:
    assert BrokerConfig({"log.roll.hours": "2"}).log_roll_ms == 2 * HOUR_MS
    assert BrokerConfig({"log.roll.hours": "2", "log.roll.ms": "10"}).log_roll_ms == 10


def test_log_dirs_wins_over_log_dir() -> None:
    assert BrokerConfig({"log.dir": "/a"}).log_dirs == ["/a"]
    assert BrokerConfig({"log.dir": "/a", "log.dirs": "/b, /c"}).log_dirs == ["/b", "/c"]


# --- value parsing and validators ------------------------------------------------------------------


def test_not_a_number_message_names_key_value_and_type() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"log.segment.bytes": "abc"})
    assert str(info.value) == "Invalid value abc for configuration log.segment.bytes: Not a number of type INT"
    assert info.value.name == "log.segment.bytes"


@pytest.mark.parametrize(
    ("name", "raw", "reason"),
    [
        ("log.segment.bytes", "13", "Value must be at least 14"),
        ("node.id", "2147483648", "Not a number of type INT"),
        ("node.id", "1_000", "Not a number of type INT"),
        ("node.id", "1.5", "Not a number of type INT"),
        ("offsets.topic.replication.factor", "40000", "Not a number of type SHORT"),
        ("log.retention.ms", "9223372036854775808", "Not a number of type LONG"),
        ("log.retention.ms", "-2", "Value must be at least -1"),
        ("log.cleaner.min.cleanable.ratio", "1.5", "Value must be no more than 1"),
        ("log.cleaner.min.cleanable.ratio", "nan", "Not a number of type DOUBLE"),
        ("auto.create.topics.enable", "yes", "Expected value to be either true or false"),
        ("log.message.timestamp.type", "createtime", "String must be one of: CreateTime, LogAppendTime"),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"),
        ("log.cleanup.policy", "delete,archive", "String must be one of: compact, delete"),
        ("process.roles", "broker,broker", "Each role may be listed only once"),
        ("process.roles", "observer", "String must be one of: broker, controller"),
        ("log.dirs", "/a,,/b", "Expected a comma-separated list of non-empty paths"),
        ("log.dir", " ", "Expected a non-empty string"),
        ("listener.security.protocol.map", "A:TLS", "Expected NAME:PROTOCOL"),
        ("listener.security.protocol.map", "A:SSL,a:SSL", "mapped more than once"),
        ("controller.quorum.voters", "1@:9093", "Unable to parse 1@:9093 to a quorum voter"),
    ],
)
def test_invalid_values(name: str, raw: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"^Invalid value {raw.strip()} for configuration {name}: ") as info:
        BrokerConfig({name: raw})
    assert reason in str(info.value)


@pytest.mark.parametrize(
    ("name", "raw", "getter", "expected"),
    [
        ("auto.create.topics.enable", " FALSE ", "get_bool", False),
        ("delete.topic.enable", "True", "get_bool", True),
        ("num.partitions", " +12 ", "get_int", 12),
        ("log.retention.bytes", "-1", "get_int", -1),
        ("log.cleaner.min.cleanable.ratio", "0.25", "get_float", 0.25),
        ("log.cleaner.min.cleanable.ratio", "1e-1", "get_float", 0.1),
        ("log.cleanup.policy", " compact , delete ", "get_list", ["compact", "delete"]),
        ("broker.rack", "  r2 ", "get_str", "r2"),
        ("log.segment.bytes", "14", "get_int", 14),
    ],
)
def test_valid_values(name: str, raw: str, getter: str, expected: object) -> None:
    assert getattr(BrokerConfig({name: raw}), getter)(name) == expected


def test_typed_accessors_check_the_type() -> None:
    config = BrokerConfig()
    with pytest.raises(TypeError):
        config.get_int("listeners")
    with pytest.raises(TypeError, match="has no value"):
        config.get_int("log.retention.ms")
    assert config.get_optional_int("log.retention.ms") is None
    with pytest.raises(KeyError):
        config.get_int("no.such.config")


def test_validator_descriptions() -> None:
    assert BROKER_CONFIGS["log.segment.bytes"].validator.describe() == "[14,...]"  # type: ignore[union-attr]
    ratio = BROKER_CONFIGS["log.cleaner.min.cleanable.ratio"].validator
    assert ratio is not None and ratio.describe() == "[0,...,1]"
    timestamps = BROKER_CONFIGS["log.message.timestamp.type"].validator
    assert timestamps is not None and timestamps.describe() == "[CreateTime, LogAppendTime]"


# --- listeners and voters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PLAINTEXT://localhost:9092", Listener("PLAINTEXT", "localhost", 9092)),
        ("client://:0", Listener("CLIENT", "", 0)),
        ("INTERNAL://10.0.0.1:65535", Listener("INTERNAL", "10.0.0.1", 65535)),
        ("V6://[::1]:9094", Listener("V6", "::1", 9094)),
    ],
)
def test_parse_listener(text: str, expected: Listener) -> None:
    assert parse_listener(text) == expected


@pytest.mark.parametrize(
    "text", ["PLAINTEXT:/localhost:9092", "PLAINTEXT://localhost", "PLAINTEXT://h:65536", "://h:1", "P://h:x"]
)
def test_invalid_listener(text: str) -> None:
    with pytest.raises(ValueError):
        parse_listener(text)
    with pytest.raises(ConfigError, match=r"for configuration listeners: "):
        BrokerConfig({"listeners": text})


def test_listeners_need_distinct_names_and_a_security_protocol() -> None:
    with pytest.raises(ConfigError, match="different name"):
        BrokerConfig({"listeners": "PLAINTEXT://:1,plaintext://:2"})
    with pytest.raises(ConfigError, match="Listener CLIENT has no security protocol"):
        BrokerConfig({"listeners": "CLIENT://:9092"})
    config = BrokerConfig(
        {
            "listeners": "CLIENT://:9092,CONTROLLER://:9093",
            "listener.security.protocol.map": "CLIENT:PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
        }
    )
    assert [listener.name for listener in config.listeners] == ["CLIENT", "CONTROLLER"]
    assert config.security_protocol("controller") == "PLAINTEXT"


def test_security_inter_broker_protocol_names_the_inter_broker_listener_as_in_kafka() -> None:
    listeners = {"listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093"}
    assert BrokerConfig(listeners).inter_broker_listener_name is None  # neither set: the first listener, below
    assert BrokerConfig({**listeners, "security.inter.broker.protocol": "SSL"}).inter_broker_listener_name == "SSL"
    assert BrokerConfig({**listeners, "inter.broker.listener.name": "ssl"}).inter_broker_listener_name == "SSL"
    with pytest.raises(ConfigError, match=r"Only one of inter\.broker\.listener\.name and security\.inter\.broker"):
        BrokerConfig({**listeners, "security.inter.broker.protocol": "SSL", "inter.broker.listener.name": "SSL"})
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol SASL_SSL is not one of") as caught:
        BrokerConfig({**listeners, "security.inter.broker.protocol": "SASL_SSL"})
    assert caught.value.name == "security.inter.broker.protocol"
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol"):
        BrokerConfig({**listeners, "security.inter.broker.protocol": "TLS"})


def test_advertised_listeners() -> None:
    config = BrokerConfig(
        {"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://broker.example:19092"}
    )
    assert config.advertised_listeners == [Listener("PLAINTEXT", "broker.example", 19092)]
    with pytest.raises(ConfigError, match="Advertised listener SSL is not one of the listeners"):
        BrokerConfig({"advertised.listeners": "SSL://h:1"})


def test_a_follower_may_not_wait_at_its_leader_longer_than_the_isr_allows() -> None:
    assert BrokerConfig({"replica.fetch.wait.max.ms": "2000", "replica.lag.time.max.ms": "2000"})
    with pytest.raises(ConfigError, match=r"replica\.fetch\.wait\.max\.ms should always be less than or equal to"):
        BrokerConfig({"replica.fetch.wait.max.ms": "2001", "replica.lag.time.max.ms": "2000"})


def test_a_broker_holds_a_share_session_for_every_member_of_a_full_share_group() -> None:
    assert BrokerConfig({"group.share.max.share.sessions": "200", "group.share.max.size": "200"})
    with pytest.raises(ConfigError, match=r"group\.share\.max\.share\.sessions must be greater than or equal to "
                                          r"group\.share\.max\.size"):
        BrokerConfig({"group.share.max.share.sessions": "199"})


def test_the_replica_selector_is_kafkas_rack_aware_one_or_the_leader() -> None:
    rack_aware = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    assert BrokerConfig({"replica.selector.class": rack_aware}).replica_selector_class == rack_aware
    assert BrokerConfig({}).replica_selector_class is None
    with pytest.raises(ConfigError, match=r"replica\.selector\.class"):
        BrokerConfig({"replica.selector.class": "com.example.MySelector"})


def test_quorum_voters() -> None:
    config = BrokerConfig({"controller.quorum.voters": "1@a:9093, 2@[::1]:9093"})
    assert config.controller_quorum_voters == [Voter(1, "a", 9093), Voter(2, "::1", 9093)]
    assert parse_voter("3@h:1") == Voter(3, "h", 1)


def test_protocol_map() -> None:
    config = BrokerConfig({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT, ext:sasl_ssl"})
    assert config.listener_security_protocol_map == {"PLAINTEXT": "PLAINTEXT", "EXT": "SASL_SSL"}
    assert config.security_protocol("ext") == "SASL_SSL"


# --- properties files and overrides ----------------------------------------------------------------


def test_properties_syntax() -> None:
    text = (
        "# a comment\n"
        "! another comment\n"
        "   \n"
        "node.id=1\n"
        "  listeners :  PLAINTEXT://:9092  \n"
        "log.dirs /a,\\\n"
        "         /b\n"
        "broker.rack\t=\tr1\n"
        "key\\=with\\:escapes = v\\u00e9\\tx\n"
        "empty=\n"
        "bare\n"
        "a==b\n"
        "node.id=2\r\n"
        "windows=yes\r"
        "old.mac=yes"
    )
    assert parse_properties(text) == {
        "node.id": "2",
        "listeners": "PLAINTEXT://:9092",
        "log.dirs": "/a,/b",
        "broker.rack": "r1",
        "key=with:escapes": "v\u00e9\tx",
        "empty": "",
        "bare": "",
        "a": "=b",
        "windows": "yes",
        "old.mac": "yes",
    }


def test_properties_continuation_edge_cases() -> None:
    # An even number of trailing backslashes is an escaped backslash, not a continuation.
    assert parse_properties("a=x\\\\\nb=y") == {"a": "x\\", "b": "y"}
    # A continued line may start with '#': it is part of the value, not a comment.
    assert parse_properties("a=x\\\n  #y") == {"a": "x#y"}
    # A comment line never continues.
    assert parse_properties("# c \\\nb=1") == {"b": "1"}
    # A continuation at the end of the text ends the value.
    assert parse_properties("a=x\\") == {"a": "x"}
    # A continuation followed by a blank line ends the value there.
    assert parse_properties("a=x\\\n\nb=1") == {"a": "x", "b": "1"}


def test_malformed_unicode_escape() -> None:
    with pytest.raises(ConfigError, match="Malformed"):
        parse_properties("a=\\u12g4")


def test_load_properties(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("log.dirs=/data\nnum.partitions = 3\n", encoding="utf-8")
    assert load_properties(path) == {"log.dirs": "/data", "num.partitions": "3"}
    assert load_properties(str(path))["num.partitions"] == "3"


def test_parse_overrides() -> None:
    assert parse_overrides(["a=1", " b = x=y ", "a=2"]) == {"a": "2", "b": "x=y"}
    for bad in ("novalue", "=1"):
        with pytest.raises(ConfigError, match="expected key=value"):
            parse_overrides([bad])


def test_unknown_name_warns_and_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="moldau.config"):
        config = BrokerConfig({"zookeeper.connect": "localhost:2181", "node.id": "2"})
    assert any("zookeeper.connect" in record.getMessage() for record in caplog.records)
    assert all(record.name == "moldau.config" for record in caplog.records)
    assert config.unknown == {"zookeeper.connect": "localhost:2181"}
    dump = config.dump()
    assert dump["zookeeper.connect"] == "localhost:2181"
    assert dump["node.id"] == "2"
    assert dump["log.retention.ms"] is None
    assert list(dump) == sorted(dump)


def test_passwords_are_hidden() -> None:
    config = BrokerConfig({"ssl.keystore.password": "s3cret"})
    assert config.get_str("ssl.keystore.password") == "s3cret"
    assert config.dump()["ssl.keystore.password"] == "[hidden]"
    (entry,) = [e for e in describe_broker_configs(config) if e.name == "ssl.keystore.password"]
    assert entry.sensitive and entry.value is None
    assert all(synonym.value is None for synonym in entry.synonyms)
    assert "s3cret" not in repr(describe_broker_configs(config))


# --- dynamic broker configs ------------------------------------------------------------------------


def test_with_dynamic_returns_an_updated_copy() -> None:
    static = BrokerConfig({"log.retention.hours": "1"})
    dynamic = static.with_dynamic({"log.retention.ms": "1000", "num.partitions": "3"})
    assert dynamic.log_retention_ms == 1000 and dynamic.num_partitions == 3
    assert static.log_retention_ms == HOUR_MS and static.num_partitions == 1
    assert dynamic.source("num.partitions") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert dynamic.dynamic_configs() == {"log.retention.ms": "1000", "num.partitions": "3"}


def test_per_broker_value_wins_over_cluster_default_and_none_removes() -> None:
    config = BrokerConfig().with_dynamic({"message.max.bytes": "100"})
    config = config.with_dynamic({"message.max.bytes": "200"}, per_broker=True)
    assert config.message_max_bytes == 200
    assert config.source("message.max.bytes") is ConfigSource.DYNAMIC_BROKER_CONFIG
    config = config.with_dynamic({"message.max.bytes": None}, per_broker=True)
    assert config.message_max_bytes == 100
    assert config.with_dynamic({"message.max.bytes": None}).message_max_bytes == 1048588


def test_a_topic_config_given_to_the_broker_names_the_broker_config_for_its_default(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="moldau.config"):
        config = BrokerConfig({"file.delete.delay.ms": "5", "retention.ms": "1000"})
    assert [record.getMessage() for record in caplog.records] == [
        "The configuration 'file.delete.delay.ms' was supplied but isn't a known config. It is a topic config; "
        "the broker config for its default is 'log.segment.delete.delay.ms'.",
        "The configuration 'retention.ms' was supplied but isn't a known config. It is a topic config; "
        "the broker config for its default is 'log.retention.ms'.",
    ]
    assert config.value("log.segment.delete.delay.ms") == 60000  # unchanged: the name was the topic's


def test_with_dynamic_rejects_read_only_unknown_and_invalid() -> None:
    config = BrokerConfig()
    with pytest.raises(ConfigError, match=r"Cannot update configuration node\.id dynamically"):
        config.with_dynamic({"node.id": "2"})
    with pytest.raises(ConfigError, match=r"Unknown broker configuration x\.y"):
        config.with_dynamic({"x.y": "1"})
    with pytest.raises(ConfigError, match=r"Invalid value -5 for configuration log\.segment\.bytes"):
        config.with_dynamic({"log.segment.bytes": "-5"})
    validate_dynamic_broker_configs({"log.cleanup.policy": "compact", "log.retention.ms": None})
    with pytest.raises(ConfigError):
        validate_dynamic_broker_configs({"listeners": "PLAINTEXT://:1"})


def test_dynamic_set_includes_topic_defaults_and_excludes_identity() -> None:
    names = dynamic_broker_config_names()
    assert {"log.retention.ms", "log.segment.bytes", "message.max.bytes", "log.cleanup.policy"} <= names
    assert "num.partitions" in names
    assert not {"node.id", "listeners", "log.dirs", "process.roles"} & names


# --- topic configs ---------------------------------------------------------------------------------


def test_validate_topic_configs() -> None:
    validate_topic_configs({"cleanup.policy": "compact,delete", "retention.ms": "-1", "segment.bytes": "14"})
    with pytest.raises(ConfigError, match=r"Unknown topic config name: retention\.hours"):
        validate_topic_configs({"retention.hours": "1"})
    with pytest.raises(ConfigError, match=r"Null value not supported for topic configs: retention\.ms"):
        validate_topic_configs({"retention.ms": None})


@pytest.mark.parametrize(
    ("name", "raw", "reason"),
    [
        ("cleanup.policy", "archive", "String must be one of: compact, delete"),
        ("compression.type", "lzma", "String must be one of"),
        ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "13", "Value must be at least 14"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("max.message.bytes", "big", "Not a number of type INT"),
        ("preallocate", "1", "Expected value to be either true or false"),
    ],
)
def test_invalid_topic_values(name: str, raw: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=f"^Invalid value {raw} for configuration {name}: ") as info:
        validate_topic_configs({name: raw})
    assert reason in str(info.value)


def _entry(entries: list[ConfigEntryView], name: str) -> ConfigEntryView:
    (entry,) = [e for e in entries if e.name == name]
    return entry


def test_effective_topic_config_sources_and_synonyms() -> None:
    broker = BrokerConfig({"log.retention.minutes": "10", "log.segment.bytes": "2048"}).with_dynamic(
        {"log.retention.ms": "7000"}
    )
    entries = effective_topic_configs(broker, {"retention.ms": "500", "cleanup.policy": "compact"})
    assert [e.name for e in entries] == sorted(TOPIC_CONFIGS)

    retention = _entry(entries, "retention.ms")
    assert (retention.value, retention.source) == ("500", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert retention.config_type is ConfigType.LONG and not retention.read_only and not retention.sensitive
    assert retention.synonyms == (
        ConfigSynonym("retention.ms", "500", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.retention.ms", "7000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.minutes", "10", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )

    segment = _entry(entries, "segment.bytes")
    assert (segment.value, segment.source) == ("2048", ConfigSource.STATIC_BROKER_CONFIG)
    assert segment.synonyms == (
        ConfigSynonym("log.segment.bytes", "2048", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )

    flush = _entry(entries, "flush.ms")
    assert (flush.value, flush.source) == (str(LONG_MAX), ConfigSource.DEFAULT_CONFIG)
    assert [s.name for s in flush.synonyms] == ["log.flush.scheduler.interval.ms"]

    policy = _entry(entries, "cleanup.policy")
    assert (policy.value, policy.config_type) == ("compact", ConfigType.LIST)


def test_effective_topic_retention_from_broker_units() -> None:
    entries = effective_topic_configs(BrokerConfig({"log.retention.minutes": "10"}), {})
    retention = _entry(entries, "retention.ms")
    assert (retention.value, retention.source) == ("600000", ConfigSource.STATIC_BROKER_CONFIG)


def test_effective_topic_configs_normalise_and_validate_overrides() -> None:
    entries = effective_topic_configs(BrokerConfig(), {"preallocate": " TRUE ", "cleanup.policy": "delete, compact"})
    assert _entry(entries, "preallocate").value == "true"
    assert _entry(entries, "cleanup.policy").value == "delete,compact"
    with pytest.raises(ConfigError):
        effective_topic_configs(BrokerConfig(), {"bogus": "1"})


def test_describe_broker_configs() -> None:
    config = BrokerConfig({"log.retention.hours": "2"}).with_dynamic({"log.segment.bytes": "4096"}, per_broker=True)
    entries = describe_broker_configs(config)
    assert [e.name for e in entries] == sorted(BROKER_CONFIGS)

    segment = _entry(entries, "log.segment.bytes")
    assert (segment.value, segment.source, segment.read_only) == ("4096", ConfigSource.DYNAMIC_BROKER_CONFIG, False)
    assert segment.synonyms[0] == ConfigSynonym("log.segment.bytes", "4096", ConfigSource.DYNAMIC_BROKER_CONFIG)

    node = _entry(entries, "node.id")
    assert (node.value, node.source, node.read_only, node.config_type) == (
        "1",
        ConfigSource.DEFAULT_CONFIG,
        True,
        ConfigType.INT,
    )
    assert node.documentation

    retention_ms = _entry(entries, "log.retention.ms")
    assert retention_ms.value is None and retention_ms.source is ConfigSource.DEFAULT_CONFIG
    assert retention_ms.synonyms == (
        ConfigSynonym("log.retention.hours", "2", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG),
    )


# --- log_config ------------------------------------------------------------------------------------


def test_log_config_resolves_overrides_over_broker_defaults() -> None:
    broker = BrokerConfig(
        {
            "log.segment.bytes": "1000",
            "log.roll.hours": "1",
            "log.retention.bytes": "5000",
            "log.flush.interval.messages": "10",
            "log.flush.scheduler.interval.ms": "2000",
            "message.max.bytes": "512",
            "log.message.timestamp.type": "LogAppendTime",
            "log.cleanup.policy": "compact",
            "log.segment.delete.delay.ms": "0",
            "log.index.interval.bytes": "128",
            "log.index.size.max.bytes": "4096",
        }
    )
    config = log_config(broker, {"segment.bytes": "500", "retention.ms": "-1", "cleanup.policy": "compact,delete"})
    assert config == LogConfig(
        segment_bytes=500,
        segment_ms=HOUR_MS,
        retention_ms=-1,
        retention_bytes=5000,
        index_interval_bytes=128,
        segment_index_bytes=4096,
        flush_messages=10,
        flush_ms=2000,
        max_message_bytes=512,
        message_timestamp_type=TimestampType.LOG_APPEND_TIME,
        cleanup_policy=("compact", "delete"),
        file_delete_delay_ms=0,
    )


def test_log_config_timestamp_bounds_and_flush_ms() -> None:
    config = log_config(
        BrokerConfig({"log.flush.interval.ms": "50"}),
        {"message.timestamp.before.max.ms": "10", "message.timestamp.after.max.ms": "20"},
    )
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (10, 20)
    assert config.flush_ms == 50


def test_log_config_rejects_invalid_overrides() -> None:
    with pytest.raises(ConfigError, match=r"segment\.bytes"):
        log_config(BrokerConfig(), {"segment.bytes": "1"})


def test_example_properties_file_loads_cleanly(caplog: pytest.LogCaptureFixture) -> None:
    from pathlib import Path

    from moldau.config import BrokerConfig, load_properties

    path = Path(__file__).resolve().parents[2] / "config" / "server.properties"
    config = BrokerConfig.from_properties(load_properties(str(path)))
    assert config.node_id == 1 and config.log_dirs == ["./data"]
    assert not config.unknown
    assert "unknown" not in caplog.text.lower()


def test_server_without_a_properties_file_has_no_initial_rebalance_delay(tmp_path: Path) -> None:
    """`moldau server` alone is a laptop's broker (Kafka's stock server.properties); a file or an override
    brings Kafka's built-in default back or sets any value."""
    import argparse

    from moldau.cli.server import _load_config

    def load(config_file: str | None, *overrides: str) -> int:
        args = argparse.Namespace(config_file=config_file, override=list(overrides))
        return _load_config(args).group_initial_rebalance_delay_ms

    assert load(None) == 0
    assert load(None, "group.initial.rebalance.delay.ms=250") == 250
    empty = tmp_path / "server.properties"
    empty.write_text("node.id=1\n")
    assert load(str(empty)) == 3000


def test_empty_cleanup_policy_is_accepted_and_means_keep_everything() -> None:
    """Kafka 4.2: an empty cleanup.policy is neither deletion by retention nor compaction."""
    assert BrokerConfig.from_properties({"log.cleanup.policy": ""}).log_cleanup_policy == []
    validate_topic_configs({"cleanup.policy": ""})
    config = LogConfig.from_config(BrokerConfig(), {"cleanup.policy": "", "retention.ms": "1"})
    assert config.cleanup_policy == () and not config.compact


def test_kafka_broker_configs_without_effect_are_known_typed_and_dynamic_as_in_kafka() -> None:
    from moldau.config.kafka_broker_configs import KAFKA_BROKER_CONFIGS

    config = BrokerConfig.from_properties({"num.replica.fetchers": "4", "delegation.token.secret.key": "s3cret"})
    assert not config.unknown and config.value("num.replica.fetchers") == 4
    assert "s3cret" not in repr(config)  # a password stays hidden
    with pytest.raises(ConfigError, match=r"background\.threads"):
        BrokerConfig.from_properties({"background.threads": "many"})
    dynamic = {c.name for c in KAFKA_BROKER_CONFIGS if c.update_mode != "read-only"}
    assert {"background.threads", "log.cleaner.threads", "remote.log.reader.threads"} <= dynamic
    assert {c.name for c in KAFKA_BROKER_CONFIGS} <= set(BROKER_CONFIGS)
