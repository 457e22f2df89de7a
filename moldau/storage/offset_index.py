"""The sparse offset index of one segment (`<base offset>.index`), in Apache Kafka's file format.

File format: 8-byte big-endian entries of (offset - segment base offset: u32, file position: u32).
Moldau appends entries to the file instead of preallocating it to `segment_index_bytes` (so there is
nothing to trim on close); `segment_index_bytes` still caps the number of entries, and a full index makes
the log roll, as in Kafka.

Entry semantics: each entry names the *first* offset of a batch and that batch's byte position. Both
columns strictly increase. `lookup(offset)` returns the greatest entry whose offset is <= the target, so
a reader scans forward from there to the batch that contains the target; with no such entry it returns
(base_offset, 0).

Entries live in memory (compact `array`s, loaded lazily from the file on first use) and reach the file in
`write_pending()`/`flush()`: an index is only trusted after a clean shutdown or for data below the
recovery point, and both are preceded by a flush. Anything else is rebuilt from the log on recovery.
"""

from __future__ import annotations

import contextlib
import operator
import os
import sys
from array import array
from bisect import bisect_right

__all__ = ["CorruptIndexError", "OffsetIndex", "truncate_file", "unlink_quietly", "write_tail"]

ENTRY_BYTES = 8


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the owner rebuilds it from the log."""


class OffsetIndex:
    """Offset -> file position entries for one segment. Not thread-safe: one owner."""

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // ENTRY_BYTES)
        self._relative: array[int] | None = None
        self._positions: array[int] = array("I")
        self._persisted = 0

    # -- loading -------------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._relative is not None

    def load(self, log_size_bytes: int) -> None:
        """Read the file and sanity-check it against the log size; raises CorruptIndexError."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % ENTRY_BYTES:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {ENTRY_BYTES}")
        both = array("I")
        both.frombytes(data)
        if sys.byteorder == "little":
            both.byteswap()
        relative, positions = both[0::2], both[1::2]
        if not _strictly_increasing(relative) or not _strictly_increasing(positions):
            raise CorruptIndexError(f"{self.path}: entries are not increasing")
        if positions and positions[-1] >= log_size_bytes:
            raise CorruptIndexError(f"{self.path}: entry beyond the end of the log")
        self._relative, self._positions = relative, positions
        self._persisted = len(relative)

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (before a rebuild)."""
        self._relative, self._positions, self._persisted = array("I"), array("I"), 0
        truncate_file(self.path, 0)

    def _rel(self) -> array[int]:
        if self._relative is None:
            raise RuntimeError(f"{self.path} used before load()")
        return self._relative

    # -- queries -------------------------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._rel())

    @property
    def is_full(self) -> bool:
        return len(self._rel()) >= self.max_entries

    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        rel = self._rel()
        return self.base_offset + rel[-1] if rel else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the greatest entry with offset <= `offset`, else (base_offset, 0)."""
        rel = self._rel()
        target = offset - self.base_offset
        if target < 0 or not rel:
            return self.base_offset, 0
        i = bisect_right(rel, target) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + rel[i], self._positions[i]

    def lookup_position(self, position: int) -> int:
        """The greatest indexed batch position <= `position` (0 when none): a batch boundary."""
        self._rel()
        i = bisect_right(self._positions, position) - 1
        return self._positions[i] if i >= 0 else 0

    # -- updates -------------------------------------------------------------------------------------

    def append(self, offset: int, position: int) -> None:
        """Add an entry; callers append in increasing offset and position order."""
        self._rel().append(offset - self.base_offset)
        self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= `offset`, in memory and on disk."""
        rel = self._rel()
        keep = bisect_right(rel, offset - self.base_offset - 1) if offset > self.base_offset else 0
        if keep == len(rel):
            return
        del rel[keep:]
        del self._positions[keep:]
        if self._persisted > keep:
            self._persisted = keep
            truncate_file(self.path, keep * ENTRY_BYTES)

    def write_pending(self) -> None:
        """Append entries not yet in the file (no fsync)."""
        self._write(fsync=False)

    def flush(self) -> None:
        """Append pending entries and fsync the file."""
        self._write(fsync=True)

    def _write(self, fsync: bool) -> None:
        rel = self._rel()
        if self._persisted == len(rel) and not fsync:
            return
        pending = array("I")
        for i in range(self._persisted, len(rel)):
            pending.append(rel[i])
            pending.append(self._positions[i])
        if sys.byteorder == "little":
            pending.byteswap()
        write_tail(self.path, self._persisted * ENTRY_BYTES, pending.tobytes(), fsync)
        self._persisted = len(rel)

    def delete(self) -> None:
        unlink_quietly(self.path)


def _strictly_increasing(values: array[int]) -> bool:
    return all(map(operator.lt, values, values[1:]))


def write_tail(path: str, position: int, data: bytes, fsync: bool) -> None:
    """Write `data` at `position` of `path` (created if missing) and cut anything after it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if data:
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, position)
                view, position = view[written:], position + written
        os.ftruncate(fd, position)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)


def truncate_file(path: str, size: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.truncate(path, size)


def unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
