"""The simulation must catch a broken commit rule: without the §5.4.2 epoch check, Figure 8 loses entries.

The leader-change record a new leader appends makes Figure 8 rare: it needs fetch batches of one
entry and leaders that crash right after being elected or after replicating, then come back. This
profile provokes that; the bound below is generous for it (the first failing seed is 124 today).
Its requests fail silently (`report_failures=False`): what the core does on a failure report plays no part in
the anomaly, and the reports would redraw which seeds provoke it (about one in a thousand either way).
"""

from __future__ import annotations

import pytest

from moldau.raft import Config, RaftNode
from tests.sim.simulator import Faults, InvariantViolation, Simulation

MUTATION_SEEDS = 400


def commit_by_count_only(self: RaftNode) -> None:
    """`RaftNode._advance_leader_hw` without the check that the entry is of the leader's epoch."""
    self._match[self.node_id] = self.log.end_offset
    candidate = sorted(self._match.values(), reverse=True)[self._majority() - 1]
    self.high_watermark = max(self.high_watermark, candidate)


def figure_8_simulation(seed: int) -> Simulation:
    faults = Faults(drop=0.1, duplicate=0.0, delay_ms_max=20, fault_every_ms=200,
                    leader_crash=0.4, crash_after_replicating=0.2, report_failures=False)
    return Simulation(seed, 5, faults, 0, Config(max_fetch_entries=1))


def test_simulation_catches_commit_without_the_epoch_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(RaftNode, "_advance_leader_hw", commit_by_count_only)
    for seed in range(MUTATION_SEEDS):
        try:
            figure_8_simulation(seed).run(3_000, 3_000)
        except (InvariantViolation, AssertionError) as exc:
            assert "committed" in str(exc), f"seed={seed}: unexpected failure {exc}"
            return
    pytest.fail(f"no seed in range({MUTATION_SEEDS}) caught a commit rule without the §5.4.2 epoch check")


@pytest.mark.parametrize("seed", range(0, 200, 7))
def test_figure_8_profile_passes_with_the_real_commit_rule(seed: int) -> None:
    figure_8_simulation(seed).run(3_000, 3_000)
