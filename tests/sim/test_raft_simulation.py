"""Seeded simulation of 3- and 5-voter quorums under faults, checking invariants after every event.

Replay one seed: `python -m tests.sim.test_raft_simulation --seed N [--voters 5]`.
More seeds: `MOLDAU_SIM_SEEDS=100000 pytest tests/sim`.
"""

from __future__ import annotations

import argparse
import os

import pytest

from tests.sim.simulator import Faults, InvariantViolation, Simulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "2000"))
FAULT_MS = 3_000
LIVENESS_MS = 3_000


def run_seed(seed: int, voters: int) -> None:
    """One simulated run; the fault rates themselves are drawn from the seed."""
    rng_faults = Faults(drop=(seed % 7) / 40, duplicate=(seed % 5) / 20, delay_ms_max=5 + seed % 60)
    Simulation(seed, voters, rng_faults).run(FAULT_MS, LIVENESS_MS)


def run_seeds(voters: int, seeds: range) -> None:
    failures = []
    for seed in seeds:
        try:
            run_seed(seed, voters)
        except (InvariantViolation, AssertionError) as exc:
            failures.append(f"seed={seed} voters={voters}: {exc}")
    replay = f"replay one: python -m tests.sim.test_raft_simulation --seed N --voters {voters}"
    assert not failures, "\n".join([*failures[:20], replay])


@pytest.mark.parametrize("voters", [3, 5])
def test_quorum_survives_faults(voters: int) -> None:
    run_seeds(voters, range(SEEDS))


def test_single_voter_commits_alone() -> None:
    run_seeds(1, range(20))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--voters", type=int, default=3)
    args = parser.parse_args()
    run_seed(args.seed, args.voters)
    print(f"seed={args.seed} voters={args.voters}: ok")


if __name__ == "__main__":
    main()
