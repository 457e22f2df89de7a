"""Connection limits: max.connections, max.connections.per.ip and its overrides; connection creation rates."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest

from moldau.config import BrokerConfig, ConfigError
from moldau.security.connection_quotas import ADMIT_NOW, ConnectionQuotas, ConnectionRates, ip_quota, parse_overrides
from moldau.security.quotas import Entity, QuotaConfig


def test_per_ip_limit_refuses_the_extra_connection_until_one_closes() -> None:
    quotas = ConnectionQuotas(max_per_ip=2)
    assert quotas.admit("10.0.0.1") is None
    assert quotas.admit("10.0.0.1") is None
    assert quotas.admit("10.0.0.1") == "max.connections.per.ip=2 reached for 10.0.0.1"
    assert quotas.admit("10.0.0.2") is None  # another address is not affected
    quotas.release("10.0.0.1")
    assert quotas.admit("10.0.0.1") is None
    assert quotas.total == 3


def test_broker_wide_limit_and_overrides() -> None:
    quotas = ConnectionQuotas(max_connections=3, max_per_ip=1, overrides=parse_overrides("127.0.0.1:2, ::1:0"))
    assert quotas.admit("::1") is not None  # override 0: never
    assert quotas.admit("127.0.0.1") is None
    assert quotas.admit("127.0.0.1") is None
    assert quotas.admit("127.0.0.1") is not None
    assert quotas.admit("10.0.0.9") is None
    assert quotas.admit("10.0.0.8") == "max.connections=3 reached"


def test_releasing_an_unknown_host_changes_nothing() -> None:
    quotas = ConnectionQuotas()
    quotas.release("10.0.0.1")
    assert quotas.total == 0


@pytest.mark.parametrize("text", ["nohost", "h:x", "h:-1", ":3"])
def test_malformed_overrides_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_overrides(text)


# -- connection creation rates (KIP-612) ------------------------------------------------------------------------

WINDOWS = QuotaConfig(window_num=2, window_size_ms=1000)  # a rate over at least one full second


def test_a_burst_over_the_broker_rate_is_served_at_that_rate() -> None:
    """The modelled acceptor: each connection over the rate waits its throttle, and those behind it wait for it."""
    rates = ConnectionRates(WINDOWS, broker_rate=5)
    waits = [rates.admit("PLAINTEXT", "10.0.0.1", None, 0.0).wait_ms for _ in range(15)]
    assert waits[:5] == [0.0] * 5  # five in the first second are within the rate
    assert waits[5] > 0 and all(later >= earlier for earlier, later in itertools.pairwise(waits))
    assert waits[-1] == 2000  # fifteen at five a second: the last ones in the third second
    assert rates.admit("PLAINTEXT", "10.0.0.1", None, 0.0).throttled_ms == 0  # held back, never refused


def test_a_listener_rate_holds_back_only_its_listener() -> None:
    rates = ConnectionRates(WINDOWS, listener_rates={"EXTERNAL": 2})
    assert [rates.admit("EXTERNAL", "h", None, 0.0).wait_ms > 0 for _ in range(3)] == [False, False, True]
    assert rates.admit("INTERNAL", "h", None, 0.0) == ADMIT_NOW
    assert rates.admit("EXTERNAL", "h", None, 10_000.0).wait_ms == 0  # the windows have passed


def test_the_inter_broker_listener_is_held_to_its_own_rate_only() -> None:
    rates = ConnectionRates(WINDOWS, broker_rate=1, protected_listener="REPLICATION")
    for _ in range(10):
        assert rates.admit("REPLICATION", "10.0.0.2", None, 0.0) == ADMIT_NOW
    assert rates.admit("CLIENTS", "10.0.0.9", None, 0.0) == ADMIT_NOW
    assert rates.admit("CLIENTS", "10.0.0.9", None, 0.0).wait_ms > 0


def test_an_address_over_its_quota_is_refused_and_counts_against_nothing() -> None:
    rates = ConnectionRates(WINDOWS, broker_rate=4)
    assert rates.admit("PLAINTEXT", "10.0.0.1", 2.0, 0.0) == ADMIT_NOW
    assert rates.admit("PLAINTEXT", "10.0.0.1", 2.0, 0.0) == ADMIT_NOW
    refused = rates.admit("PLAINTEXT", "10.0.0.1", 2.0, 0.0)
    assert refused.wait_ms == 0 and 0 < refused.throttled_ms <= 1000  # capped at one window
    # The refused connection was taken back out of the broker's rate: two more connections still fit in four.
    assert rates.admit("PLAINTEXT", "10.0.0.2", None, 0.0) == ADMIT_NOW
    assert rates.admit("PLAINTEXT", "10.0.0.3", 2.0, 0.0) == ADMIT_NOW  # another address has its own rate
    assert rates.admit("PLAINTEXT", "10.0.0.1", 2.0, 5_000.0) == ADMIT_NOW  # later, within the rate again


def test_a_quota_of_zero_refuses_every_connection_of_the_address() -> None:
    rates = ConnectionRates(WINDOWS)
    assert rates.admit("PLAINTEXT", "10.0.0.1", 0.0, 0.0).throttled_ms == 1000
    assert rates.admit("PLAINTEXT", "10.0.0.1", None, 0.0) == ADMIT_NOW  # the quota removed


def test_an_addresss_own_quota_wins_over_the_default() -> None:
    quotas: dict[Entity, Mapping[str, float]] = {
        (("ip", None),): {"connection_creation_rate": 5.0}, (("ip", "10.0.0.1"),): {"connection_creation_rate": 50.0}}
    assert ip_quota(quotas, "10.0.0.1") == 50.0
    assert ip_quota(quotas, "10.0.0.2") == 5.0
    assert ip_quota({}, "10.0.0.2") is None


def test_rates_from_config_with_a_listener_override() -> None:
    config = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                           "inter.broker.listener.name": "INTERNAL",
                           "max.connection.creation.rate": "100",
                           "listener.name.plaintext.max.connection.creation.rate": "7"})
    rates = ConnectionRates.from_config(config, ["PLAINTEXT", "INTERNAL"], "INTERNAL")
    assert (rates.broker_rate, dict(rates.listener_rates), rates.protected_listener) == (
        100, {"PLAINTEXT": 7}, "INTERNAL")
    alone = ConnectionRates.from_config(config, ["INTERNAL"], "INTERNAL")
    assert alone.protected_listener is None  # Kafka protects it only beside other listeners
    with pytest.raises(ConfigError, match=r"max\.connection\.creation\.rate"):
        BrokerConfig({"listener.name.plaintext.max.connection.creation.rate": "-1"})
