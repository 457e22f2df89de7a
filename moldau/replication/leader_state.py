"""What the leader of one partition knows about its followers: their positions, the ISR, the high watermark.

Sans-I/O: the replica manager feeds it follower fetches and the clock (`now_ms`), and asks it what to do; the
I/O (answering fetches, sending AlterPartition to the controller) stays outside. The rules are Kafka's:

- A follower's fetch at offset N says it has every record below N: its log end offset becomes N.
- A follower is *caught up* at a fetch whose offset reaches the leader's log end offset; it is also counted as
  caught up at the time of its previous fetch if this fetch reaches the leader's log end offset as it was then
  (so a follower that keeps up with a steady stream is never judged lagging just because records keep coming).
- The ISR shrinks by followers not caught up for `replica.lag.time.max.ms`, and grows by followers whose log
  end offset has reached the high watermark and the start of the current leader epoch.
- ISR changes go to the controller (AlterPartition) one at a time, and take effect once committed. While one
  is pending, the high watermark uses the *maximal* ISR (the committed one plus the members being added), so
  it never counts on a replica the controller might not have accepted (KIP-497).
- The high watermark is the smallest log end offset in that ISR; it never goes back.
- A follower whose last fetched epoch ends earlier in the leader's log than where the follower fetches from,
  or is no epoch of it, is told where its log parts from the leader's (`diverging_epoch`, KIP-320) and gets
  no records; what it then cuts is the follower's rule (`follower_rules.divergence_truncation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

UNKNOWN_OFFSET = -1


class EpochLookup(Protocol):
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...


def diverging_epoch(log: EpochLookup, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
    """(epoch, end offset) where a follower's log parts from the leader's `log`, if it does: the follower's last
    epoch ends earlier here than where it fetches from, or is not an epoch of this log at all."""
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < 0 or end_offset < 0:
        return None
    if epoch != last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    leader_end_at_last_fetch: int = UNKNOWN_OFFSET


@dataclass(slots=True)
class LeaderState:
    """The leader's view of one partition; `isr` is the committed ISR, `pending_isr` an unanswered proposal."""

    node_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    epoch_start_offset: int  # the log end offset when this broker became leader for `leader_epoch`
    lag_max_ms: int
    now_ms: int
    pending_isr: tuple[int, ...] | None = None
    followers: dict[int, FollowerProgress] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A new leader gives every follower a full lag period before judging it (it knows nothing yet).
        self.followers = {r: FollowerProgress(last_caught_up_ms=self.now_ms) for r in self.replicas
                          if r != self.node_id}

    # -- inputs -------------------------------------------------------------------------------------------------

    def on_follower_fetch(self, replica: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        progress = self.followers.get(replica)
        if progress is None:
            return
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.leader_end_at_last_fetch >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.leader_end_at_last_fetch = leader_end_offset

    def on_committed(self, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int,
                     now_ms: int) -> None:
        """The controller's state for this partition (same leader epoch): ISR and replicas as committed."""
        if partition_epoch < self.partition_epoch:
            return
        self.partition_epoch = partition_epoch
        self.isr = isr
        self.pending_isr = None
        if replicas != self.replicas:  # a reassignment added or removed replicas
            self.replicas = replicas
            for r in replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(last_caught_up_ms=now_ms)
            for r in [r for r in self.followers if r not in replicas]:
                del self.followers[r]

    def on_proposal_failed(self) -> None:
        """The controller refused or did not answer: forget the proposal, propose again from the committed ISR."""
        self.pending_isr = None

    # -- decisions ----------------------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def high_watermark(self, leader_end_offset: int) -> int:
        """The smallest log end offset in the maximal ISR (UNKNOWN_OFFSET if a member's is unknown)."""
        lowest = leader_end_offset
        for replica in self.maximal_isr:
            if replica == self.node_id:
                continue
            progress = self.followers.get(replica)
            if progress is None or progress.log_end_offset == UNKNOWN_OFFSET:
                return UNKNOWN_OFFSET
            lowest = min(lowest, progress.log_end_offset)
        return lowest

    def advanced_high_watermark(self, leader_end_offset: int, current: int) -> int | None:
        """The new high watermark if the ISR's positions move it forward from `current`; else None (it never
        goes back, and an ISR member of unknown position holds it)."""
        hw = self.high_watermark(leader_end_offset)
        return hw if hw > current else None

    def shrunk_isr(self, now_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers lagging for too long, or None (no change, or a proposal is pending)."""
        if self.pending_isr is not None:
            return None
        lagging = {r for r in self.isr if r != self.node_id and self._lagging(r, now_ms)}
        return tuple(r for r in self.isr if r not in lagging) if lagging else None

    def expanded_isr(self, replica: int, high_watermark: int) -> tuple[int, ...] | None:
        """The ISR with `replica` added if it has caught up, or None. Asked right after that replica's fetch, so
        a follower is never added on the strength of a position it reported before it went away."""
        if self.pending_isr is not None or replica in self.isr or not self._caught_up(replica, high_watermark):
            return None
        return tuple(r for r in self.replicas if r in self.isr or r == replica)

    def propose(self, isr: tuple[int, ...]) -> None:
        self.pending_isr = isr

    def _lagging(self, replica: int, now_ms: int) -> bool:
        progress = self.followers.get(replica)
        return progress is None or now_ms - progress.last_caught_up_ms > self.lag_max_ms

    def _caught_up(self, replica: int, high_watermark: int) -> bool:
        progress = self.followers.get(replica)
        if progress is None or progress.log_end_offset == UNKNOWN_OFFSET:
            return False
        return progress.log_end_offset >= max(high_watermark, self.epoch_start_offset)
