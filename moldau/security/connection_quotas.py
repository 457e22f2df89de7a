"""Connection limits: `max.connections`, `max.connections.per.ip` and `max.connections.per.ip.overrides`.

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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

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
