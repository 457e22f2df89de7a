"""The replicated log held in memory by a node, and the state a node persists.

Invariants: offsets are absolute and dense from the log start offset (0 until a snapshot replaces a
prefix); epochs never decrease along the log (an entry is appended by the leader of its epoch, and
leaders only ever append their own epoch, Raft §5.3). Entries below the start offset are gone: the
latest snapshot covers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.raft.voters import VotersRecord


@dataclass(frozen=True, slots=True)
class Entry:
    """One log record: the epoch (term) of the leader that appended it, and an opaque value.

    `value is None` marks the leader-change record a leader appends at the start of its epoch; a
    `VotersRecord` value is a voter-set change (moldau.raft.voters).
    """

    epoch: int
    value: object = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """State-machine state covering every entry below `end_offset`, all of them committed.

    `last_epoch` is the epoch of the entry at `end_offset - 1`, so the snapshot can stand in for that
    prefix in fetch validation; `data` is opaque to the core. `voters` is the voter set in effect at
    `end_offset` when the quorum is dynamic (None for a static quorum).
    """

    end_offset: int
    last_epoch: int
    data: object = None
    voters: VotersRecord | None = None


@dataclass(slots=True)
class PersistedState:
    """What survives a crash: current term, vote, latest snapshot, and the log after it.

    `entries` start at `snapshot.end_offset` (at 0 without a snapshot).
    """

    term: int = 0
    voted_for: int | None = None
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None


class Log:
    """The entries from `start_offset` on, with the epoch queries that fetch validation needs."""

    def __init__(self, entries: list[Entry] | None = None, snapshot: Snapshot | None = None) -> None:
        self.entries: list[Entry] = list(entries or [])
        self.start_offset = snapshot.end_offset if snapshot else 0
        self.start_epoch = snapshot.last_epoch if snapshot else 0  # epoch of the entry at start_offset - 1

    @property
    def end_offset(self) -> int:
        """Offset the next appended entry gets."""
        return self.start_offset + len(self.entries)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry (the snapshot's last epoch when there is none after it), 0 if empty."""
        return self.entries[-1].epoch if self.entries else self.start_epoch

    def entry(self, offset: int) -> Entry:
        """The entry at absolute `offset`, which must lie in [start_offset, end_offset)."""
        if not self.start_offset <= offset < self.end_offset:
            raise IndexError(f"offset {offset} outside [{self.start_offset}, {self.end_offset})")
        return self.entries[offset - self.start_offset]

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; `start_offset - 1` answers from the snapshot (-1 has epoch 0)."""
        if offset == self.start_offset - 1:
            return self.start_epoch
        return self.entry(offset).epoch

    def matches(self, offset: int, last_epoch: int) -> bool:
        """True if the prefix ending at `offset` (exclusive) has `last_epoch` as its last epoch.

        By the Log Matching Property (§5.3) the two logs then agree up to `offset`. Below the start
        offset the answer is unknown, hence False.
        """
        if offset == 0:
            return True
        return self.start_offset <= offset <= self.end_offset and self.epoch_at(offset - 1) == last_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` present in the log, and the end offset of that epoch.

        When that epoch ended before the start offset the answer is not known any more: the end
        returned is then below `start_offset` (0), which tells the caller to send the snapshot.
        """
        for index in range(len(self.entries) - 1, -1, -1):
            found = self.entries[index].epoch
            if found <= epoch:
                return found, self.start_offset + index + 1
        if self.start_epoch <= epoch:
            return self.start_epoch, self.start_offset
        return 0, 0

    def append(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)

    def truncate(self, offset: int) -> None:
        assert offset >= self.start_offset, "truncating below the log start"
        del self.entries[offset - self.start_offset:]

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        start = offset - self.start_offset
        assert start >= 0, "reading below the log start"
        return tuple(self.entries[start:start + max_entries])

    def compact(self, snapshot: Snapshot) -> None:
        """Drop the entries below `snapshot.end_offset`, which the snapshot now covers."""
        assert self.start_offset <= snapshot.end_offset <= self.end_offset
        del self.entries[:snapshot.end_offset - self.start_offset]
        self.start_offset, self.start_epoch = snapshot.end_offset, snapshot.last_epoch

    def reset(self, snapshot: Snapshot) -> None:
        """Discard every entry: the log is empty and starts where `snapshot` ends."""
        self.entries.clear()
        self.start_offset, self.start_epoch = snapshot.end_offset, snapshot.last_epoch
