"""group.coordinator.append.linger.ms and share.coordinator.append.linger.ms: when a coordinator's waiting writes are
appended, as Kafka defines the values (0: at once; N: N ms after the first; -1: adaptive)."""

from __future__ import annotations

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.coordinator.append_linger import ADAPTIVE, AppendLinger, Flush, FlushAt
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.share.coordinator import ShareStateSettings

NOW = FlushAt(Flush.NOW)
END_OF_TURN = FlushAt(Flush.END_OF_TURN)
SMALL = 100  # bytes waiting, far below the batch bound


@pytest.mark.parametrize("more_requests", [True, False])
def test_no_linger_appends_every_write_at_once(more_requests: bool) -> None:
    assert AppendLinger(0).flush_at(1000.0, 1000.0, SMALL, more_requests) == NOW


def test_the_adaptive_linger_waits_only_for_the_requests_already_read_in_the_turn() -> None:
    linger = AppendLinger(ADAPTIVE)
    assert linger.flush_at(1000.0, 1000.0, SMALL, more_requests_this_turn=True) == END_OF_TURN
    assert linger.flush_at(1000.0, 5000.0, SMALL, more_requests_this_turn=True) == END_OF_TURN
    assert linger.flush_at(1000.0, 1000.0, SMALL, more_requests_this_turn=False) == NOW


@pytest.mark.parametrize("more_requests", [True, False])
def test_a_linger_in_ms_waits_until_that_long_after_the_first_write(more_requests: bool) -> None:
    linger = AppendLinger(25)
    assert linger.flush_at(1000.0, 1000.0, SMALL, more_requests) == FlushAt(Flush.AT_DEADLINE, 1025.0)
    assert linger.flush_at(1000.0, 1024.5, SMALL, more_requests) == FlushAt(Flush.AT_DEADLINE, 1025.0)
    assert linger.flush_at(1000.0, 1025.0, SMALL, more_requests) == NOW
    assert linger.flush_at(1000.0, 1100.0, SMALL, more_requests) == NOW


@pytest.mark.parametrize("linger_ms", [ADAPTIVE, 0, 25, 60_000])
def test_a_full_batch_is_appended_at_once_whatever_the_linger(linger_ms: int) -> None:
    linger = AppendLinger(linger_ms, max_batch_bytes=4096)
    assert linger.flush_at(1000.0, 1000.0, 4096, more_requests_this_turn=True) == NOW
    just_below = linger.flush_at(1000.0, 1000.0, 4095, more_requests_this_turn=True)
    assert (just_below == NOW) == (linger_ms == 0)


def test_a_linger_below_adaptive_is_not_one() -> None:
    with pytest.raises(ValueError):
        AppendLinger(-2)


def test_the_lingers_come_from_their_configs_adaptive_by_default() -> None:
    assert CoordinatorSettings.from_config(BrokerConfig()).append_linger_ms == ADAPTIVE
    assert ShareStateSettings.from_config(BrokerConfig()).append_linger_ms == ADAPTIVE
    configured = BrokerConfig({"group.coordinator.append.linger.ms": "5", "share.coordinator.append.linger.ms": "0"})
    assert CoordinatorSettings.from_config(configured).append_linger_ms == 5
    assert ShareStateSettings.from_config(configured).append_linger_ms == 0
    for name in ("group.coordinator.append.linger.ms", "share.coordinator.append.linger.ms"):
        with pytest.raises(ConfigError, match="Value must be at least -1"):
            BrokerConfig({name: "-2"})
