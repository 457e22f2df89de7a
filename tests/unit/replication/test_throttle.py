"""Replication quotas (KIP-73): which replicas a topic's configs throttle, when a broker's limit holds them back,
and the configs `moldau partitions reassign --throttle` sets for a plan."""

from __future__ import annotations

import pytest

from moldau.cli.reassignment_throttle import throttle_configs
from moldau.config import BrokerConfig, ConfigError
from moldau.replication.throttle import UNLIMITED, ReplicationQuota, ReplicationQuotas
from moldau.replication.throttled_replicas import (
    NO_THROTTLED_REPLICAS,
    parse_throttled_replicas,
    throttled_replicas_problem,
)
from moldau.security.quotas import QuotaConfig
from moldau.storage.log_config import LogConfig


def test_a_topic_names_its_throttled_replicas_as_partition_broker_pairs_or_all() -> None:
    pairs = parse_throttled_replicas(("0:1", " 0:2", "3:1"))
    assert pairs.covers(0, 1) and pairs.covers(0, 2) and pairs.covers(3, 1)
    assert not pairs.covers(1, 1) and not pairs.covers(3, 2)
    everything = parse_throttled_replicas(("*",))
    assert everything.covers(7, 9)
    assert parse_throttled_replicas(()) is NO_THROTTLED_REPLICAS and not NO_THROTTLED_REPLICAS.covers(0, 1)


@pytest.mark.parametrize("value", [("0",), ("0:a",), ("*", "0:1"), (":1",), ("0:1:2",)])
def test_a_malformed_list_is_refused_in_kafkas_words(value: tuple[str, ...]) -> None:
    assert throttled_replicas_problem(value) == (
        "must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def test_the_topic_configs_reach_the_partition_logs_settings_and_are_validated() -> None:
    config = LogConfig.from_config(BrokerConfig({}), {"leader.replication.throttled.replicas": "0:1,1:2",
                                                      "follower.replication.throttled.replicas": "*"})
    assert config.leader_throttled_replicas.covers(1, 2) and not config.leader_throttled_replicas.covers(1, 1)
    assert config.follower_throttled_replicas.everything
    with pytest.raises(ConfigError, match=r"leader\.replication\.throttled\.replicas"):
        LogConfig.from_config(BrokerConfig({}), {"leader.replication.throttled.replicas": "zero:one"})


def test_a_limit_holds_back_out_of_sync_throttled_replicas_only_while_the_rate_is_over_it() -> None:
    quota = ReplicationQuota(limit_bytes_per_s=1000)
    quota.rate.config = QuotaConfig(window_num=2, window_size_ms=1000)
    assert not quota.exceeded(0)
    quota.record(3000, 0)  # 3,000 bytes over at least one window of a second: 3,000 B/s
    assert quota.exceeded(100)
    assert quota.holds_back(throttled=True, in_sync=False, now_ms=100)
    assert not quota.holds_back(throttled=True, in_sync=True, now_ms=100)  # in the ISR: never held back
    assert not quota.holds_back(throttled=False, in_sync=False, now_ms=100)  # not named by the topic
    assert 0 < quota.wait_ms(100) <= 2000
    assert not quota.exceeded(2100)  # the windows that counted it have passed


def test_no_limit_records_nothing_and_holds_back_nothing() -> None:
    quota = ReplicationQuota()
    assert quota.limit_bytes_per_s == UNLIMITED and not quota.limited
    quota.record(10**12, 0)
    assert not quota.exceeded(1) and quota.wait_ms(1) == 0 and not quota.rate.samples


def test_new_rates_keep_what_was_measured_unless_the_windows_change() -> None:
    quotas = ReplicationQuotas()
    windows = QuotaConfig(window_num=2, window_size_ms=1000)
    quotas.configure(1000, 2000, windows)
    quotas.leader.record(5000, 0)
    quotas.configure(4000, 2000, windows)
    assert quotas.leader.limit_bytes_per_s == 4000 and quotas.leader.exceeded(10)
    quotas.configure(4000, 2000, QuotaConfig(window_num=3, window_size_ms=1000))
    assert not quotas.leader.exceeded(10)


def test_a_reassignment_throttles_the_current_replicas_as_leaders_and_the_added_ones_as_followers() -> None:
    current = {("a", 0): (1, 2), ("a", 1): (2, 3), ("b", 0): (3,)}
    plan = {("a", 0): (1, 2), ("a", 1): (3, 4), ("b", 0): (3, 1)}  # a-0 does not move
    topics, brokers = throttle_configs(current, plan)
    assert topics == {
        "a": {"leader.replication.throttled.replicas": "1:2,1:3", "follower.replication.throttled.replicas": "1:4"},
        "b": {"leader.replication.throttled.replicas": "0:3", "follower.replication.throttled.replicas": "0:1"}}
    assert brokers == [1, 2, 3, 4]
