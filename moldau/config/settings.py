"""The one way a subsystem gets its settings from the broker configuration.

A subsystem keeps what it obeys in a frozen dataclass of its own (``FetcherSettings``, ``TxnSettings``,
``ConnectionLimits`` ...), with units in the field names and defaults equal to the configs' defaults, so tests
can build one directly. The broker builds it with ``from_config``, a classmethod that reads the config's
typed properties (``config.replica_fetch_backoff_ms``) and does any conversion, clamping or warning that
belongs with it. No other code turns config values into settings.

``LogConfig.from_config`` also takes a topic's overrides, since a partition's settings are per topic.
"""

from __future__ import annotations

from typing import Protocol, Self

from moldau.config.broker_config import BrokerConfig

__all__ = ["Settings"]


class Settings(Protocol):
    """A settings class built from the broker configuration."""

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        """The settings ``config`` asks for."""
        ...
