"""The asyncio edge of `append_linger`: arranges the append of a coordinator's waiting writes when its linger says,
with the coordinator's clock.

A coordinator tells the scheduler of each write it keeps waiting (`wrote`) and whether the writes must be appended
now; otherwise the scheduler calls the coordinator's flush at the end of this turn of the event loop (adaptive) or
at the linger's deadline. Whatever appends the waiting writes first, the arranged call or another input that
needs them in the log, tells the scheduler (`flushed`), so that the next write opens a new batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from moldau.clock import Clock
from moldau.coordinator.append_linger import AppendLinger, Flush

__all__ = ["FlushScheduler", "assume_more_requests"]


def assume_more_requests() -> bool:
    """For a coordinator not told whether other requests wait in this turn: the adaptive linger then always waits for
    the turn's end."""
    return True


class FlushScheduler:
    def __init__(self, linger: AppendLinger, clock: Clock, flush: Callable[[], None],
                 more_requests_this_turn: Callable[[], bool]) -> None:
        """`flush` appends the waiting writes (and calls `flushed`); `more_requests_this_turn`: whether other
        connections have requests to serve in this turn of the event loop."""
        self.linger = linger
        self._clock = clock
        self._flush = flush
        self._more_requests_this_turn = more_requests_this_turn
        self._first_write_ms: float | None = None
        self._arranged: asyncio.Handle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def wrote(self, waiting_bytes: int) -> bool:
        """A write joined the waiting ones, whose records now take about `waiting_bytes`. True: the caller appends
        them now; False: their append is arranged."""
        now_ms = self._clock.monotonic_ms() if self.linger.timed else 0.0  # a clock read per commit, saved
        if self._first_write_ms is None:
            self._first_write_ms = now_ms
        flush = self.linger.flush_at(self._first_write_ms, now_ms, waiting_bytes, self._more_requests_this_turn())
        if flush.when is Flush.NOW:
            return True
        if self._arranged is None:  # the batch's first wait: later writes join the same append
            loop = self._running_loop()
            if flush.deadline_ms is None:
                self._arranged = loop.call_soon(self._flush)
            else:
                self._arranged = loop.call_later(max(flush.deadline_ms - now_ms, 0.0) / 1000, self._flush)
        return False

    def flushed(self) -> None:
        """The waiting writes were appended: forget the arranged call, and the next write opens a new batch."""
        if self._arranged is not None:
            self._arranged.cancel()
            self._arranged = None
        self._first_write_ms = None

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is None or not loop.is_running():  # each lookup of the running loop costs a getpid system call
            loop = self._loop = asyncio.get_running_loop()
        return loop
