"""The simulations must catch the metadata quorum's backoffs removed: each mutation below has to fail them."""

from __future__ import annotations

import random

import pytest

from moldau.raft import RaftNode, core
from moldau.raft.backoff import RetryBackoff
from tests.sim.simulator import InvariantViolation
from tests.sim.test_raft_simulation import ELECTION_MS, LOCKSTEP_SEEDS, lockstep_simulation, run_seed


def no_election_backoff(failed_elections: int, max_ms: int, rng: random.Random) -> int:
    return 0


def always_ready(self: RetryBackoff, node: int, now_ms: int) -> bool:
    return True


def ignore_refusals(self: RaftNode, voter: int, now_ms: int) -> None:
    """`RaftNode._on_refusal` as before the election backoff: a lost election waits out its timeout."""


def assert_lockstep_stays_leaderless(voters: int, seeds: range) -> None:
    for seed in seeds:
        with pytest.raises(InvariantViolation, match="no leader"):
            lockstep_simulation(seed, voters).elect(ELECTION_MS)


@pytest.mark.parametrize("voters", [3, 5])
def test_lockstep_candidates_stay_split_without_the_election_backoff(monkeypatch: pytest.MonkeyPatch,
                                                                    voters: int) -> None:
    monkeypatch.setattr(RaftNode, "_on_election_deadline", RaftNode._start_pre_vote)
    monkeypatch.setattr(RaftNode, "_on_refusal", ignore_refusals)
    assert_lockstep_stays_leaderless(voters, range(LOCKSTEP_SEEDS))


def test_lockstep_candidates_stay_split_with_a_backoff_of_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "election_backoff_ms", no_election_backoff)
    assert_lockstep_stays_leaderless(3, range(LOCKSTEP_SEEDS // 4))  # a split every tick: slow to simulate


@pytest.mark.parametrize("seed", range(5))
def test_the_simulation_catches_requests_sent_during_the_retry_backoff(monkeypatch: pytest.MonkeyPatch,
                                                                       seed: int) -> None:
    monkeypatch.setattr(RetryBackoff, "ready", always_ready)
    with pytest.raises(InvariantViolation, match="backs off from"):
        run_seed(seed, 3)
