"""Source offsets in Debezium's shape, the rule that skips events already written, and `FlushTracker`, which
says which LSN may be confirmed to PostgreSQL. Pure: no I/O.

Stored offset (source partition `{"server": <topic.prefix>}`):
- streaming: `{"lsn": <event LSN>, "lsn_commit": <commit LSN of its transaction>, "txId", "ts_usec"}`;
- snapshot: `{"lsn": <slot's consistent point>, "txId", "ts_usec", "snapshot": true,
  "last_snapshot_record": <bool>}`;
- heartbeat: `{"lsn": <position reached>, "txId", "ts_usec"}` (no `lsn_commit`).

Transactions reach the stream in commit order, and within one the change LSNs grow, so
(commit LSN, change LSN) orders every event; on restart an event at or below the stored pair is skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["FlushTracker", "ResumePoint", "format_lsn", "parse_lsn", "snapshot_completed"]


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def snapshot_completed(offset: Mapping[str, Any] | None) -> bool:
    """A stored offset past the snapshot: streaming, or the snapshot's last record."""
    if offset is None:
        return False
    return not offset.get("snapshot") or bool(offset.get("last_snapshot_record"))


@dataclass(frozen=True)
class ResumePoint:
    """What was already written, from the stored offset."""

    lsn: int = 0
    lsn_commit: int | None = None

    @classmethod
    def from_offset(cls, offset: Mapping[str, Any] | None) -> ResumePoint:
        if not offset or not isinstance(offset.get("lsn"), int):
            return cls()
        commit = offset.get("lsn_commit")
        return cls(offset["lsn"], commit if isinstance(commit, int) else None)

    def skips_transaction(self, final_lsn: int) -> bool:
        """Every event of a transaction committed at `final_lsn` was written already."""
        if self.lsn_commit is None:
            # Snapshot and heartbeat offsets: everything committed before that position is written.
            return final_lsn < self.lsn
        return final_lsn < self.lsn_commit

    def skips_event(self, final_lsn: int, change_lsn: int) -> bool:
        if self.skips_transaction(final_lsn):
            return True
        return self.lsn_commit is not None and (final_lsn, change_lsn) <= (self.lsn_commit, self.lsn)


class FlushTracker:
    """Which LSN is safe to confirm to the server: one whose every record has been acknowledged.

    Records are numbered as they are emitted (`emitted`); `safe_after(lsn)` says that `lsn` may be confirmed
    once every record emitted so far is acknowledged; `acknowledged(seq)` may come in any order. `flushable`
    is the highest such LSN whose records form an acknowledged prefix.
    """

    def __init__(self) -> None:
        self.next_seq = 0
        self.acked_prefix = 0  # every record numbered below this is acknowledged
        self.acked_out_of_order: set[int] = set()
        self.pending: list[tuple[int, int]] = []  # (records that must be acked first, lsn), both increasing
        self.confirmed = 0

    def emitted(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        return seq

    def acknowledged(self, seq: int) -> None:
        if seq < self.acked_prefix:
            return
        self.acked_out_of_order.add(seq)
        while self.acked_prefix in self.acked_out_of_order:
            self.acked_out_of_order.discard(self.acked_prefix)
            self.acked_prefix += 1

    def safe_after(self, lsn: int) -> None:
        if lsn <= self.confirmed or (self.pending and lsn <= self.pending[-1][1]):
            return
        if self.pending and self.pending[-1][0] == self.next_seq:
            self.pending[-1] = (self.next_seq, lsn)
        else:
            self.pending.append((self.next_seq, lsn))

    def flushable(self) -> int:
        """The LSN to confirm now (only grows)."""
        while self.pending and self.pending[0][0] <= self.acked_prefix:
            self.confirmed = max(self.confirmed, self.pending.pop(0)[1])
        return self.confirmed

    def all_acknowledged(self) -> bool:
        return self.acked_prefix == self.next_seq
