"""Live throughput for the console's charts: a sampler that, while someone watches, records every few seconds how
many messages and bytes went into and out of each topic, and keeps the last minutes of it as per-second rates.

Where each figure comes from, and why:
- **messages in**: the sum of the partitions' log end offsets (ListOffsets, through the user's AdminClient). The
  end offsets are the cluster's, whichever broker leads each partition, so this is the whole cluster's rate. It
  counts offsets, so transaction markers count as messages too, like Kafka's own end-offset based tools.
- **messages out**: the progress of consumer groups' committed offsets (OffsetFetch per group), also cluster-wide.
  It counts what groups have committed: consumers that never commit (assign-only readers) and share groups are not
  in it, and a new group's first commit is its baseline rather than counted.
- **bytes in / bytes out**: this node's own counters (moldau.metrics: what it appended as leader, what it sent to
  consumers; not replication). Kafka has no cluster-wide byte count a client can ask for, so on a cluster of several
  brokers these show the traffic of the partitions this node leads only; the chart says so.

`ThroughputHistory` holds the samples and turns them into rates without I/O or clocks of its own (tested on its
own); `ThroughputSampler` gathers the samples in the broker's event loop and stops when nobody has asked for a
while, so an unwatched console costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from confluent_kafka import KafkaException

from moldau.console.clients import ConsoleClients
from moldau.console.groups import TIMEOUT_S, committed_offsets, end_offsets
from moldau.metrics.counters import BrokerCounters

__all__ = ["METRICS", "Key", "Sample", "Samplers", "ThroughputHistory", "ThroughputSampler"]

METRICS = ("messages_in", "messages_out", "bytes_in", "bytes_out")
INTERVAL_S = 2.0
HISTORY_S = 600.0  # ten minutes of 2 s samples
IDLE_STOP_S = 120.0  # stop sampling this long after the last chart asked
SOURCES = {
    "messages_in": "log end offsets (ListOffsets): the whole cluster",
    "messages_out": "consumer groups' committed offsets (OffsetFetch): the whole cluster",
    "bytes_in": "this node's counters: partitions it leads",
    "bytes_out": "this node's counters: fetches it served to consumers",
}
# What a key that was not in the previous sample counts from: a new topic's end offset and counters grew from 0,
# but a group seen for the first time may have committed long ago.
COUNTS_FROM_ZERO = frozenset({"messages_in", "bytes_in", "bytes_out"})

Key = tuple[str, str]  # (topic, source within it: "" or, for messages out, the group)


@dataclass(frozen=True)
class Sample:
    at: float  # seconds since the epoch
    totals: dict[str, dict[Key, int]]  # metric -> key -> running count


def internal(topic: str) -> bool:
    """Kafka's internal topics (__consumer_offsets, __transaction_state ...) are left out of the cluster total."""
    return topic.startswith("__")


class ThroughputHistory:
    """The last samples and the per-second rates between them, for one topic or all (non-internal) topics."""

    def __init__(self, capacity: int) -> None:
        self.samples: deque[Sample] = deque(maxlen=capacity + 1)  # n samples make n-1 rates

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    def series(self, topic: str | None) -> dict[str, Any]:
        """{"t": interval end times, <metric>: per-second rates, "totals": the latest running counts}."""
        wanted = _selector(topic)
        samples = list(self.samples)
        result: dict[str, Any] = {"t": [s.at for s in samples[1:]]}
        for metric in METRICS:
            result[metric] = [round(self._delta(metric, before, after, wanted) / max(after.at - before.at, 1e-9), 3)
                              for before, after in pairwise(samples)]
        latest = samples[-1].totals if samples else {}
        result["totals"] = {metric: sum(v for k, v in latest.get(metric, {}).items() if wanted(k[0]))
                            for metric in METRICS}
        return result

    def recent_rates(self, metric: str, window_s: float) -> dict[str, float]:
        """topic -> per-second rate of `metric` over the newest samples spanning up to `window_s` (at least the
        last interval); empty until there are two samples."""
        if len(self.samples) < 2:
            return {}
        last = self.samples[-1]
        first = next(s for s in self.samples if last.at - s.at <= window_s)
        if first is last:
            first = self.samples[-2]
        span = max(last.at - first.at, 1e-9)
        return {topic: moved / span for topic, moved in self._deltas(metric, first, last).items()}

    @classmethod
    def _delta(cls, metric: str, before: Sample, after: Sample, wanted: Callable[[str], bool]) -> int:
        return sum(moved for topic, moved in cls._deltas(metric, before, after).items() if wanted(topic))

    @staticmethod
    def _deltas(metric: str, before: Sample, after: Sample) -> dict[str, int]:
        """topic -> how much `metric` grew between the two samples."""
        previous = before.totals.get(metric, {})
        from_zero = metric in COUNTS_FROM_ZERO
        moved: dict[str, int] = {}
        for key, value in after.totals.get(metric, {}).items():
            if key in previous:
                moved[key[0]] = moved.get(key[0], 0) + max(0, value - previous[key])  # going down is not traffic
            elif from_zero:
                moved[key[0]] = moved.get(key[0], 0) + value
            else:
                moved.setdefault(key[0], 0)
        return moved

    def busiest(self, limit: int) -> list[str]:
        """Non-internal topics with messages in or out over the window, the busiest first."""
        if len(self.samples) < 2:
            return []
        first, last = self.samples[0], self.samples[-1]
        moved: dict[str, int] = {}
        for metric in ("messages_in", "messages_out"):
            topics = {key[0] for key in last.totals.get(metric, {}) if not internal(key[0])}
            for topic in topics:
                moved[topic] = moved.get(topic, 0) + self._delta(metric, first, last, topic.__eq__)
        ranked = sorted((t for t, n in moved.items() if n > 0), key=lambda t: (-moved[t], t))
        return ranked[:limit]


def _selector(topic: str | None) -> Callable[[str], bool]:
    if topic is None:
        return lambda name: not internal(name)
    return topic.__eq__


class ThroughputSampler:
    """Samples one user's view of the cluster every `interval_s` while charts keep asking (see `watch`)."""

    def __init__(self, clients: ConsoleClients, counters: BrokerCounters | None, interval_s: float = INTERVAL_S,
                 history_s: float = HISTORY_S, idle_s: float = IDLE_STOP_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.clients = clients
        self.counters = counters
        self.interval_s = interval_s
        self.idle_s = idle_s
        self.clock = clock
        self.history = ThroughputHistory(int(history_s / interval_s))
        self._task: asyncio.Task[None] | None = None
        self._last_watched = 0.0
        # Running values kept between samples, so a partition or group that fails to answer once keeps its last
        # value instead of dipping and then counting its whole history as new traffic.
        self._ends: dict[tuple[str, int], int] = {}
        self._committed: dict[str, dict[tuple[str, int], int]] = {}

    def watch(self) -> None:
        """A chart asked: keep sampling (start if stopped)."""
        self._last_watched = time.monotonic()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="console-throughput")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while time.monotonic() - self._last_watched < self.idle_s:
            started = time.monotonic()
            with contextlib.suppress(KafkaException, TimeoutError, OSError):
                self.history.add(await self.sample())
            await asyncio.sleep(max(0.0, self.interval_s - (time.monotonic() - started)))
        # Idle: start afresh next time, without an interval spanning the pause.
        self.history.samples.clear()

    async def sample(self) -> Sample:
        metadata = await self.clients.metadata()
        topics = {name: sorted(t.partitions) for name, t in metadata.topics.items() if t.error is None}
        at = self.clock()
        messages_in = await self._messages_in(topics)
        messages_out = await self._messages_out(set(topics))
        bytes_in: dict[Key, int] = {}
        bytes_out: dict[Key, int] = {}
        if self.counters is not None:
            for name, counters in list(self.counters.topics.items()):
                if name in topics:
                    bytes_in[(name, "")] = counters.bytes_in
                    bytes_out[(name, "")] = counters.bytes_out
        return Sample(at, {"messages_in": messages_in, "messages_out": messages_out, "bytes_in": bytes_in,
                           "bytes_out": bytes_out})

    async def _messages_in(self, topics: dict[str, list[int]]) -> dict[Key, int]:
        partitions = [(name, p) for name, ps in topics.items() for p in ps]
        found = await end_offsets(self.clients, partitions)
        self._ends = {tp: found.get(tp, self._ends.get(tp, 0)) for tp in partitions}
        totals: dict[Key, int] = {}
        for (name, _), end in self._ends.items():
            totals[(name, "")] = totals.get((name, ""), 0) + end
        return totals

    async def _messages_out(self, topics: set[str]) -> dict[Key, int]:
        groups = await self._consumer_groups()
        results = await asyncio.gather(*(committed_offsets(self.clients, g) for g in groups), return_exceptions=True)
        committed: dict[str, dict[tuple[str, int], int]] = {}
        for group, result in zip(groups, results, strict=True):
            if isinstance(result, BaseException):
                committed[group] = self._committed.get(group, {})
            else:
                committed[group] = {tp: offset for tp, offset in result.items() if offset is not None}
        self._committed = committed
        totals: dict[Key, int] = {}
        for group, offsets in committed.items():
            for (name, _), offset in offsets.items():
                if name in topics:
                    totals[(name, group)] = totals.get((name, group), 0) + offset
        return totals

    async def _consumer_groups(self) -> list[str]:
        listed = await ConsoleClients.call(self.clients.admin.list_consumer_groups(request_timeout=TIMEOUT_S))
        return sorted(g.group_id for g in listed.valid or [])


class Samplers:
    """One sampler per console user (so each sees only the topics their ACLs allow), shared by the throughput
    charts and the topic list's message rates."""

    def __init__(self, counters: BrokerCounters | None) -> None:
        self.counters = counters
        self._by_clients: dict[int, tuple[ConsoleClients, ThroughputSampler]] = {}

    def watched(self, clients: ConsoleClients) -> ThroughputSampler:
        """The user's sampler, kept sampling (started if stopped) since someone watches."""
        entry = self._by_clients.get(id(clients))
        if entry is None or entry[0] is not clients:
            entry = self._by_clients[id(clients)] = (clients, ThroughputSampler(clients, self.counters))
        sampler = entry[1]
        sampler.watch()
        return sampler

    async def stop_all(self) -> None:
        for _, sampler in list(self._by_clients.values()):
            await sampler.stop()
        self._by_clients.clear()
