"""The registry's pieces that do no I/O, put together, and what the HTTP layer asks of the store behind them.

`RegistryCore` holds the state replayed from `_schemas`, the parsed-schema cache and the planners of reads and
writes. `Store` is where writes go and how a broker catches up with them: `moldau.registry.store.TopicStore` in
the broker; an in-memory one in unit tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from moldau.registry.admin import Admin
from moldau.registry.operations import Operations, Plan
from moldau.registry.parsed import FormatTools, ParsedSchemas, SchemaTools
from moldau.registry.state import RegistryState

__all__ = ["NotWriter", "RegistryCore", "Store"]


class NotWriter(Exception):
    """This broker may not write `_schemas` now; `url` is the registry that may (None while nobody is known)."""

    def __init__(self, url: str | None) -> None:
        super().__init__(f"the registry's writer is {url or 'not known yet'}")
        self.url = url


class Store(Protocol):
    async def write(self, plan: Callable[[], Plan]) -> Any:
        """Run `plan` against the state brought up to date, append its records durably, apply them, and return
        its answer. Raises NotWriter on a broker that may not write, RegistryError for refusals and store
        errors."""
        ...

    async def catch_up(self, timeout_s: float) -> None:
        """Replay `_schemas` up to what is committed now, so writes made through other brokers are seen.
        Raises RegistryError (50002) when that cannot be done within `timeout_s`."""
        ...


class RegistryCore:
    def __init__(self, tools: SchemaTools | None = None, cluster_id: str = "") -> None:
        self.state = RegistryState()
        self.parsed = ParsedSchemas(self.state, tools or FormatTools())
        self.ops = Operations(self.parsed)
        self.admin = Admin(self.state)
        self.cluster_id = cluster_id
