"""Client telemetry under the seeded simulation (`telemetry_simulation.py`).

Replay one seed: `python -m tests.sim.telemetry_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=10000 pytest tests/sim/test_telemetry_simulation.py`.
"""

from __future__ import annotations

import os

from tests.sim.telemetry_simulation import TelemetrySimulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "100"))


def test_client_telemetry_survives_the_simulation() -> None:
    failures: list[str] = []
    totals: dict[str, int] = {}
    for seed in range(SEEDS):
        try:
            stats = TelemetrySimulation(seed).run()
        except AssertionError as exc:
            failures.append(str(exc))
            continue
        for name, count in stats.items():
            totals[name] = totals.get(name, 0) + count
    assert not failures, "\n".join([*failures[:5], "replay one: python -m tests.sim.telemetry_simulation --seed N"])
    # The runs did what they are for: accepted, stale, early, terminated and forgotten pushes, unmatched clients.
    assert all(count > 0 for count in totals.values()), totals
