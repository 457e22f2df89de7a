"""The aborted-transaction index of one segment: `<base offset>.txnindex`, in Apache Kafka's file format.

Every transaction aborted by a marker stored in the segment gets one entry, in marker order, 34 bytes
big-endian: version int16 (0), producer id int64, first offset int64 (the transaction's first batch on this
partition), last offset int64 (the abort marker's offset) and last stable offset int64 (the partition's
stable offset right after the abort, ignoring replication: the first offset of the oldest transaction still
open then, else the marker offset + 1). A read_committed fetch uses the entries to tell the consumer which
producers' records to drop, and the last stable offset lets a search stop early: a transaction aborted later
was open when this entry was written, so it cannot start below that offset.

Entries are rare (one per abort), so they are kept in memory after the first read and appended to the file
with one write each; `flush` fsyncs the file when the segment is flushed. A missing file is an empty index
(segments written before transactions existed). Appends are idempotent: an entry whose last offset is not
beyond the index's last one is already there (recovery replays markers that may have been indexed).
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["TXN_INDEX_SUFFIX", "AbortedTxn", "TransactionIndex", "collect_aborted", "encode_entries"]

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One entry of the index."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The entries of one segment's `.txnindex`; loaded on first use. Not thread-safe: one owner."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None
        self._dirty = False

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = _read(self.path)
        return self._entries

    @property
    def last_offset(self) -> int:
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def append(self, entry: AbortedTxn) -> bool:
        """Add `entry` unless the index already reaches its last offset; returns whether it was added."""
        if entry.last_offset <= self.last_offset:
            return False
        data = encode_entries([entry])
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        self.entries.append(entry)
        self._dirty = True
        return True

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose marker lies at or after `offset` (the segment's new end)."""
        entries = self.entries
        keep = [e for e in entries if e.last_offset < offset]
        if len(keep) == len(entries):
            return
        self._rewrite(keep)

    def reset(self) -> None:
        """Drop every entry (before a rebuild by recovery)."""
        self._rewrite([])

    def replace(self, entries: Iterable[AbortedTxn]) -> None:
        """Make the index hold exactly `entries` (in marker order)."""
        self._rewrite(list(entries))

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        self._entries = entries
        if not entries:
            # No file is the same as an empty one, and spares every later open the read.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            self._dirty = False
            return
        with open(self.path, "wb") as f:
            f.write(encode_entries(entries))
        self._dirty = True

    def flush(self) -> None:
        """fsync what was written since the last flush."""
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.forget()

    def forget(self) -> None:
        """Drop the entries in memory only (the file was renamed away or deleted)."""
        self._entries, self._dirty = [], False


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    """The file content holding `entries`, in the given order."""
    return b"".join(_ENTRY.pack(_VERSION, e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset)
                    for e in entries)


def collect_aborted(entries: Iterable[AbortedTxn], start_offset: int, upper_offset: int,
                    out: list[AbortedTxn]) -> bool:
    """Add to `out` the entries overlapping [start_offset, upper_offset); True when no later entry (of this
    index or a later segment's) can overlap, because one's last stable offset reaches `upper_offset`."""
    for entry in entries:
        if entry.last_offset >= start_offset and entry.first_offset < upper_offset:
            out.append(entry)
        if entry.last_stable_offset >= upper_offset:
            return True
    return False


def _read(path: str) -> list[AbortedTxn]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    whole = len(data) - len(data) % _ENTRY.size
    if whole < len(data):
        # A torn last entry (a crash mid-append): cut it, so the next append lands on an entry boundary;
        # recovery writes the entry again from the log.
        os.truncate(path, whole)
    entries = []
    for position in range(0, whole, _ENTRY.size):
        _, producer_id, first, last, stable = _ENTRY.unpack_from(data, position)
        entries.append(AbortedTxn(producer_id, first, last, stable))
    return entries
