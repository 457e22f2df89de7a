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

Storage, loading and flushing are `SparseIndex`'s.
"""

from __future__ import annotations

import operator
import struct
from array import array
from bisect import bisect_left

from moldau.storage.sparse_index import CorruptIndexError, SparseIndex

__all__ = ["TimeIndex"]

ENTRY_BYTES = 12
_ENTRY = struct.Struct(">qI")


class TimeIndex(SparseIndex):
    """Timestamp -> offset entries for one segment."""

    ENTRY_BYTES = ENTRY_BYTES
    FIRST_TYPECODE = "q"  # timestamp
    SECOND_TYPECODE = "I"  # offset relative to the base offset

    def load(self) -> None:
        """Read the file and sanity-check it; raises CorruptIndexError."""
        timestamps, relative = self._read_file()
        increasing = all(map(operator.lt, timestamps, timestamps[1:]))
        if not increasing or not all(map(operator.le, relative, relative[1:])):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")
        self._install(timestamps, relative)

    def _parse(self, data: bytes) -> tuple[array[int], array[int]]:
        timestamps, relative = array("q"), array("I")
        for ts, rel in _ENTRY.iter_unpack(data):
            timestamps.append(ts)
            relative.append(rel)
        return timestamps, relative

    def _pack(self, start: int) -> bytes:
        ts = self._column()
        return b"".join(_ENTRY.pack(ts[i], self._second[i]) for i in range(start, len(ts)))

    def last_timestamp(self) -> int:
        """Timestamp of the last entry, -1 when empty."""
        ts = self._column()
        return ts[-1] if ts else -1

    def lookup(self, timestamp_ms: int) -> int:
        """The offset from which a search for the first record with timestamp >= `timestamp_ms` starts."""
        ts = self._column()
        i = bisect_left(ts, timestamp_ms) - 1
        return self.base_offset + self._second[i] if i >= 0 else self.base_offset

    def first_offset_reaching(self, timestamp_ms: int) -> int | None:
        """B of the first entry whose T >= `timestamp_ms`: a batch before B holds that timestamp."""
        ts = self._column()
        i = bisect_left(ts, timestamp_ms)
        return self.base_offset + self._second[i] if i < len(ts) else None

    def maybe_append(self, max_timestamp_before: int, offset: int) -> None:
        """Record that batches before `offset` have timestamps <= `max_timestamp_before`, if that is news."""
        ts = self._column()
        if max_timestamp_before > (ts[-1] if ts else -1):
            self._append_entry(max_timestamp_before, offset - self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop entries about batches at or after `offset` (those with B > offset)."""
        keep = len(self._column())
        limit = offset - self.base_offset
        while keep and self._second[keep - 1] > limit:
            keep -= 1
        self._truncate_entries(keep)
