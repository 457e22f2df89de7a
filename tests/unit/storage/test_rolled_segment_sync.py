"""A rolled segment's fsync, its producer snapshot's before it and its indexes' after it, start on the worker thread
at the roll; the periodic pass moves the recovery point once they are done without fsyncing them again, fsyncs
itself after ROLLED_SYNC_WAIT_MS, and takes a failure of the worker's fsync as its own."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage import drop_behind, log
from moldau.storage.log import ROLLED_SYNC_WAIT_MS, PartitionLog
from tests.unit.storage.batches import batches_of, make_batch, values
from tests.unit.storage.conftest import OpenLog


@pytest.fixture
def worker_syncs(monkeypatch: pytest.MonkeyPatch, rolled_segments_fsynced_by_the_pass: None) -> None:
    """Undo the storage tests' default: rolled segments' fsyncs go to the worker, as in a broker."""
    monkeypatch.setattr(log, "sync_later", drop_behind.sync_later)


@pytest.fixture
def worker_held(monkeypatch: pytest.MonkeyPatch, worker_syncs: None) -> Iterator[threading.Event]:
    """The worker's fsyncs wait until the event is set (a slow disk)."""
    release = threading.Event()
    run_sync = drop_behind._run_sync

    def held(step: drop_behind._Sync) -> None:
        release.wait(30)
        run_sync(step)

    monkeypatch.setattr(drop_behind, "_run_sync", held)
    yield release
    release.set()
    assert drop_behind.drain()


def _roll_a_few(log_: PartitionLog) -> None:
    for _ in range(20):
        log_.append(batches_of(make_batch(values(3, size=40))), 0)
    assert len(log_.segments) > 3


@pytest.mark.usefixtures("worker_syncs")
def test_the_pass_moves_the_recovery_point_once_the_worker_has_fsynced(open_log: OpenLog, clock: ManualClock) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    assert drop_behind.drain()
    partition_log.flush_if_due(clock.time_ms())
    assert partition_log.recovery_point == partition_log.segments[-1].base_offset


def test_the_pass_leaves_a_pending_fsync_to_the_worker_until_the_wait_is_over(
        open_log: OpenLog, clock: ManualClock, worker_held: threading.Event) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    partition_log.flush_if_due(clock.time_ms())
    assert partition_log.recovery_point == 0  # the event loop did not wait for the disk
    clock.advance(ROLLED_SYNC_WAIT_MS - 1)
    partition_log.flush_if_due(clock.time_ms())
    assert partition_log.recovery_point == 0
    clock.advance(1)
    partition_log.flush_if_due(clock.time_ms())  # waited long enough: the pass fsyncs the segments itself
    assert partition_log.recovery_point == partition_log.segments[-1].base_offset


def test_a_full_flush_does_not_wait_for_the_worker(open_log: OpenLog, worker_held: threading.Event) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    partition_log.flush()
    assert partition_log.recovery_point == partition_log.log_end_offset


def test_a_failed_fsync_on_the_worker_fails_the_pass(open_log: OpenLog, clock: ManualClock,
                                                     monkeypatch: pytest.MonkeyPatch, worker_syncs: None) -> None:
    def failing(step: drop_behind._Sync) -> None:
        for fd in step.fds:
            os.close(fd)
        step.ticket.error = OSError(errno.EIO, os.strerror(errno.EIO))
        step.ticket.done = True

    monkeypatch.setattr(drop_behind, "_run_sync", failing)
    failed: list[OSError] = []
    partition_log = open_log(segment_bytes=1000)
    partition_log.on_io_error = lambda _log, error: failed.append(error)
    _roll_a_few(partition_log)
    assert drop_behind.drain()
    with pytest.raises(KafkaError) as raised:
        partition_log.flush_if_due(clock.time_ms())
    assert raised.value.code == ErrorCode.kafka_storage_error
    assert [error.errno for error in failed] == [errno.EIO]  # the directory's failure, as a failed fsync is
    assert partition_log.recovery_point == 0


def test_an_fsync_that_fails_after_the_wait_still_fails_a_later_pass(
        open_log: OpenLog, clock: ManualClock, monkeypatch: pytest.MonkeyPatch, worker_syncs: None) -> None:
    release = threading.Event()

    def held_then_failing(step: drop_behind._Sync) -> None:
        release.wait(30)
        for fd in step.fds:
            os.close(fd)
        step.ticket.error = OSError(errno.EIO, os.strerror(errno.EIO))
        step.ticket.done = True

    monkeypatch.setattr(drop_behind, "_run_sync", held_then_failing)
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    clock.advance(ROLLED_SYNC_WAIT_MS)
    partition_log.flush_if_due(clock.time_ms())  # the pass stopped waiting and fsynced on its own
    assert partition_log.recovery_point == partition_log.segments[-1].base_offset
    release.set()
    assert drop_behind.drain()
    with pytest.raises(KafkaError) as raised:  # the worker's late failure is not lost
        partition_log.flush()
    assert raised.value.code == ErrorCode.kafka_storage_error


def _snapshots(log_: PartitionLog) -> list[str]:
    return [os.path.basename(log_.producer_state.snapshot_path(segment.base_offset)) for segment in log_.segments[1:]]


@pytest.mark.usefixtures("worker_syncs")
def test_a_rolls_producer_snapshot_is_fsynced_on_the_worker_before_the_segment(
        open_log: OpenLog, clock: ManualClock, fsyncs: list[tuple[bool, str]]) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    assert drop_behind.drain()
    snapshots = _snapshots(partition_log)
    # The appends and rolls fsynced neither a snapshot nor a segment on the loop (the leader epoch's checkpoint,
    # written once at the first append, is not theirs).
    assert not [name for on_loop, name in fsyncs if on_loop and name.endswith((".snapshot", ".log"))]
    on_worker = [name for on_loop, name in fsyncs if not on_loop]
    assert [name for name in on_worker if name.endswith(".snapshot")] == snapshots
    # Each snapshot just before the segment that ends where it starts, then that segment's indexes (made at the roll
    # when they have no entry, as the offset index in segments this small).
    rolled = [[f"{segment.base_offset:020d}{suffix}" for suffix in (".log", ".index", ".timeindex")]
              for segment in partition_log.segments[:-1]]
    assert on_worker == [name for snapshot, files in zip(snapshots, rolled, strict=True) for name in [snapshot, *files]]

    fsyncs.clear()
    partition_log.flush_if_due(clock.time_ms())
    assert partition_log.recovery_point == partition_log.segments[-1].base_offset
    # The worker's fsyncs count: the pass fsyncs no snapshot, segment or index again on the loop.
    assert not [name for _, name in fsyncs if name.endswith((".snapshot", ".log", ".index", ".timeindex"))]


def test_the_pass_fsyncs_the_snapshots_the_worker_has_not_before_the_checkpoints(
        open_log: OpenLog, clock: ManualClock, worker_held: threading.Event, fsyncs: list[tuple[bool, str]]) -> None:
    partition_log = open_log(segment_bytes=1000)
    _roll_a_few(partition_log)
    fsyncs.clear()
    clock.advance(ROLLED_SYNC_WAIT_MS)
    partition_log.flush_if_due(clock.time_ms())  # the worker is stuck: the pass fsyncs everything itself
    assert partition_log.recovery_point == partition_log.segments[-1].base_offset
    on_loop = [name for on_loop, name in fsyncs if on_loop]
    newest = _snapshots(partition_log)[-1]
    assert newest in on_loop
    first_checkpoint = next(i for i, name in enumerate(on_loop) if name.startswith("recovery-point"))
    assert on_loop.index(newest) < first_checkpoint
