"""A seeded, deterministic simulation of the CDC source's `FlushTracker`: records are emitted, positions are
declared safe, acknowledgements arrive in random order, and the confirmed LSN is checked after every step
against the definition: it only grows, and never passes a position some record before which is unacknowledged.

Replay one seed: `pytest tests/sim/test_cdc_flush_tracker.py -k 'seed and N'`.
"""

from __future__ import annotations

import random

import pytest

from moldau.connect.connectors.postgres_cdc.offsets import FlushTracker


def run(seed: int, steps: int = 2000) -> None:
    rng = random.Random(seed)
    tracker = FlushTracker()
    unacked: list[int] = []
    acked: set[int] = set()
    declared: list[tuple[int, int]] = []  # (records emitted before it, lsn)
    lsn = 0
    confirmed = 0
    for _ in range(steps):
        action = rng.random()
        if action < 0.4:
            unacked.append(tracker.emitted())
        elif action < 0.6:
            lsn += rng.randint(1, 100)
            declared.append((tracker.next_seq, lsn))
            tracker.safe_after(lsn)
        elif unacked:
            seq = unacked.pop(rng.randrange(len(unacked)))
            tracker.acknowledged(seq)
            acked.add(seq)
        now = tracker.flushable()
        assert now >= confirmed, "the confirmed LSN went back"
        confirmed = now
        prefix = 0
        while prefix in acked:
            prefix += 1
        allowed = max((position for needed, position in declared if needed <= prefix), default=0)
        assert now == allowed, f"confirmed {now}, but the acknowledged prefix allows exactly {allowed}"
    for seq in unacked:
        tracker.acknowledged(seq)
    assert tracker.all_acknowledged() and tracker.flushable() == (declared[-1][1] if declared else 0)


@pytest.mark.parametrize("seed", range(30))
def test_flush_tracker_seed(seed: int) -> None:
    run(seed)
