"""Limits that keep connections from holding the broker's memory: a shared receive budget, idle and slow-frame
timeouts.

- `ReceiveBudget` is Kafka's `queued.max.request.bytes`: the bytes all connections hold for requests (partial
  frames being received, complete frames waiting or being processed). While the total is over the limit,
  connections stop reading their sockets (TCP then slows their clients) until processing has brought the
  total back under it.
- `ConnectionLimits` gathers the per-connection settings.
- `sweep` closes connections idle for longer than `connections.max.idle.ms` and connections that started a
  frame and did not complete it within `socket.request.read.timeout.ms` (a stalled or trickling sender would
  otherwise hold its partial frame's memory forever). The broker runs it periodically; it takes the time as an
  argument, so tests drive it with a manual clock.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, Self

if TYPE_CHECKING:
    from moldau.config import BrokerConfig

__all__ = ["ConnectionLimits", "Reader", "ReceiveBudget", "Sweepable", "sweep"]

# The broker's logger: the budget's start-up warning has always been the broker's.
log = logging.getLogger("moldau.server.broker")


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    max_queued_requests: int = 500  # queued.max.requests
    idle_ms: int = 600_000  # connections.max.idle.ms; -1: never
    frame_timeout_ms: int = 60_000  # socket.request.read.timeout.ms; -1: never

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(
            max_request_bytes=config.socket_request_max_bytes,
            max_queued_requests=config.queued_max_requests,
            idle_ms=config.connections_max_idle_ms,
            frame_timeout_ms=config.socket_request_read_timeout_ms,
        )

    @property
    def max_queued_bytes(self) -> int:
        # One connection may hold at most about two of the largest requests: one being processed, one queued.
        return self.max_request_bytes


class Reader(Protocol):
    """What the budget needs of a connection."""

    @property
    def frame_in_progress(self) -> bool: ...

    @property
    def frames_received(self) -> int: ...

    @property
    def held_bytes(self) -> int: ...

    def pause_for_budget(self) -> None: ...

    def resume_from_budget(self) -> None: ...


class ReceiveBudget:
    """The bytes all connections hold for requests; `limit` < 0 means unbounded.

    The moment the total goes over the limit every connection stops reading (not just the one that read last:
    thousands of connections each finishing one more read would overshoot by hundreds of megabytes), and they
    all resume once processing has brought the total down to `resume_level`, a little under the limit so that
    a busy broker does not pause and resume every connection for each request.

    Partial frames count too, so connections paused half-way through their frames could hold the whole budget
    and never complete a request to free it. While paused, one connection with a frame in progress, the one
    holding the most bytes, is therefore let through to finish that frame (then the next one is): the total
    overshoots by at most one request, and the broker always makes progress.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.paused = False
        self._members: set[Reader] = set()
        self._finisher: Reader | None = None
        self._finisher_frames = 0

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        """The budget of ``queued.max.request.bytes``, never below ``socket.request.max.bytes`` (warned about)."""
        limit = config.queued_max_request_bytes
        if 0 <= limit < config.socket_request_max_bytes:
            # A budget smaller than one request could stall a legitimate large request forever.
            log.warning("queued.max.request.bytes=%d is below socket.request.max.bytes; using %d", limit,
                        config.socket_request_max_bytes)
            return cls(config.socket_request_max_bytes)
        return cls(limit)

    @property
    def exhausted(self) -> bool:
        return 0 <= self.limit < self.used

    @property
    def resume_level(self) -> int:
        return self.limit - self.limit // 8

    def join(self, conn: Reader) -> None:
        self._members.add(conn)
        if self.paused:
            conn.pause_for_budget()

    def leave(self, conn: Reader) -> None:
        self._members.discard(conn)
        if conn is self._finisher:
            self._finisher = None
            self._check()

    def change(self, delta: int) -> None:
        self.used += delta
        self.peak = max(self.peak, self.used)
        self._check()

    def take_peak(self) -> int:
        """The most bytes held since the last call."""
        peak, self.peak = self.peak, self.used
        return peak

    def _check(self) -> None:
        if not self.paused:
            if self.exhausted:
                self.paused = True
                for conn in self._members:
                    conn.pause_for_budget()
                self._pick_finisher()
        elif self.used <= self.resume_level:
            self.paused, self._finisher = False, None
            for conn in list(self._members):
                conn.resume_from_budget()
        elif self._finisher is None or self._finisher.frames_received != self._finisher_frames:
            if self._finisher is not None:
                self._finisher.pause_for_budget()  # its frame is complete: back in line
            self._pick_finisher()

    def _pick_finisher(self) -> None:
        started = [conn for conn in self._members if conn.frame_in_progress]
        self._finisher = max(started, key=lambda conn: conn.held_bytes, default=None)
        if self._finisher is not None:
            self._finisher_frames = self._finisher.frames_received
            self._finisher.resume_from_budget()


class Sweepable(Protocol):
    @property
    def last_activity_ms(self) -> float: ...

    @property
    def frame_started_ms(self) -> float | None: ...

    @property
    def busy(self) -> bool: ...

    @property
    def reading_paused(self) -> bool: ...

    def abort(self, reason: str) -> None: ...


def sweep(connections: Iterable[Sweepable], limits: ConnectionLimits, now_ms: float) -> int:
    """Close the connections idle or slow past their limits; returns how many were closed.

    The frame deadline holds even while the broker has paused reading a connection: otherwise stalled senders
    that filled the receive budget would be shielded by the very pause they caused. A legitimate client caught
    by it under a long overload reconnects and retries. Idleness, though, is not counted against a connection
    the broker is not reading (nor one whose request is being processed, such as a long poll).
    """
    closed = 0
    for conn in list(connections):
        started = conn.frame_started_ms
        if started is not None and limits.frame_timeout_ms >= 0 and now_ms - started > limits.frame_timeout_ms:
            conn.abort(f"a request frame was not completed within socket.request.read.timeout.ms="
                       f"{limits.frame_timeout_ms}")
            closed += 1
        elif (not conn.busy and not conn.reading_paused and started is None and limits.idle_ms >= 0
              and now_ms - conn.last_activity_ms > limits.idle_ms):
            conn.abort(f"idle for longer than connections.max.idle.ms={limits.idle_ms}")
            closed += 1
    return closed
