"""Seeded simulation of a partition replicated by three brokers under faults (tests/sim/replication.py).

Seeds vary the drop rate, the delays, how often faults come and which kinds (crashes with torn tails, isolated
brokers, leadership moves).

Replay one seed: `python -m tests.sim.test_replication_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=100000 pytest tests/sim/test_replication_simulation.py` (the long run).
"""

from __future__ import annotations

import argparse
import os

from tests.sim.replication import Faults, ReplicationSimulation
from tests.sim.simulator import InvariantViolation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "2000"))
FAULT_MS = 1_500
LIVENESS_MS = 2_000


def simulation(seed: int) -> ReplicationSimulation:
    """The simulation of one seed; its fault rates and mix are drawn from the seed."""
    mixes = [(0.3, 0.3, 0.3), (0.6, 0.1, 0.2), (0.1, 0.6, 0.2), (0.2, 0.2, 0.5)]
    crash, isolate, move_leader = mixes[seed % len(mixes)]
    faults = Faults(drop=(seed % 5) / 25, delay_ms_max=5 + seed % 40, fault_every_ms=60 + 40 * (seed % 6),
                    crash=crash, isolate=isolate, move_leader=move_leader)
    return ReplicationSimulation(seed, faults)


def run_seed(seed: int) -> ReplicationSimulation:
    sim = simulation(seed)
    sim.run(FAULT_MS, LIVENESS_MS)
    return sim


def run_seeds(seeds: range) -> list[str]:
    failures = []
    for seed in seeds:
        try:
            run_seed(seed)
        except (InvariantViolation, AssertionError) as exc:
            failures.append(f"seed={seed}: {exc}")
    return failures


def test_replication_keeps_acknowledged_records_under_faults() -> None:
    failures = run_seeds(range(SEEDS))
    replay = "replay one: python -m tests.sim.test_replication_simulation --seed N"
    assert not failures, "\n".join([*failures[:20], replay])


def test_the_simulation_acknowledges_records_and_moves_leaders() -> None:
    """Guards against a simulation that passes because nothing happens in it."""
    acked, epochs, hand_overs = 0, 0, 0
    for seed in range(20):
        sim = run_seed(seed)
        acked += len(sim.acked)
        epochs += sim.state.leader_epoch
        hand_overs += sim.hand_overs
    assert acked > 20 * 50 and epochs > 20 * 3 and hand_overs > 5, (acked, epochs, hand_overs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    args = parser.parse_args()
    sim = run_seed(args.seed)
    print(f"seed={args.seed}: ok ({len(sim.acked)} records acknowledged, leader epoch {sim.state.leader_epoch})")


if __name__ == "__main__":
    main()
