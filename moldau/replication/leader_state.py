"""What the leader of one partition knows about its followers: their positions, the ISR, the high watermark.

Sans-I/O: the replica manager feeds it follower fetches and the clock (`now_ms`), and asks it what to do; the
I/O (answering fetches, sending AlterPartition to the controller) stays outside. The rules are Kafka's:

- A follower's fetch at offset N says it has every record below N: its log end offset becomes N. The fetch also
  names the follower's broker epoch; a proposal to add it carries that epoch, and the controller refuses it if
  the broker has registered again since (it restarted, and may have lost what that fetch reported: KIP-903).
- A follower is *caught up* at a fetch whose offset reaches the leader's log end offset; it is also counted as
  caught up at the time of its previous fetch if this fetch reaches the leader's log end offset as it was then
  (so a follower that keeps up with a steady stream is never judged lagging just because records keep coming).
- The ISR shrinks by followers not caught up for `replica.lag.time.max.ms`, and grows by followers whose log
  end offset has reached the high watermark and the start of the current leader epoch.
- ISR changes go to the controller (AlterPartition) one at a time, and take effect once committed. While one
  is pending, the high watermark uses the *maximal* ISR (the committed one plus the members being added), so
  it never counts on a replica the controller might not have accepted (KIP-497).
- A proposal stays pending until its outcome is known (`proposal_outcome`). Only an answer saying it was not
  applied puts the leader back on the committed ISR, at once; no member is then proposed for adding for
  `EXPANSION_BACKOFF_MS`. An answer that does not say (no answer, an unexpected
  error) sends it again; one that says the partition moved on (a newer partition or leader epoch, a new
  leader) waits for the metadata image. Dropping a pending expansion on such an answer would let the high
  watermark pass a member the controller did add, perhaps as the partition's next leader (a reassignment
  completes by making an added replica leader in the same change).
- The high watermark is the smallest log end offset in that ISR; it never goes back.
- A follower whose last fetched epoch ends earlier in the leader's log than where the follower fetches from,
  or is no epoch of it, is told where its log parts from the leader's (`diverging_epoch`, KIP-320) and gets
  no records; what it then cuts is the follower's rule (`follower_rules.divergence_truncation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from moldau.protocol.errors import ErrorCode

UNKNOWN_OFFSET = -1
# After a refused proposal, how long no member is proposed for adding (see `on_proposal_refused`).
EXPANSION_BACKOFF_MS = 500


class ProposalOutcome(Enum):
    """What a leader does with the controller's answer to its ISR proposal."""

    COMMITTED = "committed"  # adopt the ISR the answer carries
    REFUSED = "refused"  # the controller did not apply it: back to the committed ISR
    AWAIT_METADATA = "await metadata"  # applied, or overtaken by a newer state: the metadata image settles it
    RETRY = "retry"  # the outcome is unknown: send the same proposal again


# The controller says the proposal was not applied, by it or by any other controller (its epoch is monotonic).
_NOT_APPLIED = frozenset({ErrorCode.operation_not_attempted, ErrorCode.ineligible_replica})
# The partition's state has moved on from the one the proposal was made against; a newer image is on its way.
_SUPERSEDED = frozenset({
    ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version, ErrorCode.new_leader_elected,
    ErrorCode.not_leader_or_follower, ErrorCode.unknown_topic_id, ErrorCode.unknown_topic_or_partition,
    ErrorCode.invalid_request,
})


def proposal_outcome(error: ErrorCode, answer_leader_epoch: int, leader_epoch: int) -> ProposalOutcome:
    """Classify an AlterPartition answer (Kafka's rules). `answer_leader_epoch` is the epoch of the partition as
    committed, on success; `leader_epoch` the one the proposal was made in."""
    if error == ErrorCode.none:
        return ProposalOutcome.COMMITTED if answer_leader_epoch == leader_epoch else ProposalOutcome.AWAIT_METADATA
    if error in _NOT_APPLIED:
        return ProposalOutcome.REFUSED
    if error in _SUPERSEDED:
        return ProposalOutcome.AWAIT_METADATA
    return ProposalOutcome.RETRY


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
    broker_epoch: int = -1  # the follower's broker epoch in its last fetch (-1: not said)


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
    expand_after_ms: int = 0  # no expansion is proposed before this (`on_proposal_refused`)

    def __post_init__(self) -> None:
        # A new leader gives every follower a full lag period before judging it (it knows nothing yet).
        self.followers = {r: FollowerProgress(last_caught_up_ms=self.now_ms) for r in self.replicas
                          if r != self.node_id}

    # -- inputs -------------------------------------------------------------------------------------------------

    def on_follower_fetch(self, replica: int, fetch_offset: int, leader_end_offset: int, now_ms: int,
                          broker_epoch: int = -1) -> None:
        progress = self.followers.get(replica)
        if progress is None:
            return
        progress.broker_epoch = broker_epoch
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_ms = now_ms
        elif fetch_offset >= progress.leader_end_at_last_fetch >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.leader_end_at_last_fetch = leader_end_offset

    def on_committed(self, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int,
                     now_ms: int) -> None:
        """The controller's state for this partition (same leader epoch), from a metadata image: ISR and replicas
        as committed. A newer partition epoch settles a pending proposal: it was applied, or it can no longer be
        (the controller refuses a proposal made at an older epoch). The epoch the proposal was made at does not:
        an image may bring it after the answer that told it, and a proposal made since then is still open."""
        if partition_epoch < self.partition_epoch:
            return
        if partition_epoch > self.partition_epoch:
            self.pending_isr = None
        self.partition_epoch = partition_epoch
        self.isr = isr
        if replicas != self.replicas:  # a reassignment added or removed replicas
            self.replicas = replicas
            for r in replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerProgress(last_caught_up_ms=now_ms)
            for r in [r for r in self.followers if r not in replicas]:
                del self.followers[r]

    def on_proposal_committed(self, isr: tuple[int, ...], partition_epoch: int, now_ms: int) -> None:
        """The controller's answer to the pending proposal (`ProposalOutcome.COMMITTED`): the ISR as it committed
        it, at `partition_epoch` (the proposal's own epoch when the ISR was already so). Ignored if older than
        what this leader knows."""
        if partition_epoch < self.partition_epoch:
            return
        self.on_committed(self.replicas, isr, partition_epoch, now_ms)
        self.pending_isr = None

    def on_proposal_refused(self, now_ms: int) -> None:
        """The controller did not apply the proposal (`ProposalOutcome.REFUSED`): forget it at once, so that the high
        watermark counts on the committed ISR again, and propose again from it. Never for an answer that leaves the
        outcome open: see `proposal_outcome`.

        No member is proposed for adding for `EXPANSION_BACKOFF_MS`: the controller refuses a replica whose broker is
        fenced or shutting down (INELIGIBLE_REPLICA), and such a broker may go on fetching for a while (a controlled
        shutdown does), which would otherwise propose it again at every fetch. Holding the refused proposal pending
        instead, as a backoff, kept the high watermark waiting for that broker: when it stopped, every acks=all
        request of its partitions waited out the rest of the backoff."""
        self.pending_isr = None
        self.expand_after_ms = now_ms + EXPANSION_BACKOFF_MS

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

    def expanded_isr(self, replica: int, high_watermark: int, now_ms: int) -> tuple[int, ...] | None:
        """The ISR with `replica` added if it has caught up, or None. Asked right after that replica's fetch, so
        a follower is never added on the strength of a position it reported before it went away."""
        if self.pending_isr is not None or replica in self.isr or now_ms < self.expand_after_ms:
            return None
        if not self._caught_up(replica, high_watermark):
            return None
        return tuple(r for r in self.replicas if r in self.isr or r == replica)

    def propose(self, isr: tuple[int, ...]) -> None:
        self.pending_isr = isr

    def member_epochs(self, isr: tuple[int, ...]) -> tuple[int, ...]:
        """The broker epoch each member of a proposed `isr` had in the fetch it is judged by, for the controller to
        check (KIP-903): a member being added that has restarted since must not join on an old position. -1 for
        the leader and the members already in the ISR."""
        return tuple(self.followers[r].broker_epoch if r in self.followers and r not in self.isr else -1
                     for r in isr)

    def _lagging(self, replica: int, now_ms: int) -> bool:
        progress = self.followers.get(replica)
        return progress is None or now_ms - progress.last_caught_up_ms > self.lag_max_ms

    def _caught_up(self, replica: int, high_watermark: int) -> bool:
        progress = self.followers.get(replica)
        if progress is None or progress.log_end_offset == UNKNOWN_OFFSET:
            return False
        return progress.log_end_offset >= max(high_watermark, self.epoch_start_offset)
