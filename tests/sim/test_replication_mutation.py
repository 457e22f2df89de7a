"""The replication simulation must catch broken rules: each mutation below fails within a few hundred seeds.

- A follower that cuts its divergent suffix at the leader's end of the epoch, ignoring where that epoch ends in
  its own log, keeps records of an epoch the leader never had and cannot catch up (a liveness failure).
- A leader that computes its high watermark from the committed ISR only, not the maximal one (KIP-497), counts
  on a follower the controller has not yet accepted back: committed records are lost after a failover.
"""

from __future__ import annotations

import pytest

from moldau.replication import follower_rules
from moldau.replication.follower_rules import FollowerLog, TruncateTo
from moldau.replication.leader_state import LeaderState
from tests.sim.simulator import InvariantViolation
from tests.sim.test_replication_simulation import run_seed

MUTATION_SEEDS = 400


def first_failure() -> str | None:
    for seed in range(MUTATION_SEEDS):
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
