"""Short fault-injection runs for CI: a proxied 3-node cluster, the workload, the seeded nemesis, the checker.

Each run takes about half a minute including start-up; longer runs are made with `python -m tests.fault.run`
(see docs/reliability.md). A failure prints the run's summary, its saved history and the command that
repeats it with the same seed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fault.run import RunConfig, execute

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SHORT = {"duration_s": 12.0, "interval_s": 3.0, "hold_s": (1.0, 2.5), "recovery_s": 3.0, "rate": 40.0}


@pytest.mark.parametrize("seed", [11, 23])
def test_no_violation_under_faults(tmp_path: Path, seed: int) -> None:
    outcome = execute(RunConfig(seed=seed, **SHORT), tmp_path)  # type: ignore[arg-type]
    print(outcome.summary())
    assert outcome.ok, outcome.summary()
    assert sum(outcome.faults.values()) >= 2, outcome.summary()
    assert outcome.result.stats["acked"] > 0, outcome.summary()


def test_no_transactional_violation_under_faults(tmp_path: Path) -> None:
    """Transactional producers and read_committed readers: no aborted read, no torn or lost transaction."""
    # Longer than the idempotent runs: a loaded machine fitted only one fault into 12 s of this workload.
    config = RunConfig(seed=31, workload="txn", txn_rate=8.0, **{**SHORT, "duration_s": 18.0})  # type: ignore[arg-type]
    outcome = execute(config, tmp_path)
    print(outcome.summary())
    assert outcome.ok, outcome.summary()
    assert sum(outcome.faults.values()) >= 2, outcome.summary()
    assert outcome.result.stats["committed"] > 0 and outcome.result.stats["aborted"] > 0, outcome.summary()
