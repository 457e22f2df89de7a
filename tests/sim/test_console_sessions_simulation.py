"""The console's sign-in sessions under the seeded simulation (`console_sessions_simulation.py`).

Replay one seed: `python -m tests.sim.console_sessions_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=10000 pytest tests/sim/test_console_sessions_simulation.py`.
"""

from __future__ import annotations

import os

from tests.sim.console_sessions_simulation import ConsoleSessionsSimulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "100"))


def test_console_sessions_survive_the_simulation() -> None:
    failures: list[str] = []
    totals: dict[str, int] = {}
    for seed in range(SEEDS):
        try:
            stats = ConsoleSessionsSimulation(seed).run()
        except AssertionError as exc:
            failures.append(str(exc))
            continue
        for name, count in stats.items():
            totals[name] = totals.get(name, 0) + count
    assert not failures, "\n".join([*failures[:5],
                                    "replay one: python -m tests.sim.console_sessions_simulation --seed N"])
    # The runs did what they are for: sessions expired, pushed out, visited, refused and signed out.
    for what in ("signed in", "expired", "pushed out", "visited", "refused", "signed out"):
        assert totals.get(what, 0) > 0, totals
