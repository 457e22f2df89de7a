"""Time as an injected dependency.

State machines and storage never read the wall clock themselves: they are handed a `Clock`, so tests
and simulations can drive time explicitly.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps, retention)."""
        ...

    def monotonic_ms(self) -> float:
        """Monotonic milliseconds (timeouts, rates); only differences are meaningful."""
        ...


class SystemClock:
    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = float(start_ms)

    def time_ms(self) -> int:
        return int(self._now_ms)

    def monotonic_ms(self) -> float:
        return self._now_ms

    def advance(self, delta_ms: float) -> None:
        if delta_ms < 0:
            raise ValueError("time does not go back")
        self._now_ms += delta_ms
