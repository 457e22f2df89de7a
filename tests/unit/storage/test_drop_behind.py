"""log.writeback.interval.bytes and log.drop.behind.bytes: appended bytes are written back early, by default
keeping every page cached; with drop-behind set they leave the page cache once written back, and stay readable."""

from __future__ import annotations

import ctypes
import itertools
import logging
import mmap
import os
import threading
from pathlib import Path

import pytest

from moldau.storage import drop_behind
from moldau.storage.drop_behind import WRITEBACK_STEP_BYTES
from moldau.storage.log import PartitionLog
from tests.unit.storage.batches import batches_of, decode, make_batch
from tests.unit.storage.conftest import OpenLog

pytestmark = pytest.mark.skipif(not drop_behind.available(), reason="no sync_file_range on this platform")

_PAGE = mmap.PAGESIZE
_VALUE_BYTES = 64 * 1024
_APPENDS = 8 * WRITEBACK_STEP_BYTES // _VALUE_BYTES  # 32 MiB in 64 KiB records


def _cached_bytes(path: str | Path, start: int = 0) -> int:
    """Bytes of the file from `start` on in the page cache now (mincore on a private mapping of it)."""
    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        pages = (size + _PAGE - 1) // _PAGE
        vector = ctypes.create_string_buffer(pages)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        assert libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        return sum(byte & 1 for byte in vector.raw[start // _PAGE:]) * _PAGE


@pytest.fixture
def write_back_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make each step wait for its write-back (WAIT_BEFORE | WRITE | WAIT_AFTER) before it drops pages.

    A step only starts write-back, and the kernel keeps pages still being written when told to drop them; on a busy
    disk (a full test run) whole steps are still in flight when the next one drops them. Waiting makes what stays
    cached depend on the log's bookkeeping, which these tests check, not on the disk's speed."""
    monkeypatch.setattr(drop_behind, "_SYNC_FILE_RANGE_WRITE", 1 | 2 | 4)


def _fill(log: PartitionLog) -> list[bytes]:
    written = []
    for i in range(_APPENDS):
        value = bytes([i % 251]) * _VALUE_BYTES
        log.append(batches_of(make_batch([value])), 0)
        written.append(value)
    return written


def _active_path(log: PartitionLog) -> str:
    return os.path.join(log.directory, f"{log.segments[-1].base_offset:020d}.log")


@pytest.mark.usefixtures("write_back_waits")
def test_bytes_behind_the_kept_window_leave_the_cache_and_read_back(open_log: OpenLog) -> None:
    keep = WRITEBACK_STEP_BYTES
    log = open_log(drop_behind_bytes=keep)
    written = _fill(log)
    path = _active_path(log)
    size = os.path.getsize(path)
    assert drop_behind.drain()
    # Write-back of the last steps may still run, so their pages may stay: at most the kept bytes, the step
    # being written and the one before it (advised again at the next step) remain.
    assert _cached_bytes(path) <= keep + 3 * WRITEBACK_STEP_BYTES < size
    assert [value for _, value in decode(log.read(0, 10**9, True).read_bytes())] == written


@pytest.mark.usefixtures("write_back_waits")
def test_the_default_writes_back_early_and_keeps_everything_cached(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.config.writeback_interval_bytes, log.config.drop_behind_bytes) == (WRITEBACK_STEP_BYTES, -1)
    _fill(log)
    assert drop_behind.drain()
    path = _active_path(log)
    assert _cached_bytes(path) >= os.path.getsize(path) - _PAGE


def _steps(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int, int]]:
    """The steps the logs hand the worker from now on: (write_from, write_to, drop_from, drop_to)."""
    handed: list[tuple[int, int, int, int]] = []
    submit = drop_behind._worker.submit

    def recording(fd: int, write_from: int, write_to: int, drop_from: int, drop_to: int) -> bool:
        handed.append((write_from, write_to, drop_from, drop_to))
        return submit(fd, write_from, write_to, drop_from, drop_to)

    monkeypatch.setattr(drop_behind._worker, "submit", recording)
    return handed


@pytest.mark.parametrize(("interval", "keep", "step"), [
    (WRITEBACK_STEP_BYTES, -1, WRITEBACK_STEP_BYTES),  # the default
    (4 * 1024 * 1024, -1, 4 * 1024 * 1024),
    (-1, 0, WRITEBACK_STEP_BYTES),  # drop-behind steps on its own
])
def test_write_back_starts_every_interval_and_drops_only_with_drop_behind(
        open_log: OpenLog, monkeypatch: pytest.MonkeyPatch, interval: int, keep: int, step: int) -> None:
    handed = _steps(monkeypatch)
    log = open_log(writeback_interval_bytes=interval, drop_behind_bytes=keep)
    _fill(log)
    assert drop_behind.drain()
    assert len(handed) >= _APPENDS * _VALUE_BYTES // step - 1
    # Each step starts where the last ended, at least a step's bytes later.
    assert all(write_to - write_from >= step for write_from, write_to, _, _ in handed)
    assert all(later[0] == earlier[1] for earlier, later in itertools.pairwise(handed))
    dropped = sum(drop_to - drop_from for _, _, drop_from, drop_to in handed)
    assert dropped > 0 if keep >= 0 else dropped == 0


@pytest.mark.parametrize("interval", [-1, 0])
def test_with_both_off_nothing_is_handed_to_the_worker(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch,
                                                        interval: int) -> None:
    handed = _steps(monkeypatch)
    log = open_log(writeback_interval_bytes=interval)
    _fill(log)
    assert handed == []
    path = _active_path(log)
    assert _cached_bytes(path) >= os.path.getsize(path) - _PAGE


@pytest.mark.usefixtures("write_back_waits")
def test_a_truncated_segment_goes_on_dropping_after_new_appends(open_log: OpenLog) -> None:
    log = open_log(drop_behind_bytes=0)
    _fill(log)
    log.truncate_to(_APPENDS // 2)
    path = _active_path(log)
    cut = os.path.getsize(path)  # finding the cut read pages back in: what reads bring back stays, as it would
    written = _fill(log)
    assert drop_behind.drain()
    assert _cached_bytes(path, cut) <= 3 * WRITEBACK_STEP_BYTES < os.path.getsize(path) - cut
    values = [value for _, value in decode(log.read(_APPENDS // 2, 10**9, True).read_bytes())]
    assert values == written


def _written_file(path: Path) -> int:
    """A file of one step's bytes, written back (clean pages, which a drop would take out of the cache)."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR)
    os.write(fd, b"x" * WRITEBACK_STEP_BYTES)
    os.fsync(fd)
    return fd


def test_a_file_closed_before_the_worker_gets_to_it_is_left_alone(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # The worker is handed a duplicate descriptor: a segment closed before the worker runs, and a new file that
    # took its descriptor's number, must not have the segment's step applied to the new file.
    gate = threading.Event()
    run_step = drop_behind._run_step

    def held_step(step: drop_behind._Step) -> None:
        gate.wait(10)
        run_step(step)

    monkeypatch.setattr(drop_behind, "_run_step", held_step)
    worker = drop_behind._Worker()
    segment_fd = _written_file(tmp_path / "segment")
    assert worker.submit(segment_fd, 0, WRITEBACK_STEP_BYTES, 0, WRITEBACK_STEP_BYTES)
    os.close(segment_fd)
    other_fd = _written_file(tmp_path / "other")
    try:
        assert other_fd == segment_fd  # the number was reused, as a busy broker's descriptors are
        gate.set()
        assert worker.drain()
        assert _cached_bytes(tmp_path / "other") == WRITEBACK_STEP_BYTES
        assert _cached_bytes(tmp_path / "segment") == 0
    finally:
        os.close(other_fd)


def test_a_failing_call_switches_drop_behind_off_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    worker = drop_behind._Worker()
    read_end, write_end = os.pipe()  # sync_file_range refuses a pipe (ESPIPE)
    try:
        with caplog.at_level(logging.WARNING, logger=drop_behind.__name__):
            assert worker.submit(write_end, 0, WRITEBACK_STEP_BYTES, 0, 0)
            assert worker.submit(write_end, 0, WRITEBACK_STEP_BYTES, 0, 0)
            assert worker.drain()
    finally:
        os.close(read_end)
        os.close(write_end)
    assert worker.failed
    assert [record.message for record in caplog.records if "cannot start the write-back" in record.message] == [
        caplog.records[0].message]
