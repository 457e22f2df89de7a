"""When a coordinator appends the writes it lets wait: Kafka's `group.coordinator.append.linger.ms` and
`share.coordinator.append.linger.ms`, as a decision free of I/O and of clocks (the caller passes the times and acts
on the answer, see `flush_scheduler`).

A coordinator keeps the writes that may share a batch waiting, and appends them together, one batch per partition
of its topic. How long they wait is the linger:

- 0: not at all, every write is appended on its own at once;
- N > 0: until N ms after the first of them (Kafka's linger timer);
- -1, adaptive (the default): until the requests already read in this turn of the event loop have been served,
  or at once when no other connection has a request waiting. This is Kafka's adaptive linger, a flush queued
  behind the operations already in the coordinator's queue, in the terms of one event loop: a lone writer never
  waits, and a burst of writes read together shares a batch.

Whatever the linger, the waiting writes are appended at once when their records reach `max_batch_bytes`, as Kafka
flushes a batch that is full, so a batch stays well under the topic's `max.message.bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["ADAPTIVE", "AppendLinger", "Flush", "FlushAt"]

ADAPTIVE = -1
# Half of the default max.message.bytes of a topic (1 MiB and a record batch's overhead), so that an estimate of
# the waiting records' size that falls short still makes a batch the log accepts.
DEFAULT_MAX_BATCH_BYTES = 512 * 1024


class Flush(Enum):
    NOW = "now"
    END_OF_TURN = "end of turn"  # once the requests already read in this turn of the event loop have been served
    AT_DEADLINE = "at deadline"


@dataclass(frozen=True, slots=True)
class FlushAt:
    """When the waiting writes are to be appended; `deadline_ms` (monotonic) for AT_DEADLINE."""

    when: Flush
    deadline_ms: float | None = None


FLUSH_NOW = FlushAt(Flush.NOW)
FLUSH_AT_END_OF_TURN = FlushAt(Flush.END_OF_TURN)


@dataclass(frozen=True, slots=True)
class AppendLinger:
    """`linger_ms`: 0, a positive number of milliseconds, or ADAPTIVE (-1)."""

    linger_ms: int = ADAPTIVE
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES

    def __post_init__(self) -> None:
        if self.linger_ms < ADAPTIVE:
            raise ValueError(f"an append linger of {self.linger_ms} ms")

    @property
    def timed(self) -> bool:
        """Whether the decision depends on the times (a linger in ms); the others need no clock read."""
        return self.linger_ms > 0

    def flush_at(self, first_write_ms: float, now_ms: float, waiting_bytes: int,
                 more_requests_this_turn: bool) -> FlushAt:
        """When to append the writes waiting now, the first of which came at `first_write_ms` (monotonic, as
        `now_ms`), and whose records take about `waiting_bytes`. `more_requests_this_turn`: whether other
        connections have requests to serve in this turn of the event loop."""
        if self.linger_ms == 0 or waiting_bytes >= self.max_batch_bytes:
            return FLUSH_NOW
        if self.linger_ms == ADAPTIVE:
            return FLUSH_AT_END_OF_TURN if more_requests_this_turn else FLUSH_NOW
        deadline_ms = first_write_ms + self.linger_ms
        return FLUSH_NOW if now_ms >= deadline_ms else FlushAt(Flush.AT_DEADLINE, deadline_ms)
