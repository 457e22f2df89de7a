"""The follower's rules for one partition, sans-I/O: what to do with its leader's answer to a fetch.

The replica manager reads the follower's log through `FollowerLog`, asks these functions what to do, and does
it (truncating, appending, moving the high watermark or the log start), so the same rules run in the replication
simulation (tests/sim) over an in-memory log. The rules are Kafka's:

- *Divergence* (KIP-279): the leader answers a fetch whose last fetched epoch it does not end where the
  follower's log does with that epoch and where it ends there. The follower cuts its log to the end of the last
  epoch both logs share: the smaller of the leader's end for that epoch and its own. Several rounds may be
  needed when the follower has several epochs the leader lacks; each round removes only records the leader
  does not have.
- *Out of range*: a fetch below the leader's log start restarts the follower's log empty at that start; a
  follower log longer than the leader's high watermark keeps what the leader has committed and refetches.
- *High watermark*: the leader's, capped at the follower's own log end (the follower may lag).
- *Log start*: moves up with the leader's (retention, DeleteRecords), never past what the follower has
  committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class FollowerLog(Protocol):
    """What the rules read of the follower's log."""

    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove every record at or above `offset` (and leader epochs starting there)."""

    offset: int


@dataclass(frozen=True, slots=True)
class StartOverAt:
    """Delete the whole log and restart it empty at `offset`."""

    offset: int


def divergence_truncation(log: FollowerLog, leader_epoch: int, leader_end_offset: int) -> TruncateTo:
    """Where to cut when the leader says the logs part after `leader_epoch`, which ends at `leader_end_offset`
    in its log: the end of that epoch in both logs. A follower that does not know the epoch (it has none that
    old, or none at all) cuts to the leader's end, or keeps its log if that is shorter."""
    own_epoch, own_end = log.end_offset_for_epoch(leader_epoch)
    if own_epoch >= 0 and own_end >= 0:
        return TruncateTo(min(leader_end_offset, own_end))
    return TruncateTo(min(leader_end_offset, log.log_end_offset))


def out_of_range_action(log: FollowerLog, leader_start_offset: int,
                        leader_high_watermark: int) -> TruncateTo | StartOverAt | None:
    """What brings this log back into the leader's range after OFFSET_OUT_OF_RANGE; None when nothing would
    change (the same fetch would be out of range again)."""
    if log.log_end_offset < leader_start_offset:
        return StartOverAt(leader_start_offset)
    if leader_high_watermark >= 0 and log.log_end_offset > leader_high_watermark:
        return TruncateTo(leader_high_watermark)  # the leader's log is shorter: keep what it has committed
    return None


def high_watermark_after_fetch(log: FollowerLog, leader_high_watermark: int) -> int:
    """The follower's high watermark once the fetched records are appended."""
    return min(leader_high_watermark, log.log_end_offset)


def log_start_after_fetch(log: FollowerLog, leader_start_offset: int) -> int | None:
    """The offset to delete records below, when the leader's log start moved past this one's; else None."""
    if leader_start_offset <= log.log_start_offset:
        return None
    return min(leader_start_offset, log.high_watermark)
