"""The sparse offset index of one segment (`<base offset>.index`), in Apache Kafka's file format.

File format: 8-byte big-endian entries of (offset - segment base offset: u32, file position: u32).
Storage, loading and flushing are `SparseIndex`'s (appended, not preallocated; capped by
`segment_index_bytes`).

Entry semantics: each entry names the *first* offset of a batch and that batch's byte position. Both
columns strictly increase. `lookup(offset)` returns the greatest entry whose offset is <= the target, so
a reader scans forward from there to the batch that contains the target; with no such entry it returns
(base_offset, 0).
"""

from __future__ import annotations

import operator
import sys
from array import array
from bisect import bisect_right

from moldau.storage.sparse_index import CorruptIndexError, SparseIndex

__all__ = ["CorruptIndexError", "OffsetIndex"]

ENTRY_BYTES = 8


class OffsetIndex(SparseIndex):
    """Offset -> file position entries for one segment."""

    ENTRY_BYTES = ENTRY_BYTES
    FIRST_TYPECODE = "I"  # offset relative to the base offset
    SECOND_TYPECODE = "I"  # file position

    def load(self, log_size_bytes: int) -> None:
        """Read the file and sanity-check it against the log size; raises CorruptIndexError."""
        relative, positions = self._read_file()
        if not _strictly_increasing(relative) or not _strictly_increasing(positions):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")
        if positions and positions[-1] >= log_size_bytes:
            raise CorruptIndexError(f"{self.path}: entry beyond the end of the log")
        self._install(relative, positions)

    def _parse(self, data: bytes) -> tuple[array[int], array[int]]:
        # Both columns are u32: read them in one go and split, rather than unpacking entry by entry.
        both = array("I")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        return both[0::2], both[1::2]

    def _pack(self, start: int) -> bytes:
        relative = self._column()
        pending = array("I")
        for i in range(start, len(relative)):
            pending.append(relative[i])
            pending.append(self._second[i])
        if sys.byteorder == "little":
            pending.byteswap()
        return pending.tobytes()

    # -- queries -------------------------------------------------------------------------------------

    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        rel = self._column()
        return self.base_offset + rel[-1] if rel else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= `offset`, else (base_offset, 0)."""
        rel = self._column()
        target = offset - self.base_offset
        if target < 0 or not rel:
            return self.base_offset, 0
        i = bisect_right(rel, target) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + rel[i], self._second[i]

    def lookup_position(self, position: int) -> int:
        """The greatest indexed batch position <= `position` (0 when none): a batch boundary."""
        self._column()
        i = bisect_right(self._second, position) - 1
        return self._second[i] if i >= 0 else 0

    # -- updates -------------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add an entry; callers append in increasing offset and position order."""
        self._append_entry(offset - self.base_offset, position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= `offset`, in memory and on disk."""
        rel = self._column()
        self._truncate_entries(bisect_right(rel, offset - self.base_offset - 1) if offset > self.base_offset else 0)


def _strictly_increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))
