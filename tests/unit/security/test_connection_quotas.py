"""Connection limits: max.connections, max.connections.per.ip and its overrides."""

from __future__ import annotations

import pytest

from moldau.security.connection_quotas import ConnectionQuotas, parse_overrides


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
