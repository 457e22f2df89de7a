"""What the offset and time indexes share: two parallel columns of fixed-size entries, kept in memory and
appended to their file.

Entries live in compact `array`s, loaded lazily from the file on first use, and reach the file in
`write_pending()`/`flush()`: an index is only trusted after a clean shutdown or for data below the recovery
point, and both are preceded by a flush; anything else is rebuilt from the log on recovery. Files are
appended to, not preallocated; the `segment_index_bytes` cap limits the entry count (a full index makes the
log roll, as in Kafka). Subclasses define the entry layout, parse and check a loaded file, and the lookups.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from typing import ClassVar

__all__ = ["CorruptIndexError", "SparseIndex", "truncate_file", "unlink_quietly", "write_tail"]


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the owner rebuilds it from the log."""


class SparseIndex:
    """Entries of (first column, second column) for one segment. Not thread-safe: one owner."""

    ENTRY_BYTES: ClassVar[int]
    FIRST_TYPECODE: ClassVar[str]
    SECOND_TYPECODE: ClassVar[str]

    def __init__(self, path: str, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY_BYTES)
        self._first: array[int] | None = None  # None until loaded
        self._second: array[int] = array(self.SECOND_TYPECODE)
        self._persisted = 0

    # -- subclass hooks ------------------------------------------------------------------------------

    def _parse(self, data: bytes) -> tuple[array[int], array[int]]:
        raise NotImplementedError

    def _pack(self, start: int) -> bytes:
        """Entries from `start` on, in the file format."""
        raise NotImplementedError

    # -- loading -------------------------------------------------------------------------------------

    @property
    def loaded(self) -> bool:
        return self._first is not None

    def _read_file(self) -> tuple[array[int], array[int]]:
        """The file's entries, parsed; raises CorruptIndexError for a size that is not whole entries."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            data = b""
        if len(data) % self.ENTRY_BYTES:
            raise CorruptIndexError(f"{self.path}: size {len(data)} is not a multiple of {self.ENTRY_BYTES}")
        return self._parse(data)

    def _install(self, first: array[int], second: array[int]) -> None:
        self._first, self._second = first, second
        self._persisted = len(first)

    def reset(self) -> None:
        """Drop every entry, in memory and on disk (before a rebuild)."""
        self._install(array(self.FIRST_TYPECODE), array(self.SECOND_TYPECODE))
        truncate_file(self.path, 0)

    def _column(self) -> array[int]:
        if self._first is None:
            raise RuntimeError(f"{self.path} used before load()")
        return self._first

    # -- shared queries and updates ------------------------------------------------------------------

    @property
    def entries(self) -> int:
        return len(self._column())

    @property
    def is_full(self) -> bool:
        return len(self._column()) >= self.max_entries

    def _append_entry(self, first: int, second: int) -> None:
        self._column().append(first)
        self._second.append(second)

    def _truncate_entries(self, keep: int) -> None:
        """Keep the first `keep` entries, in memory and on disk."""
        first = self._column()
        if keep >= len(first):
            return
        del first[keep:]
        del self._second[keep:]
        if self._persisted > keep:
            self._persisted = keep
            truncate_file(self.path, keep * self.ENTRY_BYTES)

    def write_pending(self) -> None:
        """Append entries not yet in the file (no fsync)."""
        self._write(fsync=False)

    def flush(self) -> None:
        """Append pending entries and fsync the file."""
        self._write(fsync=True)

    def _write(self, fsync: bool) -> None:
        count = len(self._column())
        if self._persisted == count and not fsync:
            return
        write_tail(self.path, self._persisted * self.ENTRY_BYTES, self._pack(self._persisted), fsync)
        self._persisted = count

    def delete(self) -> None:
        unlink_quietly(self.path)


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
