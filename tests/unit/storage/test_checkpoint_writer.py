"""A log's offset checkpoints written on the worker thread: a job writes the values as they are when it runs, one
queued job stands for many requests, a write at once (a truncation lowering the recovery point) is never undone by
a job that ran late, a retired log's job writes nothing, and a job's failure reaches the log's next pass. With the
worker on, the periodic pass that moves the recovery point past rolled segments makes no fsync on the event loop."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage import checkpoint_writer, checkpoints, drop_behind, log
from moldau.storage.checkpoint_writer import CheckpointWriter
from moldau.storage.checkpoints import HIGH_WATERMARK_FILE, LOG_START_OFFSET_FILE, RECOVERY_POINT_FILE
from tests.unit.storage.batches import batches_of, make_batch, values
from tests.unit.storage.conftest import OpenLog


@pytest.fixture(autouse=True)
def on_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the storage tests' default: the checkpoints go to the worker, as in a broker."""
    monkeypatch.setattr(checkpoint_writer, "call_later", drop_behind.call_later)


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Jobs handed to the worker from now on wait until the event is set (a worker busy with a slow disk)."""
    release = threading.Event()
    call_later = drop_behind.call_later

    def later(fn: object) -> bool:
        def waiting() -> None:
            release.wait(30)
            fn()  # type: ignore[operator]
        return call_later(waiting)

    monkeypatch.setattr(checkpoint_writer, "call_later", later)
    yield release
    release.set()
    assert drop_behind.drain()


class Offsets:
    def __init__(self) -> None:
        self.recovery_point, self.log_start, self.high_watermark = 10, 0, 10

    def __call__(self) -> tuple[int, int, int]:
        return self.recovery_point, self.log_start, self.high_watermark


def no_snapshots(before: int) -> None:
    raise AssertionError(f"no snapshot deletion was asked for, yet snapshots before {before} were deleted")


def on_disk(directory: Path) -> tuple[int | None, ...]:
    return tuple(checkpoints.read_offset_checkpoint(str(directory), name)
                 for name in (RECOVERY_POINT_FILE, LOG_START_OFFSET_FILE, HIGH_WATERMARK_FILE))


def test_a_job_writes_the_values_as_they_are_when_it_runs(tmp_path: Path, held: threading.Event) -> None:
    offsets = Offsets()
    writer = CheckpointWriter(str(tmp_path), offsets, no_snapshots)
    writer.write_later()
    offsets.recovery_point, offsets.high_watermark = 20, 25
    writer.write_later()  # the queued job stands for this one too
    held.set()
    assert drop_behind.drain()
    assert on_disk(tmp_path) == (20, 0, 25)


def test_a_job_that_runs_late_does_not_undo_a_lowered_recovery_point(tmp_path: Path, held: threading.Event) -> None:
    offsets = Offsets()
    writer = CheckpointWriter(str(tmp_path), offsets, no_snapshots)
    offsets.recovery_point = 50
    writer.write_later()
    offsets.recovery_point, offsets.high_watermark = 30, 30  # a truncation: written at once
    writer.write_now()
    assert on_disk(tmp_path) == (30, 0, 30)
    held.set()
    assert drop_behind.drain()
    assert on_disk(tmp_path) == (30, 0, 30)


def recovery_point_20_queued(directory: Path) -> tuple[Offsets, CheckpointWriter, list[int]]:
    """A writer whose log moved its recovery point to 20 and asked for the snapshots before 15 to go."""
    offsets, deleted = Offsets(), list[int]()
    writer = CheckpointWriter(str(directory), offsets, deleted.append)
    offsets.recovery_point = 20
    writer.write_later(snapshots_before=(20, 15))
    return offsets, writer, deleted


def test_snapshots_go_only_once_the_file_holds_the_recovery_point_that_lets_them(tmp_path: Path,
                                                                              held: threading.Event) -> None:
    _, _, deleted = recovery_point_20_queued(tmp_path)
    assert deleted == []  # queued, the file still holds nothing
    held.set()
    assert drop_behind.drain()
    assert (on_disk(tmp_path)[0], deleted) == (20, [15])


def test_no_snapshot_goes_when_a_truncation_lowered_the_recovery_point_first(tmp_path: Path,
                                                                            held: threading.Event) -> None:
    offsets, writer, deleted = recovery_point_20_queued(tmp_path)
    offsets.recovery_point = 12
    writer.write_now()
    held.set()
    assert drop_behind.drain()
    assert (on_disk(tmp_path)[0], deleted) == (12, [])


def test_a_retired_logs_job_writes_nothing(tmp_path: Path, held: threading.Event) -> None:
    writer = CheckpointWriter(str(tmp_path), Offsets(), no_snapshots)
    writer.write_later()
    writer.retire()
    held.set()
    assert drop_behind.drain()
    assert on_disk(tmp_path) == (None, None, None)
    writer.write_later()  # and no job is queued any more
    assert drop_behind.drain()
    assert on_disk(tmp_path) == (None, None, None)


def test_unchanged_values_are_not_written_again(tmp_path: Path) -> None:
    writer = CheckpointWriter(str(tmp_path), Offsets(), no_snapshots)
    writer.assume_written((10, 0, 10))
    writer.write_now()
    assert on_disk(tmp_path) == (None, None, None)


def test_a_failed_write_on_the_worker_is_raised_once_by_the_next_pass(tmp_path: Path) -> None:
    writer = CheckpointWriter(str(tmp_path / "gone"), Offsets(), no_snapshots)  # no such directory: the write fails
    writer.write_later()
    assert drop_behind.drain()
    with pytest.raises(OSError) as raised:
        writer.raise_failure()
    assert raised.value.errno == errno.ENOENT
    writer.raise_failure()


def _roll_a_few(partition_log: log.PartitionLog) -> None:
    for _ in range(20):
        partition_log.append(batches_of(make_batch(values(3, size=40))), 0)
    assert len(partition_log.segments) > 3


def test_the_pass_after_rolls_makes_no_fsync_on_the_loop(open_log: OpenLog, clock: ManualClock, tmp_path: Path,
                                                        fsyncs: list[tuple[bool, str]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(log, "sync_later", drop_behind.sync_later)
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    assert drop_behind.drain()
    fsyncs.clear()
    partition_log.flush_if_due(clock.time_ms())
    active = partition_log.segments[-1].base_offset
    assert partition_log.recovery_point == active
    assert drop_behind.drain()
    assert not [name for on_loop, name in fsyncs if on_loop]
    assert on_disk(tmp_path / "topic-0")[0] == active
    # Snapshots older than the one recovery now starts from went too, on the worker, after the file was written.
    snapshots = sorted(f for f in os.listdir(tmp_path / "topic-0") if f.endswith(".snapshot"))
    assert snapshots == [os.path.basename(partition_log.producer_state.snapshot_path(active))]


def test_a_failed_checkpoint_write_on_the_worker_fails_the_next_pass(open_log: OpenLog, clock: ManualClock,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    failed: list[OSError] = []
    partition_log.on_io_error = lambda _log, error: failed.append(error)
    monkeypatch.setattr(checkpoints, "write_offset_checkpoints", failing)
    partition_log.flush_if_due(clock.time_ms())
    assert drop_behind.drain()
    with pytest.raises(KafkaError) as raised:
        partition_log.flush_if_due(clock.time_ms())
    assert raised.value.code == ErrorCode.kafka_storage_error
    assert [error.errno for error in failed] == [errno.EIO]


def test_a_job_queued_before_the_log_moved_writes_in_its_new_place(open_log: OpenLog, clock: ManualClock,
                                                                   tmp_path: Path, held: threading.Event) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    partition_log.flush_if_due(clock.time_ms())  # the checkpoints are queued behind the held worker
    moved = tmp_path / "topic-0.moved"
    partition_log.rename_directory(str(moved))
    held.set()
    assert drop_behind.drain()
    assert not (tmp_path / "topic-0").exists()
    assert on_disk(moved)[0] == partition_log.recovery_point == partition_log.segments[-1].base_offset
