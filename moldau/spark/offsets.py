"""Offsets of topic-partitions, their JSON form in Spark's checkpoint, and how offset ranges become tasks.

Pure functions: the broker is asked elsewhere (`moldau.spark.cluster`); here offsets are only numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

# The special offsets of Spark's Kafka options: -2 is "earliest available", -1 is "latest".
EARLIEST = -2
LATEST = -1


class TopicPartition(NamedTuple):
    """One partition of one topic."""

    topic: str
    partition: int


Offsets = dict[TopicPartition, int]
JsonOffsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one topic-partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """`{"topic": {"0": 12}}`, the form Spark's Kafka source writes; sorted so equal offsets compare equal."""
    out: JsonOffsets = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    """The inverse of `to_json`."""
    return {TopicPartition(topic, int(part)): int(off) for topic, parts in data.items() for part, off in parts.items()}


def plan_ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
                min_partitions: int | None = None) -> list[OffsetRange]:
    """The non-empty ranges from `start` to `end`, one per topic-partition, split further when fewer than
    `min_partitions` would result.

    Every partition in `end` must have a start; a partition only in `start` is not read.
    """
    ranges = [OffsetRange(tp.topic, tp.partition, start[tp], end[tp])
              for tp in sorted(end) if end[tp] > start[tp]]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    return split_ranges(ranges, min_partitions)


def split_ranges(ranges: list[OffsetRange], target: int) -> list[OffsetRange]:
    """Split ranges so that about `target` pieces result, each range in pieces in proportion to its size.

    Pieces of one range are contiguous and cover it exactly; no piece is empty.
    """
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = max(1, min(r.size, round(target * r.size / total))) if total else 1
        bounds = [r.start + (r.size * i) // pieces for i in range(pieces + 1)]
        out.extend(OffsetRange(r.topic, r.partition, lo, hi) for lo, hi in pairwise(bounds) if hi > lo)
    return out


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               max_records: int) -> Offsets:
    """End offsets that admit at most `max_records` offsets in total after `start`, shared in proportion to
    each partition's backlog (as Spark's Kafka source does), and always progress when there is a backlog.

    Partitions missing from `start` start at 0.
    """
    backlog = {tp: max(0, latest[tp] - start.get(tp, 0)) for tp in latest}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: max_records * n / total for tp, n in backlog.items()}
    granted = {tp: int(share) for tp, share in shares.items()}
    # Hand out what flooring left over, largest remainders first, so the total is exactly max_records.
    left = max_records - sum(granted.values())
    for tp in sorted(shares, key=lambda t: (granted[t] - shares[t], t))[:left]:
        granted[tp] += 1
    return {tp: start.get(tp, 0) + granted[tp] for tp in latest}


def cap(offsets: Mapping[TopicPartition, int], limit: Mapping[TopicPartition, int]) -> Offsets:
    """`offsets` lowered to `limit` where both name a partition; partitions not in `limit` are dropped."""
    return {tp: min(off, limit[tp]) for tp, off in offsets.items() if tp in limit}


def describe(tps: Iterable[TopicPartition]) -> str:
    """`topic-0, topic-1` for messages."""
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))
