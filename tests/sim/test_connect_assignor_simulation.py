"""Connect's incremental cooperative assignor under the seeded simulation (`connect_assignor_simulation.py`):
exclusive, sticky and held-back after every round; complete and balanced whenever the group settles.

Replay one seed: `python -m tests.sim.connect_assignor_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=100000 pytest tests/sim/test_connect_assignor_simulation.py`.
"""

from __future__ import annotations

import os

from tests.sim.connect_assignor_simulation import AssignorSimulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "300"))


def test_assignor_survives_the_simulation() -> None:
    failures: list[str] = []
    totals: dict[str, int] = {}
    for seed in range(SEEDS):
        try:
            stats = AssignorSimulation(seed).run()
        except AssertionError as exc:
            failures.append(str(exc))
            continue
        for name, count in stats.items():
            totals[name] = totals.get(name, 0) + count
    replay = "replay one: python -m tests.sim.connect_assignor_simulation --seed N"
    assert not failures, "\n".join([*failures[:5], replay])
    # The runs did what they are for: revocations, scheduled delays after crashes, settled groups.
    assert all(count > 0 for count in totals.values()), totals
