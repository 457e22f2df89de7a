"""The group coordinator under the seeded simulation (`group_simulation.py`): ownership, fencing and durability
hold after every step, across failovers that rebuild the coordinator from its log.

Replay one seed: `python -m tests.sim.group_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=100000 pytest tests/sim/test_group_simulation.py`.
"""

from __future__ import annotations

import os

from tests.sim.group_simulation import GroupSimulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "300"))


def test_group_coordinator_survives_the_simulation() -> None:
    failures: list[str] = []
    totals: dict[str, int] = {}
    for seed in range(SEEDS):
        try:
            stats = GroupSimulation(seed).run()
        except AssertionError as exc:
            failures.append(str(exc))
            continue
        for name, count in stats.items():
            totals[name] = totals.get(name, 0) + count
    replay = "replay one: python -m tests.sim.group_simulation --seed N"
    assert not failures, "\n".join([*failures[:5], replay])
    # The runs did what they are for: rebalances and reconciliations, acknowledged and lost commits, zombies,
    # failovers.
    assert all(count > 0 for count in totals.values()), totals
