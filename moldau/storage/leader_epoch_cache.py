"""The leader epochs of one partition log, after Apache Kafka's LeaderEpochFileCache (KIP-101, KIP-279).

An entry (epoch, start offset) says that the first batch written under leader epoch `epoch` has base offset
`start offset`. Entries are strictly increasing in both epoch and start offset. A follower asks its leader
for the end offset of its own latest epoch (OffsetForLeaderEpoch) and truncates its log to it; a consumer
does the same to validate its position after a leader change.

The entries live in the partition directory as `leader-epoch-checkpoint`, in Kafka's text format:

    0               <- version
    2               <- number of entries
    0 0             <- "epoch startOffset", one line per entry
    3 150

The file is rewritten atomically (and durably) whenever the entries change, which is rare: once per new
leader epoch, and when the log start or end moves across an entry. Some changes are kept in memory until the
next write instead (`write=False`). The cut to the log's end at load, which every load makes again, and the
epoch assigned at a leadership change only matter once something is appended after them: the first append
writes them (durably, before its bytes); a file that still named an epoch at offsets then written in another
would be wrong. The cut to a log start that retention moved needs no write of its own: offsets below the log
start are never written again, and every load makes that cut too. A file without them, after a crash, answers
every query the same way. Thousands of partitions thus start and change leaders without a file written each.
Otherwise an in-memory change happens only after the file write succeeded, so an OSError leaves the cache as it
was. A missing or unreadable file loads as an empty cache; `loaded_from_file` tells the owning log to rebuild it
from its batches.

Not thread-safe: one owner (the partition log) drives it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from itertools import pairwise
from typing import NamedTuple

from moldau.storage.producer_state import write_atomically

log = logging.getLogger(__name__)

__all__ = [
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
]

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_VERSION = 0


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """(leader epoch, start offset) entries of one partition log; construct with `LeaderEpochCache.load`."""

    def __init__(self, directory: str, entries: Iterable[EpochEntry] = (), *,
                 loaded_from_file: bool = False) -> None:
        self.directory = directory
        self.loaded_from_file = loaded_from_file
        self._entries: list[EpochEntry] = list(entries)
        self._unwritten = False

    @classmethod
    def load(cls, directory: str) -> LeaderEpochCache:
        """The entries of `directory`'s checkpoint; empty (and `loaded_from_file` False) when the file is
        missing or unreadable."""
        path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILE)
        entries = _read_checkpoint(path)
        if entries is None:
            if os.path.exists(path):
                log.warning("%s: unreadable %s, rebuilding it", os.path.basename(directory),
                            LEADER_EPOCH_CHECKPOINT_FILE)
            return cls(directory)
        return cls(directory, entries, loaded_from_file=True)

    # -- reading -------------------------------------------------------------------------------------

    @property
    def path(self) -> str:
        return os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT_FILE)

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, UNDEFINED_EPOCH (-1) when there is none."""
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    def __len__(self) -> int:
        return len(self._entries)

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for `requested_epoch`, exactly as Kafka's LeaderEpochFileCache.endOffsetFor:

        * the requested epoch is UNDEFINED_EPOCH (-1), or the cache is empty: (-1, -1), undefined;
        * the requested epoch is the latest: (latest, `log_end_offset`), since the latest epoch is still
          being written to;
        * no entry has an epoch above the requested one (it is newer than anything known): (-1, -1);
        * every entry has a larger epoch (the requested one is older than the oldest kept, whose data is
          gone): (requested epoch, start offset of the first entry);
        * otherwise: (the largest epoch <= requested, start offset of the first entry with a larger epoch),
          i.e. the end offset of that epoch is where the next one starts.
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher = next((i for i, e in enumerate(entries) if e.epoch > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    # -- changes -------------------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int, write: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the entries changed. With
        `write=False` the file is written by the next `assign` that writes (see the module docstring).

        Only an epoch newer than the latest counts; an older or equal one (or a negative one, from a
        batch that never had a leader) is ignored. Entries at or above the new start offset are dropped
        first, as Kafka does, so start offsets stay increasing."""
        return self.assign_all(((epoch, start_offset),), write)

    def assign_all(self, assignments: Iterable[tuple[int, int]], write: bool = True) -> bool:
        """`assign` each (epoch, start offset) in order, writing the file at most once: also when nothing
        changes but earlier changes were kept in memory only. Returns whether the entries changed."""
        entries: list[EpochEntry] | None = None
        for epoch, start_offset in assignments:
            current = self._entries if entries is None else entries
            if epoch < 0 or epoch <= (current[-1].epoch if current else UNDEFINED_EPOCH):
                continue
            if start_offset < 0:
                raise ValueError(f"leader epoch {epoch} cannot start at negative offset {start_offset}")
            kept = [e for e in current if e.start_offset < start_offset]
            dropped = current[len(kept):]
            # Replacing one entry at the same start offset is expected: nothing was written in its epoch.
            if len(dropped) > 1 or (dropped and dropped[0].start_offset != start_offset):
                log.warning("%s: leader epoch %d at offset %d drops entries %s",
                            os.path.basename(self.directory), epoch, start_offset, dropped)
            kept.append(EpochEntry(epoch, start_offset))
            entries = kept
        if entries is None:
            if write and self._unwritten:
                self._replace(self._entries)
            return False
        self._replace(entries, write)
        return True

    @property
    def unwritten(self) -> bool:
        """Whether the next append must write the file (a change made with `write=False` that it owes)."""
        return self._unwritten

    def truncate_from_end(self, end_offset: int, write: bool = True) -> bool:
        """Drop entries starting at or after `end_offset` (the log was truncated to it). `write=False` suits a
        cut that is made again whenever the file is read (the one at load, to the log's end)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return False
        self._replace([e for e in self._entries if e.start_offset < end_offset], write)
        return True

    def truncate_from_start(self, start_offset: int, write: bool = True) -> bool:
        """The log start moved to `start_offset`: entries starting at or below it go, except that the last
        of them stays, moved up to `start_offset` (its epoch still covers the log's first offsets).
        `write=False` suits a log start that whole segments being deleted moved: a file that keeps entries below
        it is cut the same way whenever it is read (loading cuts the epochs to the first segment), and the next
        write brings it up to date."""
        entries = self._entries
        below = 0
        while below < len(entries) and entries[below].start_offset <= start_offset:
            below += 1
        if below == 0 or (below == 1 and entries[0].start_offset == start_offset):
            return False
        self._replace([EpochEntry(entries[below - 1].epoch, start_offset), *entries[below:]], write, owed=False)
        return True

    def clear(self) -> bool:
        if not self._entries:
            return False
        self._replace([])
        return True

    def write(self) -> None:
        """Write the checkpoint file with the current entries."""
        _write_checkpoint(self.path, self._entries)
        self.loaded_from_file = True
        self._unwritten = False

    def _replace(self, entries: list[EpochEntry], write: bool = True, owed: bool = True) -> None:
        """Take `entries`, written to the file now or (`write=False`) later: by the next append if `owed`, else
        with whatever write comes next (the cut to a log start, which every load makes again)."""
        if write:
            _write_checkpoint(self.path, entries)
            self._unwritten = False
        elif owed:
            self._unwritten = True
        self._entries = entries
        self.loaded_from_file = True

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self._entries!r})"


def _read_checkpoint(path: str) -> list[EpochEntry] | None:
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
        if len(lines) < 2 or int(lines[0]) != _VERSION:
            return None
        count = int(lines[1])
        rows = [line.split() for line in lines[2:] if line.strip()]
        if count != len(rows) or any(len(row) != 2 for row in rows):
            return None
        entries = [EpochEntry(int(epoch), int(offset)) for epoch, offset in rows]
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    for previous, entry in pairwise(entries):
        if entry.epoch <= previous.epoch or entry.start_offset < previous.start_offset:
            return None
    if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
        return None
    return entries


def _write_checkpoint(path: str, entries: list[EpochEntry]) -> None:
    lines = [str(_VERSION), str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
    write_atomically(path, ("\n".join(lines) + "\n").encode("ascii"))
