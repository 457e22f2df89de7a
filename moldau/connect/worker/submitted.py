"""Source records sent but not yet safe to commit: an offset is committable only once its record and every
record polled before it from the same source partition have been acknowledged by the brokers (Kafka's
SubmittedRecords). Pure: the runner feeds it submissions and acknowledgements."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Submitted", "SubmittedRecords", "partition_key"]


_KEY_CACHE: dict[tuple[tuple[str, type, Any], ...], str] = {}
_KEY_CACHE_MAX = 10_000


def partition_key(partition: Mapping[str, Any]) -> str:
    """A canonical text form of a source partition, usable as a dict key."""
    # Computed for every record a source task returns, mostly for a few partitions: cache by the partition's
    # items when they are hashable (flat partitions of strings and numbers, the usual case); with their types,
    # because 1 == True in Python but not in JSON.
    try:
        items = tuple((key, type(value), value) for key, value in sorted(partition.items()))
        cached = _KEY_CACHE.get(items)
    except TypeError:
        return json.dumps(partition, sort_keys=True, separators=(",", ":"))
    if cached is None:
        if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
            _KEY_CACHE.clear()
        cached = _KEY_CACHE[items] = json.dumps(partition, sort_keys=True, separators=(",", ":"))
    return cached


@dataclass(slots=True)
class Submitted:
    partition: Mapping[str, Any]
    offset: Mapping[str, Any]
    acked: bool = False


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Equal with values of the same types (1 == True in Python, but not in their JSON keys)."""
    return a == b and all(type(value) is type(b[key]) for key, value in a.items())


@dataclass
class SubmittedRecords:
    _pending: dict[str, deque[Submitted]] = field(default_factory=dict)
    # Tasks usually poll many records of one partition in a row: its key is kept rather than re-encoded.
    _last: tuple[dict[str, Any], str] | None = None

    def submit(self, partition: Mapping[str, Any], offset: Mapping[str, Any]) -> Submitted:
        if self._last is not None and _same(partition, self._last[0]):
            copy, key = self._last
        else:
            copy, key = dict(partition), partition_key(partition)
            self._last = (copy, key)
        submitted = Submitted(copy, dict(offset))
        self._pending.setdefault(key, deque()).append(submitted)
        return submitted

    @staticmethod
    def ack(submitted: Submitted) -> None:
        submitted.acked = True

    def committable(self) -> dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]]:
        """Drop the acknowledged prefix of each partition's queue; for each partition with such a prefix, the
        offset of its last record (partition key -> (partition, offset))."""
        ready = {}
        for key, queue in list(self._pending.items()):
            last = None
            while queue and queue[0].acked:
                last = queue.popleft()
            if last is not None:
                ready[key] = (last.partition, last.offset)
            if not queue:
                del self._pending[key]
        return ready

    def pending(self) -> int:
        return sum(len(queue) for queue in self._pending.values())
