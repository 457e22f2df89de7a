"""The replicated log held in memory by a node, and the state a node persists.

Invariants: offsets are dense and start at 0; epochs never decrease along the log (an entry is
appended by the leader of its epoch, and leaders only ever append their own epoch, Raft §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Entry:
    """One log record: the epoch (term) of the leader that appended it, and an opaque value.

    `value is None` marks the leader-change record a leader appends at the start of its epoch.
    """

    epoch: int
    value: object = None


@dataclass(slots=True)
class PersistedState:
    """What survives a crash: current term, vote, and the log (durable once the action ran)."""

    term: int = 0
    voted_for: int | None = None
    entries: list[Entry] = field(default_factory=list)


class Log:
    """An in-memory list of entries with the epoch queries that fetch validation needs."""

    def __init__(self, entries: list[Entry] | None = None) -> None:
        self.entries: list[Entry] = list(entries or [])

    @property
    def end_offset(self) -> int:
        """Offset the next appended entry gets."""
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        """Epoch of the last entry, 0 for an empty log."""
        return self.entries[-1].epoch if self.entries else 0

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`; offset -1 has epoch 0 by convention."""
        return self.entries[offset].epoch if offset >= 0 else 0

    def matches(self, offset: int, last_epoch: int) -> bool:
        """True if the prefix ending at `offset` (exclusive) has `last_epoch` as its last epoch.

        By the Log Matching Property (§5.3) the two logs then agree up to `offset`.
        """
        if offset == 0:
            return True
        return offset <= self.end_offset and self.entries[offset - 1].epoch == last_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """The largest epoch <= `epoch` present in the log, and the end offset of that epoch."""
        for offset in range(self.end_offset - 1, -1, -1):
            found = self.entries[offset].epoch
            if found <= epoch:
                return found, offset + 1
        return 0, 0

    def append(self, entries: list[Entry]) -> None:
        self.entries.extend(entries)

    def truncate(self, offset: int) -> None:
        del self.entries[offset:]

    def read(self, offset: int, max_entries: int) -> tuple[Entry, ...]:
        return tuple(self.entries[offset:offset + max_entries])
