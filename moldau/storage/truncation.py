"""Where a truncation cuts the log: the decision only, with no files touched.

A follower truncates when its leader tells it that its log diverged (OffsetForLeaderEpoch), and a
partition that lost its leadership may too. `plan_truncation` decides what `PartitionLog.truncate_to` then
does; keeping the decision apart makes its corner cases testable without a log on disk:

* At or past the log end nothing is removed, but the leader epoch cache is still cut at the log end: a
  broker that led an epoch without writing in it keeps that entry, which a new leader never had, and a
  follower would otherwise fetch with it as its last epoch forever.
* Below the log start, or at or below the first segment's base offset, nothing survives: the log starts
  over, empty, at the offset.
* Otherwise the segments that start at or after the offset go whole, and the one holding it is cut. A
  batch straddling the offset goes whole, so the log may end below the offset.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from moldau.storage.log_common import segment_index

__all__ = ["Truncation", "TruncationKind", "plan_truncation"]


class TruncationKind(enum.Enum):
    KEEP_RECORDS = "keep records"  # only the leader epoch cache is cut at the log end
    START_OVER = "start over"  # every segment goes; the log restarts empty at the offset
    CUT = "cut"  # keep `keep_segments` segments and cut the last of them at the offset


@dataclass(frozen=True, slots=True)
class Truncation:
    kind: TruncationKind
    keep_segments: int = 0  # for CUT: how many of the oldest segments stay (at least one)


def plan_truncation(offset: int, log_start_offset: int, log_end_offset: int, bases: Sequence[int]) -> Truncation:
    """How to remove every batch holding an offset >= `offset` from a log with these offsets and segment
    base offsets. Raises ValueError for a negative offset."""
    if offset < 0:
        raise ValueError(f"cannot truncate to negative offset {offset}")
    if offset >= log_end_offset:
        return Truncation(TruncationKind.KEEP_RECORDS)
    if offset < log_start_offset or offset <= bases[0]:
        return Truncation(TruncationKind.START_OVER)
    keep = segment_index(bases, offset)
    if bases[keep] == offset:
        keep -= 1  # a segment starting exactly at the offset goes whole
    return Truncation(TruncationKind.CUT, keep + 1)
