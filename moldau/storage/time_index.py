"""The sparse time index of one segment (`<base offset>.timeindex`), in Apache Kafka's file format.

File format: 12-byte big-endian entries of (timestamp: i64, offset - segment base offset: u32), appended
(not preallocated); `segment_index_bytes` caps the entry count.

Entry semantics, chosen so that a search never skips a match: an entry (T, B) states that every batch of
the segment *before* offset B has a max timestamp <= T, and T is the largest such timestamp. Entries are
added together with offset-index entries, only when T grew, so timestamps strictly increase. When a
segment stops being active it is *sealed* with a final entry (segment max timestamp, segment next
offset), which makes the last entry's timestamp the segment's largest timestamp.

`lookup(ts)` returns the B of the greatest entry with T < ts: no record before B can have a timestamp
>= ts, so a search may start at B (or at the base offset when there is no such entry).

Loading, pending entries and flushing work as for `OffsetIndex`.
"""

from __future__ import annotations

import operator
import struct
from array import array
from bisect import bisect_left

from moldau.storage.offset_index import CorruptIndexError, truncate_file, unlink_quietly, write_tail

__all__ = ["TimeIndex"]

ENTRY_BYTES = 12
_ENTRY = struct.Struct(">qI")


class TimeIndex:
    """Timestamp -> offset entries for one segment. Not thread-safe: one owner."""

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_BYTES)
        self._timestamps: array[int] | None = None
        self._relative: array[int] = array("I")
        self._persisted = 0

    @property
    def loaded(self) -> bool:
        return self._timestamps is not None

    def load(self) -> None:
        """Read the file and sanity-check it; raises CorruptIndexError."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % ENTRY_BYTES:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {ENTRY_BYTES}")
        timestamps, relative = array("q"), array("I")
        for ts, rel in _ENTRY.iter_unpack(data):
            timestamps.append(ts)
            relative.append(rel)
        increasing = all(map(operator.lt, timestamps, timestamps[1:]))
        if not increasing or not all(map(operator.le, relative, relative[1:])):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")
        self._timestamps, self._relative = timestamps, relative
        self._persisted = len(timestamps)

    def reset(self) -> None:
        self._timestamps, self._relative, self._persisted = array("q"), array("I"), 0
        truncate_file(self.path, 0)

    def _ts(self) -> array[int]:
        if self._timestamps is None:
            raise RuntimeError(f"{self.path} used before load()")
        return self._timestamps

    @property
    def entries(self) -> int:
        return len(self._ts())

    @property
    def is_full(self) -> bool:
        return len(self._ts()) >= self.max_entries

    def last_timestamp(self) -> int:
        """Timestamp of the last entry, -1 when empty."""
        ts = self._ts()
        return ts[-1] if ts else -1

    def lookup(self, timestamp_ms: int) -> int:
        """The offset from which a search for the first record with timestamp >= `timestamp_ms` starts."""
        ts = self._ts()
        i = bisect_left(ts, timestamp_ms) - 1
        return self.base_offset + self._relative[i] if i >= 0 else self.base_offset

    def first_offset_reaching(self, timestamp_ms: int) -> int | None:
        """B of the first entry whose T >= `timestamp_ms`: a batch before B holds that timestamp."""
        ts = self._ts()
        i = bisect_left(ts, timestamp_ms)
        return self.base_offset + self._relative[i] if i < len(ts) else None

    def maybe_append(self, max_timestamp_before: int, offset: int) -> None:
        """Record that batches before `offset` have timestamps <= `max_timestamp_before`, if that is news."""
        ts = self._ts()
        if max_timestamp_before > (ts[-1] if ts else -1):
            ts.append(max_timestamp_before)
            self._relative.append(offset - self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop entries about batches at or after `offset` (those with B > offset)."""
        ts = self._ts()
        keep = len(ts)
        limit = offset - self.base_offset
        while keep and self._relative[keep - 1] > limit:
            keep -= 1
        if keep == len(ts):
            return
        del ts[keep:]
        del self._relative[keep:]
        if self._persisted > keep:
            self._persisted = keep
            truncate_file(self.path, keep * ENTRY_BYTES)

    def write_pending(self) -> None:
        self._write(fsync=False)

    def flush(self) -> None:
        self._write(fsync=True)

    def _write(self, fsync: bool) -> None:
        ts = self._ts()
        if self._persisted == len(ts) and not fsync:
            return
        data = b"".join(
            _ENTRY.pack(ts[i], self._relative[i]) for i in range(self._persisted, len(ts))
        )
        write_tail(self.path, self._persisted * ENTRY_BYTES, data, fsync)
        self._persisted = len(ts)

    def delete(self) -> None:
        unlink_quietly(self.path)
