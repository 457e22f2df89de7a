"""Counters the request path bumps, read when `/metrics` is scraped.

One node runs one event loop, so plain integers need no lock; a topic's counters are one small object found by
one dict lookup per produced or fetched partition, and a request's latency lands in a fixed bucket array by
bisection. Nothing here allocates per record.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

__all__ = ["LATENCY_BUCKETS_MS", "BrokerCounters", "LatencyHistogram", "TopicCounters"]

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

    def observe(self, elapsed_ms: float) -> None:
        self.counts[bisect_left(LATENCY_BUCKETS_MS, elapsed_ms)] += 1
        self.sum_ms += elapsed_ms

    @property
    def count(self) -> int:
        return sum(self.counts)


class BrokerCounters:
    def __init__(self) -> None:
        self.topics: dict[str, TopicCounters] = {}
        self.requests: dict[tuple[str, int], int] = {}  # (API name, version) -> requests served
        self.latency: dict[str, LatencyHistogram] = {}  # API name -> time from decoded to answered

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
        key = (api, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        histogram = self.latency.get(api)
        if histogram is None:
            histogram = self.latency[api] = LatencyHistogram()
        histogram.observe(elapsed_ms)

    def forget_topics(self, live: set[str]) -> None:
        """Drop the counters of deleted topics (a re-created topic starts again from 0, as in Kafka)."""
        for name in [n for n in self.topics if n not in live]:
            del self.topics[name]
