"""Settings classes built from the broker configuration with from_config, and BrokerConfig's typed properties."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from moldau.config import BrokerConfig, ConfigError, log_config
from moldau.config.broker_config import _Int, _Read
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.share.coordinator import ShareStateSettings
from moldau.coordinator.txn.coordinator import TxnSettings
from moldau.raft import Config as RaftConfig
from moldau.replication.fetcher import FetcherSettings
from moldau.server.connection_limits import ConnectionLimits, ReceiveBudget
from moldau.storage.log_config import LogConfig

ROOT = Path(__file__).resolve().parents[3]


def config(**values: object) -> BrokerConfig:
    """A broker config from keyword arguments, with underscores for the dots of config names."""
    return BrokerConfig({name.replace("_", "."): str(value) for name, value in values.items()})


# --- defaults: a settings class's own defaults are the configs' defaults ---------------------------------


@pytest.mark.parametrize("settings", [FetcherSettings, TxnSettings, ConnectionLimits, LogConfig, ShareStateSettings])
def test_from_default_config_equals_the_class_defaults(
        settings: type[FetcherSettings | TxnSettings | ConnectionLimits | LogConfig | ShareStateSettings]) -> None:
    assert settings.from_config(BrokerConfig()) == settings()


# --- each field from its config ---------------------------------------------------------------------------


def test_fetcher_settings_from_config() -> None:
    settings = FetcherSettings.from_config(config(
        replica_fetch_wait_max_ms=11, replica_fetch_min_bytes=12, replica_fetch_response_max_bytes=13,
        replica_fetch_max_bytes=14, replica_fetch_backoff_ms=15, replica_socket_timeout_ms=16))
    assert settings == FetcherSettings(max_wait_ms=11, min_bytes=12, max_bytes=13, partition_max_bytes=14,
                                       backoff_ms=15, request_timeout_ms=16)


def test_txn_settings_from_config() -> None:
    settings = TxnSettings.from_config(BrokerConfig({
        "transaction.state.log.num.partitions": "7",
        "transaction.state.log.replication.factor": "2",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.segment.bytes": "4096",
        "transaction.max.timeout.ms": "1000",
        "transactional.id.expiration.ms": "2000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "3000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "4000",
    }))
    assert settings == TxnSettings(num_partitions=7, replication_factor=2, min_isr=1, segment_bytes=4096,
                                   max_timeout_ms=1000, expiration_ms=2000, abort_interval_ms=3000,
                                   remove_interval_ms=4000)


def test_internal_topics_segment_bytes_from_config() -> None:
    """offsets.topic.segment.bytes and share.coordinator.state.topic.segment.bytes: the topics' segment.bytes when
    they are created (Kafka's configs, 100 MiB by default)."""
    assert CoordinatorSettings.from_config(BrokerConfig()).offsets_topic_configs() == {
        "cleanup.policy": "compact", "compression.type": "producer", "segment.bytes": "104857600"}
    offsets = CoordinatorSettings.from_config(config(offsets_topic_segment_bytes=4096)).offsets_topic_configs()
    assert offsets["segment.bytes"] == "4096"
    share = ShareStateSettings.from_config(config(share_coordinator_state_topic_segment_bytes=8192))
    assert share.topic_configs(3)["segment.bytes"] == "8192"
    assert ShareStateSettings().topic_configs(1)["segment.bytes"] == "104857600"


def test_internal_topics_compression_codecs_from_config() -> None:
    """offsets.topic.compression.codec and share.coordinator.state.topic.compression.codec: Kafka's codec ids,
    0 (none) by default; an id no codec has is refused in Kafka's words."""
    assert CoordinatorSettings.from_config(BrokerConfig()).offsets_topic_compression_codec == 0
    assert CoordinatorSettings.from_config(config(offsets_topic_compression_codec=4)).offsets_topic_compression_codec \
        == 4
    assert ShareStateSettings.from_config(config(share_coordinator_state_topic_compression_codec=3)) == \
        ShareStateSettings(compression_codec=3)
    with pytest.raises(ConfigError, match="Unknown compression type id: 5"):
        BrokerConfig({"offsets.topic.compression.codec": "5"})


def test_load_buffer_sizes_from_config() -> None:
    """offsets.load.buffer.size, transaction.state.log.load.buffer.size and share.coordinator.load.buffer.size: the
    bytes each coordinator reads at a time when it loads a partition (5 MiB by default, as Kafka's)."""
    assert CoordinatorSettings.from_config(BrokerConfig()).offsets_load_buffer_size == 5 * 1024 * 1024
    assert CoordinatorSettings.from_config(config(offsets_load_buffer_size=1000)).offsets_load_buffer_size == 1000
    assert TxnSettings.from_config(config(transaction_state_log_load_buffer_size=2000)) == TxnSettings(
        load_buffer_size=2000)
    assert ShareStateSettings.from_config(config(share_coordinator_load_buffer_size=3000)) == ShareStateSettings(
        load_buffer_size=3000)


def test_connection_limits_from_config() -> None:
    limits = ConnectionLimits.from_config(config(
        socket_request_max_bytes=1000, queued_max_requests=7, connections_max_idle_ms=-1,
        socket_request_read_timeout_ms=250))
    assert limits == ConnectionLimits(max_request_bytes=1000, max_queued_requests=7, idle_ms=-1,
                                      frame_timeout_ms=250)


def test_coordinator_settings_from_config() -> None:
    settings = CoordinatorSettings.from_config(BrokerConfig({
        "group.min.session.timeout.ms": "100", "group.max.session.timeout.ms": "200",
        "group.initial.rebalance.delay.ms": "300", "group.max.size": "4",
        "offset.metadata.max.bytes": "50", "offsets.retention.minutes": "2",
        "group.consumer.heartbeat.interval.ms": "600", "group.consumer.session.timeout.ms": "700",
        "group.consumer.assignors": "range, uniform", "group.consumer.max.size": "8",
        "offsets.topic.num.partitions": "9", "offsets.topic.replication.factor": "1",
        "offsets.retention.check.interval.ms": "1100", "offsets.commit.timeout.ms": "1200",
    }))
    limits, shard, consumer = settings.shard.limits, settings.shard, settings.shard.consumer
    assert (limits.min_session_timeout_ms, limits.max_session_timeout_ms) == (100, 200)
    assert (limits.initial_rebalance_delay_ms, limits.max_size) == (300, 4)
    assert (shard.offset_metadata_max_bytes, shard.offsets_retention_ms) == (50, 120_000)
    assert (consumer.heartbeat_interval_ms, consumer.session_timeout_ms) == (600, 700)
    assert (consumer.assignors, consumer.max_size) == (("range", "uniform"), 8)
    assert (settings.offsets_topic_partitions, settings.offsets_topic_replication_factor) == (9, 1)
    assert (settings.offsets_retention_check_interval_ms, settings.offset_commit_timeout_ms) == (1100, 1200)


def test_raft_config_from_config() -> None:
    raft = RaftConfig.from_config(config(controller_quorum_election_timeout_ms=400,
                                         controller_quorum_fetch_interval_ms=30,
                                         controller_quorum_fetch_timeout_ms=900,
                                         controller_quorum_election_backoff_max_ms=700,
                                         controller_quorum_retry_backoff_ms=15))
    assert raft == RaftConfig(election_timeout_ms_min=400, election_timeout_ms_max=800, fetch_interval_ms=30,
                              check_quorum_ms=900, begin_epoch_interval_ms=100, max_fetch_entries=512,
                              election_backoff_max_ms=700, retry_backoff_ms=15)
    defaults = RaftConfig.from_config(BrokerConfig())
    assert (defaults.election_backoff_max_ms, defaults.retry_backoff_ms) == (1000, 20)  # Kafka's defaults
    # The epoch is re-announced at least every millisecond, however short the election timeout.
    assert RaftConfig.from_config(config(controller_quorum_election_timeout_ms=10)).begin_epoch_interval_ms == 2


def test_log_config_from_config_takes_topic_overrides() -> None:
    broker = config(log_segment_bytes=5000, log_retention_hours=1)
    assert LogConfig.from_config(broker) == LogConfig.from_config(broker, {})
    assert LogConfig.from_config(broker).segment_bytes == 5000
    assert LogConfig.from_config(broker).retention_ms == 3_600_000
    assert LogConfig.from_config(broker, {"segment.bytes": "600"}).segment_bytes == 600
    assert log_config == LogConfig.from_config  # the name importers know


def test_segment_jitter_ms_falls_back_to_log_roll_jitter_ms_then_hours() -> None:
    assert LogConfig.from_config(config()).segment_jitter_ms == 0
    assert LogConfig.from_config(config(log_roll_jitter_hours=2)).segment_jitter_ms == 7_200_000
    assert LogConfig.from_config(config(log_roll_jitter_hours=2, log_roll_jitter_ms=5000)).segment_jitter_ms == 5000
    assert LogConfig.from_config(config(log_roll_jitter_ms=5000), {"segment.jitter.ms": "7"}).segment_jitter_ms == 7


# --- the receive budget: clamped to one request, with a warning ---------------------------------------


def test_receive_budget_from_config_keeps_a_large_enough_limit(caplog: pytest.LogCaptureFixture) -> None:
    assert ReceiveBudget.from_config(BrokerConfig()).limit == 268435456
    assert ReceiveBudget.from_config(config(queued_max_request_bytes=-1)).limit == -1
    assert ReceiveBudget.from_config(config(queued_max_request_bytes=1000, socket_request_max_bytes=1000)).limit == 1000
    assert not caplog.records


def test_receive_budget_from_config_is_never_below_one_request(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        budget = ReceiveBudget.from_config(config(queued_max_request_bytes=0, socket_request_max_bytes=5000))
    assert budget.limit == 5000
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("moldau.server.broker", "queued.max.request.bytes=0 is below socket.request.max.bytes; using 5000")]


# --- typed properties ----------------------------------------------------------------------------------


def _typed_properties() -> dict[str, _Read[object]]:
    return {name: attr for name, attr in vars(BrokerConfig).items() if isinstance(attr, _Read)}


def test_typed_properties_read_their_configs() -> None:
    properties = _typed_properties()
    assert len(properties) > 50
    defaults = BrokerConfig()
    for attribute, prop in properties.items():
        assert attribute == prop.name.replace(".", "_")
        value = getattr(defaults, attribute)
        assert value == (list(v) if isinstance(v := defaults.value(prop.name), tuple) else v), attribute


def test_typed_properties_see_set_and_dynamic_values() -> None:
    broker = config(replica_fetch_backoff_ms=77, controlled_shutdown_enable="false")
    assert broker.replica_fetch_backoff_ms == 77
    assert broker.controlled_shutdown_enable is False
    assert broker.with_dynamic({"num.partitions": "6"}).num_partitions == 6


def test_a_typed_property_must_be_named_like_its_config() -> None:
    # Python 3.11 wraps errors raised by __set_name__ in a RuntimeError; later versions do not.
    with pytest.raises((TypeError, RuntimeError)):
        type("Wrong", (), {"node_idx": _Int("node.id")})
    with pytest.raises((TypeError, RuntimeError)):
        type("Unknown", (), {"no_such_config": _Int("no.such.config")})


def test_broker_configs_are_read_only_through_typed_properties_outside_the_config_package() -> None:
    # One way to read a broker config: string look-ups such as get_int("...") stay inside moldau/config.
    pattern = re.compile(r"\.(get_int|get_optional_int|get_bool|get_float|get_str|get_list|value|resolve)\(\"")
    offenders = [f"{path.relative_to(ROOT)}:{number}"
                 for path in sorted((ROOT / "moldau").rglob("*.py")) if path.parent.name != "config"
                 for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_group_coordinator_rebalance_protocols_turns_the_consumer_group_apis_off_without_consumer() -> None:
    from moldau.server.feature_gate import config_turned_off_apis

    assert config_turned_off_apis(BrokerConfig()) == {}
    assert config_turned_off_apis(config(group_coordinator_rebalance_protocols="classic,share")).keys() == {68, 69}
    for bad, reason in (("consumer", "classic"), ("classic,shared", "one of"), ("", "Empty list")):
        with pytest.raises(ConfigError, match=reason):
            BrokerConfig({"group.coordinator.rebalance.protocols": bad})


@pytest.mark.parametrize("name,bad", [
    ("sasl.server.max.receive.size", "0"), ("sasl.server.max.receive.size", "99999999999999999999"),
    ("fetch.max.bytes", "1023"), ("fetch.max.bytes", "-1"), ("fetch.max.bytes", "abc"),
    ("max.connection.creation.rate", "-1"), ("max.connection.creation.rate", "1.5"),
    ("listener.name.plaintext.max.connection.creation.rate", ""),
    ("initial.broker.registration.timeout.ms", "0"), ("offsets.topic.segment.bytes", "0"),
    ("share.coordinator.state.topic.segment.bytes", "-5"), ("log.roll.jitter.ms", "-1"),
    ("log.roll.jitter.hours", "x"), ("ssl.allow.dn.changes", "yes"), ("ssl.allow.san.changes", ""),
    ("group.coordinator.rebalance.protocols", "classic,consumer,classic2"),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", "-1"), ("sasl.oauthbearer.clock.skew.seconds", "x"),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "-5"),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "1e3"),
    ("socket.listen.backlog.size", "0"), ("socket.send.buffer.bytes", "0"), ("socket.receive.buffer.bytes", "-2"),
    ("socket.receive.buffer.bytes", "3000000000"), ("controller.quorum.election.backoff.max.ms", "-1"),
    ("controller.quorum.retry.backoff.ms", "-1"),
    ("offsets.topic.compression.codec", "5"), ("offsets.topic.compression.codec", "-1"),
    ("offsets.topic.compression.codec", "zstd"), ("share.coordinator.state.topic.compression.codec", "7"),
    ("offsets.load.buffer.size", "0"), ("transaction.state.log.load.buffer.size", "-1"),
    ("share.coordinator.load.buffer.size", "x"),
    ("request.timeout.ms", "0"), ("controller.socket.timeout.ms", "-5"),
    ("socket.connection.setup.timeout.ms", "0"), ("socket.connection.setup.timeout.max.ms", "ten"),
    ("log.dir.failure.timeout.ms", "0"), ("replica.socket.receive.buffer.bytes", "3000000000"),
    ("replica.socket.receive.buffer.bytes", "0"), ("num.replica.fetchers", "0"), ("num.replica.fetchers", "many"),
])
def test_configs_acted_on_refuse_hostile_values_naming_the_config(name: str, bad: str) -> None:
    named = name.split(".", 3)[-1] if name.startswith("listener.name.") else name  # a prefixed one: the base name
    with pytest.raises(ConfigError, match=re.escape(named)):
        BrokerConfig({name: bad})
