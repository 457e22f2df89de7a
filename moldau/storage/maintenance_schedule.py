"""When each partition log next needs the periodic roll-and-flush check, so that a pass visits only those logs.

A broker with thousands of idle partitions must not walk all of them every second. Each log says when it may
next have work (`PartitionLog.maintenance_due_ms`: the active segment's age limit, the flush interval, a recovery
point behind the active segment; or never, for an empty active segment with nothing unflushed). Logs are kept in
a heap by that time. A log that was written to since (it tells its owner through `PartitionLog.on_write`) or
visited is *touched*, and its time is computed again at the next pass, which costs O(touched + due), not
O(logs).

Entries whose time changed stay in the heap until popped and are skipped then (`_due` holds the current one).
Not thread-safe: the log manager drives it from the event loop.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from moldau.storage.log import PartitionLog

__all__ = ["MaintenanceSchedule"]


class MaintenanceSchedule:
    """Partition logs by the time they next need maintenance; see the module docstring."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, PartitionLog]] = []
        self._due: dict[PartitionLog, int] = {}
        self._touched: set[PartitionLog] = set()
        self._order = itertools.count()  # ties in time are broken by insertion, never by comparing logs

    def touch(self, partition_log: PartitionLog) -> None:
        """`partition_log` changed: its time is computed again at the next `take_due`."""
        self._touched.add(partition_log)

    def touch_all(self, logs: Iterable[PartitionLog]) -> None:
        self._touched.update(logs)

    def forget(self, partition_log: PartitionLog) -> None:
        """`partition_log` is gone (deleted, closed); a heap entry left for it is skipped when popped."""
        self._touched.discard(partition_log)
        self._due.pop(partition_log, None)

    def take_due(self, now_ms: int) -> list[PartitionLog]:
        """The logs whose time has come, removed from the schedule: touch each after visiting it."""
        touched, self._touched = self._touched, set()
        for partition_log in touched:
            self._schedule(partition_log, partition_log.maintenance_due_ms())
        due = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            when, _, partition_log = heapq.heappop(heap)
            if self._due.get(partition_log) == when:
                del self._due[partition_log]
                due.append(partition_log)
        return due

    def scheduled(self, partition_log: PartitionLog) -> int | None:
        """When `partition_log` is due, as last computed (None: not scheduled)."""
        return self._due.get(partition_log)

    def __len__(self) -> int:
        return len(self._due)

    def _schedule(self, partition_log: PartitionLog, when: int | None) -> None:
        if when is None:
            self._due.pop(partition_log, None)
            return
        if self._due.get(partition_log) == when:
            return
        self._due[partition_log] = when
        heapq.heappush(self._heap, (when, next(self._order), partition_log))
