"""The replication simulation must catch broken rules: each mutation below fails within a few hundred seeds.

- A follower that cuts its divergent suffix at the leader's end of the epoch, ignoring where that epoch ends in
  its own log, keeps records of an epoch the leader never had and cannot catch up (a liveness failure).
- A leader that computes its high watermark from the committed ISR only, not the maximal one (KIP-497), counts
  on a follower the controller has not yet accepted back: committed records are lost after a failover.
- A leader that drops its pending ISR expansion on any answer but success (as Moldau did before 2026-11-27),
  also on one saying the controller applied it and made the added member leader (a reassignment completing),
  acknowledges records that new leader does not have.
- A leader whose pending proposal is dropped by an image of the partition epoch it was made at (which can come
  after the answer that told that epoch) does the same.
- Without the broker epoch in a proposal (KIP-903), a proposal sent again adds a follower that has restarted
  since, on the position it reported before it lost its unflushed tail.
"""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode
from moldau.replication import follower_rules
from moldau.replication.follower_rules import FollowerLog, TruncateTo
from moldau.replication.leader_state import LeaderState, ProposalOutcome
from tests.sim import replication
from tests.sim.simulator import InvariantViolation
from tests.sim.test_replication_simulation import run_seed

MUTATION_SEEDS = 400
# For the rarer interleavings: a restart between a proposal and its resend, an image landing between an answer
# and the next proposal.
LONG_MUTATION_SEEDS = 1500


def first_failure(seeds: int = MUTATION_SEEDS) -> str | None:
    for seed in range(seeds):
        try:
            run_seed(seed)
        except InvariantViolation as exc:
            return str(exc)
    return None


def truncate_at_the_leaders_end(log: FollowerLog, leader_epoch: int, leader_end_offset: int) -> TruncateTo:
    return TruncateTo(min(leader_end_offset, log.log_end_offset))


def test_a_follower_that_ignores_its_own_epoch_end_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follower_rules, "divergence_truncation", truncate_at_the_leaders_end)
    failure = first_failure()
    assert failure is not None, f"no seed of {MUTATION_SEEDS} caught the broken truncation rule"
    assert "not healed" in failure or "lost" in failure or "truncated" in failure, failure


def test_a_high_watermark_from_the_committed_isr_only_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LeaderState, "maximal_isr", property(lambda self: self.isr))
    failure = first_failure()
    assert failure is not None, f"no seed of {MUTATION_SEEDS} caught the high watermark rule without KIP-497"
    assert "lost" in failure or "lacks" in failure or "committed" in failure, failure


def drop_unless_committed(error: ErrorCode, answer_leader_epoch: int, leader_epoch: int) -> ProposalOutcome:
    if error == ErrorCode.none and answer_leader_epoch == leader_epoch:
        return ProposalOutcome.COMMITTED
    return ProposalOutcome.REFUSED


def test_a_pending_expansion_dropped_on_any_other_answer_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replication, "proposal_outcome", drop_unless_committed)
    failure = first_failure()
    assert failure is not None, f"no seed of {MUTATION_SEEDS} caught a leader dropping an applied expansion"
    assert "lost" in failure or "lacks" in failure, failure


def test_a_pending_proposal_dropped_by_an_image_of_its_own_epoch_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    on_committed = LeaderState.on_committed

    def dropping(self: LeaderState, replicas: tuple[int, ...], isr: tuple[int, ...], partition_epoch: int,
                 now_ms: int) -> None:
        on_committed(self, replicas, isr, partition_epoch, now_ms)
        if partition_epoch == self.partition_epoch:
            self.pending_isr = None

    monkeypatch.setattr(LeaderState, "on_committed", dropping)
    failure = first_failure(LONG_MUTATION_SEEDS)
    assert failure is not None, f"no seed of {LONG_MUTATION_SEEDS} caught an image dropping a pending proposal"
    assert "lost" in failure or "lacks" in failure, failure


def test_proposals_without_broker_epochs_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LeaderState, "member_epochs", lambda self, isr: (-1,) * len(isr))
    failure = first_failure(LONG_MUTATION_SEEDS)
    assert failure is not None, f"no seed of {LONG_MUTATION_SEEDS} caught proposals without broker epochs"
    assert "lost" in failure or "lacks" in failure, failure
