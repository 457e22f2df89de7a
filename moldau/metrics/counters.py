"""Counters the request path bumps, read when `/metrics` is scraped.

One node runs one event loop, so plain integers need no lock; a topic's counters are one small object found by
one dict lookup per produced or fetched partition, and a request's latency lands in a fixed bucket array by
bisection. Nothing here allocates per record.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["LATENCY_BUCKETS_MS", "WINDOW_MS", "BrokerCounters", "LatencyHistogram", "TopicCounters", "WindowedStat"]

# Upper bounds (ms) of the request latency histogram's buckets; the last bucket is +Inf.
LATENCY_BUCKETS_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
                      30000.0)


@dataclass(slots=True)
class TopicCounters:
    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0  # to consumers; replicas' fetches count in replication_bytes_out
    replication_bytes_out: int = 0


@dataclass(slots=True)
class LatencyHistogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    sum_ms: float = 0.0
    # The counts when the current and the previous window began (taken at scrape time, not per request), so that
    # quantiles describe recent requests, as Kafka's percentiles do, rather than everything since start.
    window_start_ms: float = float("-inf")
    at_window_start: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    at_previous_start: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))

    def observe(self, elapsed_ms: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
        self.sum_ms += elapsed_ms

    @property
    def count(self) -> int:
        return sum(self.counts)

    def recent_quantiles(self, quantiles: tuple[float, ...], now_ms: float) -> list[float]:
        """Estimates (ms) of the quantiles of the requests of the current and previous window (windows roll when
        asked, at least WINDOW_MS apart), interpolated within the buckets; 0 without any such request (as Kafka
        reports an empty histogram)."""
        if now_ms - self.window_start_ms >= WINDOW_MS:
            # Rolled when asked: a window is at least WINDOW_MS long, longer when scrapes are further apart.
            self.at_previous_start = self.at_window_start
            self.at_window_start = list(self.counts)
            self.window_start_ms = now_ms
        recent = [now - then for now, then in zip(self.counts, self.at_previous_start, strict=True)]
        return [_quantile(recent, q) for q in quantiles]


def _quantile(counts: list[int], q: float) -> float:
    total = sum(counts)
    if total == 0:
        return 0.0
    rank, seen = q * total, 0
    for i, count in enumerate(counts):
        if count and seen + count >= rank:
            if i == len(LATENCY_BUCKETS_MS):
                return LATENCY_BUCKETS_MS[-1]  # beyond the last bound: the bound is all that is known
            lower = LATENCY_BUCKETS_MS[i - 1] if i else 0.0
            return lower + (LATENCY_BUCKETS_MS[i] - lower) * (rank - seen) / count
        seen += count
    return LATENCY_BUCKETS_MS[-1]


# A quota's throttle statistics of a client not heard from for this long are dropped (Kafka expires its quota
# sensors after an hour too), so clients that come and go do not grow the counters without bound.
QUOTA_SENSOR_EXPIRY_MS = 3_600_000.0
# Kafka's sampled statistics (an average, a maximum) cover two windows of 30 s; so do these.
WINDOW_MS = 30_000.0


class WindowedStat:
    """Average and maximum of the values recorded in the current and the previous window (Kafka's `-avg` and
    `-max` sensors, e.g. raft-metrics' commit-latency and a quota's throttle-time), plus running totals."""

    __slots__ = ("_current", "_previous", "_window_start_ms", "count", "last_ms", "sum")

    def __init__(self) -> None:
        self._window_start_ms = float("-inf")
        self._current = (0, 0.0, 0.0)  # (count, sum, max) of this window
        self._previous = (0, 0.0, 0.0)
        self.count = 0  # since start
        self.sum = 0.0
        self.last_ms = float("-inf")  # when the latest value was recorded

    def record(self, value: float, now_ms: float) -> None:
        self._roll(now_ms)
        count, total, peak = self._current
        self._current = (count + 1, total + value, max(peak, value))
        self.count += 1
        self.sum += value
        self.last_ms = now_ms

    def avg(self, now_ms: float) -> float:
        self._roll(now_ms)
        count = self._current[0] + self._previous[0]
        return (self._current[1] + self._previous[1]) / count if count else 0.0

    def max(self, now_ms: float) -> float:
        self._roll(now_ms)
        return max(self._current[2], self._previous[2])

    def _roll(self, now_ms: float) -> None:
        if now_ms - self._window_start_ms < WINDOW_MS:
            return
        stale = now_ms - self._window_start_ms >= 2 * WINDOW_MS
        self._previous = (0, 0.0, 0.0) if stale else self._current
        self._current = (0, 0.0, 0.0)
        self._window_start_ms = now_ms


class BrokerCounters:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.requests: dict[tuple[str, int], int] = {}  # (API name, version) -> requests served
        self.latency: dict[str, LatencyHistogram] = {}  # API name -> time from decoded to answered
        self.in_flight = 0  # requests decoded and not answered yet (Kafka's request queue, on one event loop)
        # (resource: Produce, Fetch or Request; user; client id) -> throttle time of its requests, when quotas apply
        self.throttle: dict[tuple[str, str, str], WindowedStat] = {}

    def topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        counters = self.topic(topic)
        counters.messages_in += messages
        counters.bytes_in += nbytes

    def fetched(self, topic: str, nbytes: int, replica: bool) -> None:
        counters = self.topic(topic)
        if replica:
            counters.replication_bytes_out += nbytes
        else:
            counters.bytes_out += nbytes

    def request_served(self, api: str, version: int, elapsed_ms: float) -> None:
        self.in_flight -= 1
        key = (api, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.latency.get(api)
        if histogram is None:
            histogram = self.latency[api] = LatencyHistogram()
        histogram.observe(elapsed_ms)

    def request_started(self) -> None:
        self.in_flight += 1

    def quota_checked(self, resource: str, user: str, client_id: str, throttle_ms: float, now_ms: float) -> None:
        """A request of a client under a quota was answered, throttled for `throttle_ms` (0: within its quota)."""
        key = (resource, user, client_id)
        stat = self.throttle.get(key)
        if stat is None:
            stat = self.throttle[key] = WindowedStat()
        stat.record(throttle_ms, now_ms)

    def forget_idle_clients(self, now_ms: float) -> None:
        for key in [k for k, stat in self.throttle.items() if now_ms - stat.last_ms > QUOTA_SENSOR_EXPIRY_MS]:
            del self.throttle[key]

    def forget_topics(self, live: set[str]) -> None:
        """Drop the counters of deleted topics (a re-created topic starts again from 0, as in Kafka)."""
        for name in [n for n in self.topics if n not in live]:
            del self.topics[name]
