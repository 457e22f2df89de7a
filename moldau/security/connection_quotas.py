"""Connection limits: `max.connections`, `max.connections.per.ip` and `max.connections.per.ip.overrides`, and
connection creation rates (KIP-612, `ConnectionRates`: `max.connection.creation.rate`, per listener, and the
`connection_creation_rate` quota of `ip` entities).

A connection over a limit is closed as soon as it is accepted (Kafka does the same), with a log line saying
which limit; the others are unaffected. Connections on controller listeners (from other nodes of the cluster)
are not counted, so a client flood cannot cut the quorum off.

`max.connections.per.ip.overrides` is Kafka's `host:count,host:count` list; hosts are matched against the peer's
address as the socket reports it (give IP addresses, not names). Sans-I/O: the broker calls `admit` on accept and
`release` when the connection goes.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from moldau.security.quotas import CONNECTION_CREATION_RATE, IP, Entity, QuotaConfig, Rate
from moldau.security.sasl.settings import listener_int

if TYPE_CHECKING:
    from moldau.config import BrokerConfig

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1  # Kafka's default for both limits (Int.MaxValue)


def parse_overrides(text: str) -> dict[str, int]:
    """`host:count,host:count` -> {host: count}; raises ValueError on a malformed entry."""
    out: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().lstrip("-").isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entries are host:count, not {item!r}")
        value = int(count)
        if value < 0:
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is negative")
        out[host.strip()] = value
    return out


@dataclass(slots=True)
class ConnectionQuotas:
    max_connections: int = UNLIMITED
    max_per_ip: int = UNLIMITED
    overrides: Mapping[str, int] = field(default_factory=dict)
    total: int = 0
    per_ip: Counter[str] = field(default_factory=Counter)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(config.max_connections, config.max_connections_per_ip,
                   parse_overrides(config.max_connections_per_ip_overrides))

    def limit_for(self, host: str) -> int:
        return self.overrides.get(host, self.max_per_ip)

    def admit(self, host: str) -> str | None:
        """Count a new connection from `host`; returns why it must be closed instead (then nothing is counted)."""
        if self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached"
        limit = self.limit_for(host)
        if self.per_ip[host] >= limit:
            return f"max.connections.per.ip={limit} reached for {host}"
        self.total += 1
        self.per_ip[host] += 1
        return None

    def release(self, host: str) -> None:
        if self.per_ip[host] <= 0:
            return
        self.total -= 1
        self.per_ip[host] -= 1
        if not self.per_ip[host]:
            del self.per_ip[host]


@dataclass(frozen=True, slots=True)
class Admission:
    """When a new connection may be served: after `wait_ms` (the connection creation rates of the broker and its
    listener), or never when `throttled_ms` > 0 (its address's rate): then it is closed that long after the wait."""

    wait_ms: float = 0.0
    throttled_ms: float = 0.0


ADMIT_NOW = Admission()
_EXPIRY_BATCH = 1000  # per-address rates added between two sweeps for silent addresses


@dataclass(slots=True)
class ConnectionRates:
    """Connection creation rates (KIP-612): `max.connection.creation.rate` for the broker's client listeners
    together, `listener.name.<listener>.max.connection.creation.rate` for one listener, and the
    `connection_creation_rate` client quota of an `ip` entity (an address, or the default for every address).

    As in Kafka, the broker and listener rates hold new connections back: a listener's acceptor waits until the
    rates allow the next connection, so connections arriving meanwhile queue behind it. Here the event loop has
    already accepted them, so the wait is modelled: each listener keeps the time its acceptor would be free again,
    and a connection is served from then plus its own throttle (its socket is not read before). An address over
    its own rate is not served at all: the connection is closed once its throttle time has passed, and it is not
    counted against the broker and listener rates. Throttle times are capped at one quota window, as Kafka caps
    them. The inter-broker listener, when the broker has others, is held to its own rate only (Kafka's protected
    listener), so a client storm cannot delay replication.

    Sans-I/O: `admit` takes the time; the IP quotas are given per call (they come with the metadata image).
    """

    config: QuotaConfig = field(default_factory=QuotaConfig)
    broker_rate: int = UNLIMITED
    listener_rates: Mapping[str, int] = field(default_factory=dict)
    protected_listener: str | None = None
    _broker: Rate | None = None
    _listeners: dict[str, Rate] = field(default_factory=dict)
    _addresses: dict[str, Rate] = field(default_factory=dict)
    _free_at_ms: dict[str, float] = field(default_factory=dict)
    _next_expiry: int = _EXPIRY_BATCH

    @classmethod
    def from_config(cls, config: BrokerConfig, listeners: Iterable[str], inter_broker_listener: str | None) -> Self:
        """Raises ConfigError for a listener's rate that is not a whole number of at least 0."""
        names = list(listeners)
        rates = {name: rate for name in names
                 if (rate := listener_int(config, name, "max.connection.creation.rate")) is not None}
        return cls(QuotaConfig(config.quota_window_num, config.quota_window_size_seconds * 1000),
                   config.max_connection_creation_rate, rates,
                   inter_broker_listener if inter_broker_listener in names and len(names) > 1 else None)

    @property
    def limits_listeners(self) -> bool:
        """Whether the broker or a listener has a rate (else only IP quotas can hold a connection back)."""
        return self.broker_rate != UNLIMITED or any(r != UNLIMITED for r in self.listener_rates.values())

    def admit(self, listener: str, host: str, ip_quota: float | None, now_ms: float) -> Admission:
        """Record a new connection on `listener` from `host`, whose address quota is `ip_quota` (None: none)."""
        start_ms = now_ms
        if self.limits_listeners:
            start_ms = max(now_ms, self._free_at_ms.get(listener, now_ms))
            start_ms += self._record_listener(listener, 1.0, start_ms)
            if start_ms > now_ms:
                self._free_at_ms[listener] = start_ms
        if ip_quota is None:
            return Admission(start_ms - now_ms) if start_ms > now_ms else ADMIT_NOW
        rate = self._address_rate(host, start_ms)
        rate.record(1.0, start_ms)
        throttled = self._throttle_ms(rate, ip_quota, start_ms)
        if throttled > 0:
            # Not accepted after all: it counts against no rate, as Kafka un-records it.
            rate.record(-1.0, start_ms)
            if self.limits_listeners:
                self._record_listener(listener, -1.0, start_ms)
        return Admission(start_ms - now_ms, throttled)

    def _record_listener(self, listener: str, value: float, at_ms: float) -> float:
        """Record into the broker's (unless `listener` is protected) and the listener's rate; the longer
        throttle of the two."""
        throttle = 0.0
        if listener != self.protected_listener and self.broker_rate != UNLIMITED:
            if self._broker is None:
                self._broker = Rate(self.config)
            self._broker.record(value, at_ms)
            throttle = self._throttle_ms(self._broker, self.broker_rate, at_ms) if value > 0 else 0.0
        limit = self.listener_rates.get(listener, UNLIMITED)
        if limit != UNLIMITED:
            rate = self._listeners.get(listener)
            if rate is None:
                rate = self._listeners[listener] = Rate(self.config)
            rate.record(value, at_ms)
            if value > 0:
                throttle = max(throttle, self._throttle_ms(rate, limit, at_ms))
        return throttle

    def _throttle_ms(self, rate: Rate, limit: float, at_ms: float) -> float:
        cap = self.config.window_size_ms
        if limit <= 0:
            return float(cap)  # a rate of 0 admits nothing: always the longest throttle
        return float(min(rate.throttle_ms(limit, at_ms), cap))

    def _address_rate(self, host: str, now_ms: float) -> Rate:
        rate = self._addresses.get(host)
        if rate is None:
            if len(self._addresses) >= self._next_expiry:
                span = self.config.span_ms
                self._addresses = {h: r for h, r in self._addresses.items()
                                   if r.samples and now_ms - r.samples[-1].start_ms < span}
                self._next_expiry = len(self._addresses) + _EXPIRY_BATCH
            rate = self._addresses[host] = Rate(self.config)
        return rate


def ip_quota(quotas: Mapping[Entity, Mapping[str, float]], host: str) -> float | None:
    """The `connection_creation_rate` of `host`: its own ip entity's, else the default ip entity's, else None."""
    for entity in (((IP, host),), ((IP, None),)):
        values = quotas.get(entity)
        if values is not None and CONNECTION_CREATION_RATE in values:
            return values[CONNECTION_CREATION_RATE]
    return None
