"""How long a node waits on the other nodes it talks to, from Kafka's broker configs of the same names.

- ``socket.connection.setup.timeout.ms`` and ``socket.connection.setup.timeout.max.ms`` bound opening a
  connection to another node (the TCP handshake and, on TLS listeners, the TLS handshake). As in Kafka's clients
  the bound doubles with each consecutive failure to open a connection to the same peer, up to the maximum, with
  20 % jitter either way, so a peer that does not answer at all is given up on quickly at first and nodes that
  lost it together do not all retry in step. A connection that opens resets it.
- ``request.timeout.ms`` bounds a request to another broker that has no bound of its own: transaction markers
  and their coordinators' checks, share-group state, dead-letter records.
- ``controller.socket.timeout.ms`` bounds each attempt of a request to the active controller (registration,
  heartbeats, forwarded admin requests); the call itself tries again, within its own deadline, when an attempt
  fails or when leadership moves while it waits (`moldau.server.controller_channel`).

The metadata quorum's requests have their own bound (``controller.quorum.request.timeout.ms``), and followers'
fetches theirs (``replica.socket.timeout.ms``). Nothing here reads a clock: the pool counts failures and asks.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Self

from moldau.config.broker_config import BrokerConfig

__all__ = ["ConnectionSetup", "InterBrokerTimeouts"]

_JITTER = 0.2  # Kafka's clients' connection setup jitter


@dataclass(frozen=True, slots=True)
class ConnectionSetup:
    """The bound on opening one connection, after some consecutive failures to open one to the same peer."""

    timeout_ms: int = 10_000  # socket.connection.setup.timeout.ms
    max_timeout_ms: int = 30_000  # socket.connection.setup.timeout.max.ms

    def timeout_s(self, failures: int, rng: random.Random) -> float:
        """Doubled per failure up to the maximum, then jittered by up to 20 % either way (never past the
        maximum). A maximum at or below the base leaves the base, unjittered."""
        if self.max_timeout_ms <= self.timeout_ms:
            return self.timeout_ms / 1000
        doublings = min(failures, math.log2(self.max_timeout_ms / self.timeout_ms))
        bound_ms = self.timeout_ms * 2 ** doublings * rng.uniform(1 - _JITTER, 1 + _JITTER)
        return min(bound_ms, self.max_timeout_ms) / 1000


@dataclass(frozen=True, slots=True)
class InterBrokerTimeouts:
    """What a node waits for the nodes it calls (see the module docstring for which requests each bounds)."""

    request_timeout_ms: int = 30_000  # request.timeout.ms
    controller_socket_timeout_ms: int = 30_000  # controller.socket.timeout.ms
    setup: ConnectionSetup = field(default_factory=ConnectionSetup)

    @property
    def request_timeout_s(self) -> float:
        return self.request_timeout_ms / 1000

    @property
    def controller_attempt_s(self) -> float:
        return self.controller_socket_timeout_ms / 1000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(config.request_timeout_ms, config.controller_socket_timeout_ms,
                   ConnectionSetup(config.socket_connection_setup_timeout_ms,
                                   config.socket_connection_setup_timeout_max_ms))
