"""Seeded simulation of 3- and 5-voter quorums under faults, checking invariants after every event.

Seeds vary the fault rates, the fetch batch size, whether nodes snapshot, whether 1 or 2 observers
replicate too, whether leaders crash right after proposing (the pattern behind Figure 8), the election
backoff's cap and the retry backoff after a failed request.

Candidates in lockstep run on seeds of their own: no faults, every message takes exactly 1 ms and every election
timeout is the same, so the voters stand at the same moments, each votes for itself and every election is split.
Only the election backoff's random waits can break the tie.

Voter changes (KIP-853) run on their own seeds: 3 voters and 3 spare nodes, a leader asked every few hundred
ms to add or remove one voter, under the same faults.

Replay one seed: `python -m tests.sim.test_raft_simulation --seed N [--voters 5] [--reconfigure]`.
More seeds: `MOLDAU_SIM_SEEDS=100000 pytest tests/sim`.
"""

from __future__ import annotations

import argparse
import os

import pytest

from moldau.raft import Config
from tests.sim.simulator import Faults, InvariantViolation, Simulation

# Seeds pick the election backoff's cap and the retry backoff among these (ms; the election timeout is 300-600 ms,
# the fetch interval 50 ms).
ELECTION_BACKOFF_MAX_MS = (0, 100, 300, 1000)
RETRY_BACKOFF_MS = (10, 20, 50, 100)

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "1000"))
FAULT_MS = 3_000
LIVENESS_MS = 3_000


RECONFIGURE_SEEDS = max(SEEDS // 4, 50)


def simulation(seed: int, voters: int, reconfigure: bool = False) -> Simulation:
    """The simulation of one seed; its fault rates and patterns are drawn from the seed."""
    faults = Faults(drop=(seed % 7) / 40, duplicate=(seed % 5) / 20, delay_ms_max=5 + seed % 60,
                    leader_crash=0.3 if seed % 4 == 2 else 0.0, crash_after_replicating=0.1 if seed % 4 == 2 else 0.0,
                    snapshot_every_ms=0 if seed % 3 == 0 else 100 + 100 * (seed % 4),
                    reconfigure_every_ms=40 + 20 * (seed % 5) if reconfigure else 0)
    config = Config(max_fetch_entries=(1, 2, 4, 16, 16)[seed % 5],
                    election_backoff_max_ms=ELECTION_BACKOFF_MAX_MS[(seed // 5) % 4],
                    retry_backoff_ms=RETRY_BACKOFF_MS[(seed // 20) % 4])
    observers = (0, 1, 0, 2)[seed % 4] if voters > 1 else seed % 2
    if reconfigure:
        observers = 3  # spare nodes to add
    return Simulation(seed, voters, faults, observers, config)


def run_seed(seed: int, voters: int, reconfigure: bool = False) -> Simulation:
    sim = simulation(seed, voters, reconfigure)
    sim.run(FAULT_MS, LIVENESS_MS)
    return sim


def run_seeds(voters: int, seeds: range, reconfigure: bool = False) -> list[Simulation]:
    failures, done = [], []
    for seed in seeds:
        try:
            done.append(run_seed(seed, voters, reconfigure))
        except (InvariantViolation, AssertionError) as exc:
            failures.append(f"seed={seed} voters={voters}: {exc}")
    flag = " --reconfigure" if reconfigure else ""
    replay = f"replay one: python -m tests.sim.test_raft_simulation --seed N --voters {voters}{flag}"
    assert not failures, "\n".join([*failures[:20], replay])
    return done


@pytest.mark.parametrize("voters", [3, 5])
def test_quorum_survives_faults(voters: int) -> None:
    run_seeds(voters, range(SEEDS))


def test_single_voter_commits_alone() -> None:
    run_seeds(1, range(20))


def test_voter_changes_under_faults() -> None:
    """Random adds and removes under partitions, crashes and message loss keep every invariant, and happen."""
    sims = run_seeds(3, range(RECONFIGURE_SEEDS), reconfigure=True)
    changes = [sim.voter_changes for sim in sims]
    assert sum(changes) > len(sims), f"too few voter changes went through: {changes}"
    reshaped = [sim for sim in sims if any(n is not None and n.voters != sim.voters for n in sim.nodes.values())]
    assert len(reshaped) > len(sims) // 3, "many seeds should end with a voter set other than the first"


LOCKSTEP_SEEDS = 20
LOCKSTEP_FAULTS = Faults(drop=0.0, duplicate=0.0, delay_ms_max=1, fault_every_ms=0)
ELECTION_MS = 3_000


def lockstep_simulation(seed: int, voters: int) -> Simulation:
    """Voters that time out at the same moments (an election timeout of exactly 300 ms) on a 1 ms network."""
    config = Config(election_timeout_ms_min=300, election_timeout_ms_max=301,
                    election_backoff_max_ms=ELECTION_BACKOFF_MAX_MS[seed % 4])
    return Simulation(seed, voters, LOCKSTEP_FAULTS, 0, config)


@pytest.mark.parametrize("voters", [3, 5])
def test_candidates_in_lockstep_elect_a_leader(voters: int) -> None:
    """Without the election backoff every election here is split, for ever."""
    for seed in range(LOCKSTEP_SEEDS):
        lockstep_simulation(seed, voters).elect(ELECTION_MS)


# Seeds beyond the default range that once failed, kept so the CI runs them: 368, a voter whose own set lacked
# the leader (a record naming it survived only in its log) stood for election forever; it now fetches from the
# leader its voters name (`RaftNode._probe`).
REGRESSION_SEEDS = (368,)


@pytest.mark.parametrize("seed", REGRESSION_SEEDS)
def test_voter_change_regressions(seed: int) -> None:
    run_seed(seed, 3, reconfigure=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--reconfigure", action="store_true")
    args = parser.parse_args()
    sim = run_seed(args.seed, args.voters, args.reconfigure)
    print(f"seed={args.seed} voters={args.voters}: ok ({sim.voter_changes} voter changes)")


if __name__ == "__main__":
    main()
