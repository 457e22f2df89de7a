"""Polling the sockets for a short while before the event loop sleeps (`network.idle.poll.us`).

A request/response client (a synchronous committer, a producer waiting for each acknowledgement, a follower's
fetch loop) leaves the broker idle between its requests for about one round trip. When the event loop then
blocks in `epoll_wait`, the thread sleeps and its core goes idle, and the thread comes back to a core whose
caches went cold (on virtual machines the idle vCPU is given up to the host): the next request costs about twice
the CPU it costs on a busy core (1.7 to 3.9 times, measured in docs/benchmarks.md, "Idle polling"). Seastar,
and with it Redpanda, polls for a while before sleeping for this reason (its `--idle-poll-time-us`, 200 µs by
default). Moldau's default is 500 µs: a synchronous commit through librdkafka comes back about every 300 µs on
loopback, and a window shorter than the client's round trip never starts polling.

`IdlePoller` does the same on the asyncio loop, adaptively: when bytes arrive within `window_ms` of the
previous arrival, it keeps one callback in the loop's ready queue until `window_ms` pass without any, which
makes the loop poll its sockets without blocking (a ready callback sets the poll's timeout to zero). Each turn
yields the CPU to any other runnable thread (`sched_yield`), so on a shared host the polling gives way to work
that needs the core. Traffic sparser than the window never starts polling; after the last request of a burst
the loop polls for one window, then sleeps as before.

No sockets and no wall clock here: the loop's `call_soon`, the clock and the yield are given, so the rhythm is
tested with a manual clock (tests/unit/server/test_idle_poll.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable


class IdlePoller:
    """Keeps the event loop polling while requests arrive closer together than `window_ms`."""

    __slots__ = ("_call_soon", "_last_ms", "_monotonic_ms", "_polled_ms", "_polling", "_started_ms", "_window_ms",
                 "_yield")

    def __init__(self, window_ms: float, call_soon: Callable[[Callable[[], None]], object],
                 monotonic_ms: Callable[[], float], yield_cpu: Callable[[], None] = os.sched_yield) -> None:
        self._window_ms = window_ms
        self._call_soon = call_soon
        self._monotonic_ms = monotonic_ms
        self._yield = yield_cpu
        self._last_ms = float("-inf")
        self._polling = False
        self._started_ms = 0.0  # when the current polling began
        self._polled_ms = 0.0  # the polling that ended before it

    @property
    def polling(self) -> bool:
        return self._polling

    def activity(self) -> None:
        """Bytes arrived on a connection: poll on after them if they came within a window of the previous ones."""
        now = self._monotonic_ms()
        previous, self._last_ms = self._last_ms, now
        if not self._polling and now - previous <= self._window_ms:
            self._polling = True
            self._started_ms = now
            self._call_soon(self._poll)

    def polled_ms(self) -> float:
        """How long the loop has polled in all (requests served meanwhile included), for the metrics."""
        current = self._monotonic_ms() - self._started_ms if self._polling else 0.0
        return self._polled_ms + current

    def _poll(self) -> None:
        now = self._monotonic_ms()
        if now - self._last_ms >= self._window_ms:
            self._polling = False
            self._polled_ms += now - self._started_ms
            return
        self._yield()
        self._call_soon(self._poll)


def idle_poller(window_us: int, call_soon: Callable[[Callable[[], None]], object],
                monotonic_ms: Callable[[], float]) -> IdlePoller | None:
    """The poller for a `network.idle.poll.us` setting; None when it is 0 (the loop sleeps as soon as it is idle)."""
    return IdlePoller(window_us / 1000.0, call_soon, monotonic_ms) if window_us > 0 else None
