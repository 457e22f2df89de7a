"""Reading the records a browse query names, with a Consumer that assigns partitions and seeks (no group, no
commits), then showing them (`decoding`).

Reading is bounded three ways: at most `count` records per partition for a view (the views of all partitions read
`count` from each, merge them by timestamp and keep `count`), at most SEARCH_SCAN_MAX records per search (spread
over the partitions, and the page says when the bound cut the search short), and a deadline. The caller runs
`browse` in a worker thread: librdkafka's calls block.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from moldau.console.errors import ConsoleError
from moldau.console.records.decoding import SchemaDecoder, Shown, ShownHeader, show_bytes, show_header
from moldau.console.records.query import SEARCH_SCAN_MAX, BrowseQuery

__all__ = ["BrowseResult", "PartitionRange", "ShownRecord", "browse", "consumer_config"]

READ_DEADLINE_S = 10.0
CALL_TIMEOUT_S = 10.0
_TAKE_LAST = ("end", "before")  # views of the newest records before a point


@dataclass(frozen=True)
class ShownRecord:
    partition: int
    offset: int
    timestamp_ms: int | None
    timestamp_type: str  # CreateTime, LogAppendTime or "" (none)
    key: Shown
    value: Shown
    headers: list[ShownHeader]

    @property
    def timestamp_text(self) -> str:
        if self.timestamp_ms is None:
            return ""
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"

    def matches(self, query: BrowseQuery) -> bool:
        if not query.q:
            return True
        if query.search == "key":  # a key decoded with a schema shows as JSON: a string key in quotes
            return self.key.kind != "null" and self.key.text in (query.q, json.dumps(query.q, ensure_ascii=False))
        needle = query.q.casefold()
        texts = [self.key.text, self.value.text, *(f"{h.key}={h.value}" for h in self.headers)]
        return any(needle in text.casefold() for text in texts)


@dataclass
class PartitionRange:
    """One partition's watermarks and the offsets read from it: [start, stop) asked, [start, read_to) read."""

    partition: int
    low: int
    high: int
    start: int
    stop: int
    read_to: int = 0
    read: int = 0
    matched: int = 0
    scan_budget: int = SEARCH_SCAN_MAX
    done: bool = False


@dataclass
class BrowseResult:
    records: list[ShownRecord]
    ranges: list[PartitionRange]
    scanned: int
    scan_bound_hit: bool = False  # a search stopped at SEARCH_SCAN_MAX records before the end of its range
    timed_out: bool = False
    newer: dict[int, int] = field(default_factory=dict)  # positions for the Newer link (from=after)
    older: dict[int, int] = field(default_factory=dict)  # positions for the Older link (from=before)

    @property
    def has_newer(self) -> bool:
        return any(self.newer.get(r.partition, r.high) < r.high for r in self.ranges)

    @property
    def has_older(self) -> bool:
        return any(self.older.get(r.partition, r.low) > r.low for r in self.ranges)


def consumer_config(base: dict[str, Any]) -> dict[str, Any]:
    """A reading-only consumer: assigned partitions, no group membership or commits, every record (not only
    committed transactions), end of partition reported so reading stops there."""
    return {**base, "group.id": "moldau-console-browser", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "enable.partition.eof": True, "isolation.level": "read_uncommitted",
            "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100}


def browse(config: dict[str, Any], topic: str, partitions: list[int], query: BrowseQuery,
           decoder: SchemaDecoder, clock: Callable[[], float] = time.monotonic) -> BrowseResult:
    """The records `query` names in `topic` (whose partitions are `partitions`), shown. Blocks."""
    chosen = _chosen_partitions(partitions, query)
    with _consumer(consumer_config(config)) as consumer:
        ranges = _plan(consumer, topic, chosen, query)
        candidates, scanned, timed_out = _read(consumer, topic, ranges, query, decoder, clock)
    return _select(candidates, ranges, query, scanned, timed_out)


@contextmanager
def _consumer(config: dict[str, Any]) -> Iterator[Consumer]:
    consumer = Consumer(config)
    try:
        yield consumer
    finally:
        consumer.close()


def _chosen_partitions(partitions: list[int], query: BrowseQuery) -> list[int]:
    if query.partition is None:
        return sorted(partitions)
    if query.partition not in partitions:
        raise ConsoleError(404, f"the topic has no partition {query.partition} (it has {len(partitions)})")
    return [query.partition]


def _plan(consumer: Consumer, topic: str, partitions: list[int], query: BrowseQuery) -> list[PartitionRange]:
    """Where each partition is read from and up to, by the query's start."""
    marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=CALL_TIMEOUT_S, cached=False)
             for p in partitions}
    budget = _scan_budget(len(partitions)) if query.q else query.count
    starts: dict[int, int] = {}
    if query.start == "timestamp":
        found = consumer.offsets_for_times([TopicPartition(topic, p, query.timestamp_ms or 0) for p in partitions],
                                           timeout=CALL_TIMEOUT_S)
        starts = {tp.partition: tp.offset if tp.offset >= 0 else marks[tp.partition][1] for tp in found}
    ranges = []
    for p in partitions:
        low, high = marks[p]
        start, stop = _bounds(query, p, low, high, budget, starts)
        ranges.append(PartitionRange(p, low, high, start, stop, read_to=start))
    return ranges


def _bounds(query: BrowseQuery, partition: int, low: int, high: int, budget: int,
            starts: dict[int, int]) -> tuple[int, int]:
    def clamp(offset: int) -> int:
        return min(max(offset, low), high)

    match query.start:
        case "beginning":
            return low, high
        case "end":
            return max(low, high - budget), high
        case "offset":
            return clamp(query.offset or 0), high
        case "timestamp":
            return clamp(starts[partition]), high
        case "after":
            return clamp(query.positions.get(partition, high)), high
        case _:  # before
            stop = clamp(query.positions.get(partition, low))
            return max(low, stop - budget), stop


def _scan_budget(partitions: int) -> int:
    """Records a search reads from each partition: SEARCH_SCAN_MAX spread evenly (at least one each)."""
    return max(1, SEARCH_SCAN_MAX // partitions)


def _read(consumer: Consumer, topic: str, ranges: list[PartitionRange], query: BrowseQuery,
          decoder: SchemaDecoder, clock: Callable[[], float]) -> tuple[list[ShownRecord], int, bool]:
    """Read every partition's range (at most `count` matches, or SEARCH_SCAN_MAX // partitions records scanned, per
    partition): the matching records, how many were read, and whether the deadline cut reading short."""
    by_partition = {r.partition: r for r in ranges}
    wanted = [r for r in ranges if r.start < r.stop]
    for r in ranges:
        r.done = r.start >= r.stop
        r.scan_budget = _scan_budget(len(ranges))
    if not wanted:
        return [], 0, False
    consumer.assign([TopicPartition(topic, r.partition, r.start) for r in wanted])
    candidates: list[ShownRecord] = []
    deadline = clock() + READ_DEADLINE_S
    while not all(r.done for r in ranges):
        if clock() > deadline:
            return candidates, sum(r.read for r in ranges), True
        for message in consumer.consume(num_messages=500, timeout=0.2):
            error = message.error()
            if message.topic() is None and error is not None:
                # Not about the records (e.g. the throwaway group's coordinator, which this consumer never uses).
                if error.fatal():
                    raise KafkaException(error)
                continue
            part = by_partition.get(message.partition() or 0)
            if part is not None and not part.done:
                _take(message, part, query, decoder, candidates)
    return candidates, sum(r.read for r in ranges), False


def _take(message: Message, part: PartitionRange, query: BrowseQuery, decoder: SchemaDecoder,
          candidates: list[ShownRecord]) -> None:
    """One consumed message (or end-of-partition event) of a partition still being read."""
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            part.done = True
            return
        raise KafkaException(error)
    offset = message.offset() or 0
    if offset >= part.stop:
        part.done = True
        return
    part.read += 1
    part.read_to = offset + 1
    record = _shown(message, decoder)
    if record.matches(query):
        candidates.append(record)
        part.matched += 1
    enough = part.matched >= query.count or (bool(query.q) and part.read >= part.scan_budget)
    if part.read_to >= part.stop or (query.start not in _TAKE_LAST and enough):
        part.done = True


def _shown(message: Message, decoder: SchemaDecoder) -> ShownRecord:
    kind, timestamp = message.timestamp()
    type_name = {TIMESTAMP_CREATE_TIME: "CreateTime", TIMESTAMP_LOG_APPEND_TIME: "LogAppendTime"}.get(kind, "")
    raw = message.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    headers = [show_header(k, v.encode() if isinstance(v, str) else v) for k, v in pairs]
    return ShownRecord(message.partition() or 0, message.offset() or 0, timestamp if type_name else None, type_name,
                       show_bytes(message.key(), decoder), show_bytes(message.value(), decoder), headers)


def _select(candidates: list[ShownRecord], ranges: list[PartitionRange], query: BrowseQuery, scanned: int,
            timed_out: bool) -> BrowseResult:
    """Merge the partitions' records by time, keep `count` (the first, or the newest for end/before views), and
    work out where the Older and Newer pages start."""
    candidates.sort(key=lambda r: (r.timestamp_ms or 0, r.partition, r.offset))
    take_last = query.start in _TAKE_LAST
    kept = candidates[-query.count:] if take_last else candidates[:query.count]
    cut = candidates[:-query.count] if take_last else candidates[query.count:]
    newer = {r.partition: r.read_to for r in ranges}
    older = {r.partition: r.start for r in ranges}
    for record in cut:
        if take_last:
            older[record.partition] = max(older[record.partition], record.offset + 1)
        else:
            newer[record.partition] = min(newer[record.partition], record.offset)
    bound_hit = bool(query.q) and any(r.read >= r.scan_budget and r.read_to < r.stop
                                      for r in ranges)
    if query.q and take_last:  # the window before the end was the bound: say so unless it found a full page
        bound_hit = any(r.start > r.low for r in ranges) and len(candidates) < query.count
    return BrowseResult(kept, ranges, scanned, bound_hit, timed_out, newer, older)
