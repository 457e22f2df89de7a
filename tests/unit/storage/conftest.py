from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from moldau.clock import ManualClock
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from tests.unit.storage.batches import START_MS

OpenLog = Callable[..., PartitionLog]


@pytest.fixture(autouse=True)
def rolled_segments_fsynced_by_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rolled segment's fsync starts on a worker thread, and the periodic pass leaves it there until it is done;
    the pass and retention write the offset checkpoints there too: what a pass right after a roll does would depend
    on that thread's timing. These tests check the log's bookkeeping, so the pass fsyncs rolled segments and writes
    the checkpoints itself, as it does when the worker is busy; the tests of the worker's part put it back
    (test_rolled_segment_sync.py)."""
    monkeypatch.setattr("moldau.storage.log.sync_later", lambda fds, now_ms: None)
    monkeypatch.setattr("moldau.storage.checkpoint_writer.call_later", lambda fn: False)


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, str]]:
    """Every fsync from now on: (made on the main thread, the file's name)."""
    made: list[tuple[bool, str]] = []
    fsync = os.fsync

    def recording(fd: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
        made.append((threading.current_thread() is threading.main_thread(), name))
        fsync(fd)

    monkeypatch.setattr(os, "fsync", recording)
    return made


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def open_log(tmp_path: Path, clock: ManualClock) -> Iterator[OpenLog]:
    """Open the partition log at `<tmp>/topic-0` with LogConfig overrides; closes whatever is left open."""
    opened: list[PartitionLog] = []

    def _open(*, name: str = "topic-0", clean_shutdown: bool | None = None, **overrides: Any) -> PartitionLog:
        config = replace(LogConfig(), **overrides)
        log = PartitionLog.open(str(tmp_path / name), config, clock, clean_shutdown=clean_shutdown)
        opened.append(log)
        return log

    yield _open
    for log in opened:
        if not log._closed:
            crash(log)


def crash(log: PartitionLog) -> None:
    """Drop the log as a killed process would: no flush, no snapshot, no marker."""
    import os

    for segment in log.segments:
        os.close(segment.fd)
    log._closed = True
