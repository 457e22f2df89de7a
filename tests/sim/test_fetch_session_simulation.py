"""Incremental fetch sessions under the seeded simulation (`fetch_session_simulation.py`).

Replay one seed: `python -m tests.sim.fetch_session_simulation --seed N`.
More seeds: `MOLDAU_SIM_SEEDS=10000 pytest tests/sim/test_fetch_session_simulation.py`.
"""

from __future__ import annotations

import os
from collections import Counter

from tests.sim.fetch_session_simulation import FetchSessionSimulation

SEEDS = int(os.environ.get("MOLDAU_SIM_SEEDS", "200"))


def test_fetch_sessions_lose_and_skip_nothing_in_the_simulation() -> None:
    failures: list[str] = []
    totals: Counter[str] = Counter()
    for seed in range(SEEDS):
        try:
            totals.update(FetchSessionSimulation(seed).run())
        except AssertionError as exc:
            failures.append(str(exc))
    assert not failures, "\n".join([*failures[:5],
                                    "replay one: python -m tests.sim.fetch_session_simulation --seed N"])
    # The runs did what they are for: sessions used, lost, refused and evicted; partitions added and forgotten.
    for what in ("incremental fetches", "full fetches", "lost answers", "session error fetch_session_id_not_found",
                 "other session made", "other session refused", "stopped fetching", "started fetching",
                 "out of range", "log start moved", "quiet incremental rounds"):
        assert totals[what] > 0, totals
