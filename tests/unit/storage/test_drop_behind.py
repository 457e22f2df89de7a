"""log.writeback.interval.bytes and log.drop.behind.bytes: appended bytes are written back early and, further than
the kept bytes behind the log's end (across segments), leave the page cache once written back, and stay readable;
with drop-behind off (-1) every page stays cached."""

from __future__ import annotations

import ctypes
import itertools
import logging
import mmap
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from moldau.storage import drop_behind
from moldau.storage.drop_behind import MAX_ROLLED_TAILS
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import DROP_BEHIND_BYTES, WRITEBACK_STEP_BYTES, LogConfig
from tests.unit.storage.batches import batches_of, decode, make_batch
from tests.unit.storage.conftest import OpenLog

pytestmark = pytest.mark.skipif(not drop_behind.available(), reason="no sync_file_range on this platform")

_PAGE = mmap.PAGESIZE
_VALUE_BYTES = 64 * 1024
_APPENDS = 8 * WRITEBACK_STEP_BYTES // _VALUE_BYTES  # 128 MiB in 64 KiB records


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
@pytest.mark.parametrize("keep", [DROP_BEHIND_BYTES, -1])
def test_less_than_the_default_window_and_with_drop_behind_off_everything_stays_cached(open_log: OpenLog,
                                                                                       keep: int) -> None:
    assert (LogConfig().writeback_interval_bytes, LogConfig().drop_behind_bytes) == (WRITEBACK_STEP_BYTES,
                                                                                     256 * 1024 * 1024)
    log = open_log(drop_behind_bytes=keep)
    _fill(log)
    assert drop_behind.drain()
    path = _active_path(log)
    # The kernel may reclaim a few pages on its own (scattered ones: 16 pages in 1 quiet run of 30, 485 in one
    # full test run); a step dropped by mistake is 16 MiB in one piece, well beyond this margin.
    assert _cached_bytes(path) >= os.path.getsize(path) - WRITEBACK_STEP_BYTES // 4


_MIB = 1024 * 1024


@pytest.mark.usefixtures("write_back_waits")
def test_rolled_segments_leave_the_cache_once_the_kept_bytes_follow_them(open_log: OpenLog) -> None:
    # Segments smaller than a write-back step: only the rolls drop anything, so the kept window counts from the
    # log's end across segments, not from each segment's own end (which would keep every page of these).
    keep, segment_bytes = 32 * _MIB, 8 * _MIB
    log = open_log(drop_behind_bytes=keep, segment_bytes=segment_bytes)
    _fill(log)
    assert drop_behind.drain()
    sizes = [segment.size_bytes for segment in log.segments]
    paths = [os.path.join(log.directory, f"{segment.base_offset:020d}.log") for segment in log.segments]
    behind = [sum(sizes[i + 1:]) for i in range(len(sizes))]  # bytes after each segment's end
    assert len(sizes) >= 12
    # Tails are dropped at the rolls, so up to one segment more than the window may still wait for the next.
    far = [path for path, after in zip(paths, behind, strict=True) if after >= keep + segment_bytes]
    near = [path for path, after, size in zip(paths, behind, sizes, strict=True) if after + size <= keep]
    assert len(far) >= 8 and len(near) >= 3
    assert [_cached_bytes(path) for path in far] == [0] * len(far)
    assert all(_cached_bytes(path) >= os.path.getsize(path) - _PAGE for path in near)


def test_segments_retention_deletes_are_retired(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=8 * _MIB, retention_bytes=16 * _MIB)
    _fill(log)
    before = list(log.segments)
    assert log.apply_retention(0) > 0
    kept = {id(segment) for segment in log.segments}
    assert all(segment.retired == (id(segment) not in kept) for segment in before)
    log.close()
    assert all(segment.retired for segment in before)


@dataclass
class _Segment:
    fd: int
    size_bytes: int
    retired: bool = False


def _handed_steps(monkeypatch: pytest.MonkeyPatch, *, run: bool = False) -> list[tuple[int, int, int, int, int]]:
    """What the worker is handed from now on, (fd, write_from, write_to, drop_from, drop_to); the steps run only
    with `run`."""
    handed: list[tuple[int, int, int, int, int]] = []
    submit = drop_behind._worker.submit

    def record(fd: int, write_from: int, write_to: int, drop_from: int, drop_to: int) -> bool:
        handed.append((fd, write_from, write_to, drop_from, drop_to))
        return submit(fd, write_from, write_to, drop_from, drop_to) if run else True

    monkeypatch.setattr(drop_behind._worker, "submit", record)
    return handed


def test_rolled_tails_go_oldest_first_as_the_log_grows_past_them(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = _handed_steps(monkeypatch)
    state = drop_behind.DropBehind()
    keep, step = 10 * _MIB, WRITEBACK_STEP_BYTES
    first, second, third = _Segment(100, 8 * _MIB), _Segment(101, 8 * _MIB), _Segment(102, 8 * _MIB)
    state.rolled(first, step, keep)
    assert handed == []  # all of it within the window
    state.rolled(second, step, keep)
    assert handed == [(100, 0, 0, 0, 6 * _MIB)]  # 8 MiB after it: its first 6 MiB are 10 MiB behind the end
    second.retired = True  # deleted meanwhile: its descriptor is no longer its own
    state.rolled(third, step, keep)
    # The rest of it, from 2 MiB before (a large folio across 6 MiB stayed cached), and nothing of the retired one.
    assert handed[1:] == [(100, 0, 0, 4 * _MIB, 8 * _MIB)]
    state.after_append(103, step, step, keep)  # a step of the new active segment: write-back, and the tails
    assert handed[2:] == [(103, 0, step, 0, 0), (102, 0, 0, 0, 8 * _MIB)]


def test_a_log_holds_a_bounded_number_of_rolled_tails(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = _handed_steps(monkeypatch)
    state = drop_behind.DropBehind()
    for fd in range(MAX_ROLLED_TAILS + 3):
        state.rolled(_Segment(fd, _MIB), WRITEBACK_STEP_BYTES, DROP_BEHIND_BYTES)
    # Tiny segments far inside the window: only the oldest beyond the bound go, whole (past their last page).
    assert handed == [(fd, 0, 0, 0, 2 * _MIB) for fd in range(3)]


def test_with_drop_behind_off_a_roll_lets_go_of_the_tails(monkeypatch: pytest.MonkeyPatch) -> None:
    handed = _handed_steps(monkeypatch)
    state = drop_behind.DropBehind()
    state.rolled(_Segment(100, _MIB), WRITEBACK_STEP_BYTES, DROP_BEHIND_BYTES)
    state.rolled(_Segment(101, _MIB), WRITEBACK_STEP_BYTES, -1)
    state.after_append(102, 2 * DROP_BEHIND_BYTES, WRITEBACK_STEP_BYTES, DROP_BEHIND_BYTES)
    assert [fd for fd, *_ in handed] == [102]


@pytest.mark.parametrize(("interval", "keep", "step"), [
    (WRITEBACK_STEP_BYTES, -1, WRITEBACK_STEP_BYTES),  # drop-behind off
    (4 * 1024 * 1024, -1, 4 * 1024 * 1024),
    (-1, 0, WRITEBACK_STEP_BYTES),  # drop-behind steps on its own
])
def test_write_back_starts_every_interval_and_drops_only_with_drop_behind(
        open_log: OpenLog, monkeypatch: pytest.MonkeyPatch, interval: int, keep: int, step: int) -> None:
    handed_steps = _handed_steps(monkeypatch, run=True)
    log = open_log(writeback_interval_bytes=interval, drop_behind_bytes=keep)
    _fill(log)
    assert drop_behind.drain()
    handed = [ranges for _, *ranges in handed_steps]
    assert len(handed) >= _APPENDS * _VALUE_BYTES // step - 1
    # Each step starts where the last ended, at least a step's bytes later.
    assert all(write_to - write_from >= step for write_from, write_to, _, _ in handed)
    assert all(later[0] == earlier[1] for earlier, later in itertools.pairwise(handed))
    dropped = sum(drop_to - drop_from for _, _, drop_from, drop_to in handed)
    assert dropped > 0 if keep >= 0 else dropped == 0


@pytest.mark.parametrize("interval", [-1, 0])
def test_with_both_off_nothing_is_handed_to_the_worker(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch,
                                                        interval: int) -> None:
    handed = _handed_steps(monkeypatch, run=True)
    log = open_log(writeback_interval_bytes=interval, drop_behind_bytes=-1)
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
