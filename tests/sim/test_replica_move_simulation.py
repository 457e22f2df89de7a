"""A seeded, deterministic simulation of moving a partition log between log directories while it changes.

One partition on a broker with three log directories goes through random appends (in growing leader epochs),
follower-style truncations, DeleteRecords, moves to random directories (some called off by moving back), copy
steps of random sizes, clean restarts and crashes (the manager abandoned without closing, then the directories
opened again). After every step: the partition has exactly one log, in one directory, at most one future
copy elsewhere, and no stray copies on disk; whenever a swap happens or the broker starts again, the log that
goes on holds exactly what the log before it held (records, log start and end, leader epochs).

Replay one seed: `pytest tests/sim/test_replica_move_simulation.py -k 'seed and N'`.
"""

from __future__ import annotations

import os
import random
import uuid
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import batches_of, decode, make_batch, values

CONFIG = LogConfig(segment_bytes=2048)
KEY = ("t", 0)

Snapshot = tuple[list[tuple[int, bytes]], int, int, tuple[tuple[int, int], ...]]


def _snapshot(plog: PartitionLog) -> Snapshot:
    records: list[tuple[int, bytes]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        got = decode(plog.read(offset, 1 << 20, True, max_offset=plog.log_end_offset).read_bytes())
        if not got:
            break
        records.extend(r for r in got if r[0] >= plog.log_start_offset)
        offset = got[-1][0] + 1
    epochs = tuple((e.epoch, e.start_offset) for e in plog.leader_epochs.entries)
    return records, plog.log_start_offset, plog.log_end_offset, epochs


def _check_layout(manager: LogManager, dirs: list[str]) -> None:
    current, future = manager.log_dir_of(*KEY), manager.future_dir_of(*KEY)
    assert current is not None and current != future
    for d in dirs:
        names = {n for n in os.listdir(d) if n.startswith("t-0")}
        expected = ({"t-0"} if d == current else set()) | ({"future"} if d == future else set())
        assert {"future" if n.endswith("-future") else n for n in names} == expected, (d, names)


def run(seed: int, root: Path, steps: int = 300) -> None:
    rng = random.Random(seed)
    dirs = [str(root / f"disk{i}") for i in range(3)]
    clock = ManualClock(1_700_000_000_000)
    manager = LogManager(dirs, clock, CONFIG)
    manager.create(*KEY, uuid.uuid4(), CONFIG)
    epoch, crashes, swaps, value = 0, 0, 0, 0
    for _ in range(steps):
        plog = manager.get(*KEY)
        assert plog is not None
        action = rng.random()
        if action < 0.35:
            count = rng.randint(1, 8)
            plog.append(batches_of(make_batch([b"r%d" % (value + i) for i in range(count)])), epoch)
            value += count
        elif action < 0.42 and plog.log_end_offset > plog.log_start_offset:
            plog.truncate_to(rng.randint(plog.log_start_offset, plog.log_end_offset))
            epoch += 1  # a new leader's batches follow
            plog.append(batches_of(make_batch(values(rng.randint(1, 4), f"e{epoch}-"))), epoch)
        elif action < 0.47 and plog.log_end_offset > plog.log_start_offset:
            plog.delete_records_before(rng.randint(plog.log_start_offset, plog.log_end_offset))
        elif action < 0.6:
            manager.alter_log_dir(*KEY, rng.choice(dirs))
        elif action < 0.9:
            before = _snapshot(plog)
            moving_to = manager.future_dir_of(*KEY)
            progress = manager.advance_moves(max_bytes=rng.choice([200, 1000, 5000, 1 << 20]))
            if moving_to is not None and not progress.swapped:
                assert manager.future_dir_of(*KEY) == moving_to, "a move was given up"
            if progress.swapped:
                ((key, moved),) = progress.swapped
                assert key == KEY and moved is manager.get(*KEY) and _snapshot(moved) == before
                swaps += 1
        else:
            before = _snapshot(plog)
            if rng.random() < 0.5 or crashes >= 5:
                manager.close()
            else:
                crashes += 1  # abandoned as a crash leaves it: nothing closed, nothing marked clean
            manager = LogManager(dirs, clock, CONFIG)
            reopened = manager.get(*KEY)
            assert reopened is not None
            after = _snapshot(reopened)
            # A start may drop leader epoch entries that begin at the log end (no batch carries them; a leader
            # records its epoch again when it takes over); everything else is as before.
            assert after[:3] == before[:3]
            assert after[3] == tuple(e for e in before[3] if e[1] < before[2] or e in after[3])
        _check_layout(manager, dirs)
    while manager.moving():  # every move finishes once appends stop
        plog = manager.get(*KEY)
        assert plog is not None
        before = _snapshot(plog)
        moving_to = manager.future_dir_of(*KEY)
        progress = manager.advance_moves()
        for _, moved in progress.swapped:
            assert _snapshot(moved) == before
        assert progress.swapped or manager.future_dir_of(*KEY) == moving_to, "a move was given up"
    _check_layout(manager, dirs)
    manager.close()
    assert swaps > 0


@pytest.mark.parametrize("seed", range(12))
def test_seed(seed: int, tmp_path: Path) -> None:
    run(seed, tmp_path)
