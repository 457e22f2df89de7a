from __future__ import annotations

import errno
import os
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import (
    CLEAN_SHUTDOWN_MARKER,
    RECORDS_VALIDATED_MARKER,
    RETENTION_SEGMENTS_PER_SLICE,
    LogManager,
)
from moldau.storage.segment import LogSegment
from tests.unit.storage.batches import batches_of, decode, make_batch, values


def _dirs(tmp_path: Path, n: int = 2) -> list[str]:
    return [str(tmp_path / f"d{i}") for i in range(n)]


def test_create_spreads_partitions_and_reopens_them(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, LogConfig())
    topic_id = uuid.uuid4()
    logs = [manager.create("orders", p, topic_id, LogConfig()) for p in range(4)]
    assert sorted(os.path.dirname(log.directory) for log in logs) == sorted(_dirs(tmp_path) * 2)
    assert manager.create("orders", 0, topic_id) is logs[0]
    assert manager.get("orders", 9) is None
    logs[1].append(batches_of(make_batch(values(3))), 0)
    manager.close()
    assert all((Path(d) / CLEAN_SHUTDOWN_MARKER).exists() for d in _dirs(tmp_path))

    again = LogManager(_dirs(tmp_path), clock, LogConfig())
    assert sorted(again.partitions()) == [("orders", p) for p in range(4)]
    assert not any((Path(d) / CLEAN_SHUTDOWN_MARKER).exists() for d in _dirs(tmp_path))
    reopened = again.get("orders", 1)
    assert reopened is not None and reopened.topic_id == topic_id and reopened.log_end_offset == 3
    assert decode(reopened.read(0, 1000, True).read_bytes())[2][0] == 2
    again.close()


def test_missing_marker_means_recovery(tmp_path: Path, clock: ManualClock,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(3))), 0)
    manager.close()
    (Path(_dirs(tmp_path, 1)[0]) / CLEAN_SHUTDOWN_MARKER).unlink()
    recovered: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment) -> int:
        recovered.append(1)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    assert recovered == [1]
    again.close()


def test_delete_renames_then_removes(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None)
    log.append(batches_of(make_batch(values(3))), 0)
    slice_ = log.read(0, 1000, True).slices[0]
    assert manager.delete("t", 0)
    assert not manager.delete("t", 0)
    assert manager.get("t", 0) is None
    assert os.listdir(_dirs(tmp_path, 1)[0]) == [RECORDS_VALIDATED_MARKER]
    assert decode(slice_.read_bytes())[0][0] == 0  # an in-flight fetch can still finish
    manager.close()


def test_interrupted_deletions_are_removed_at_start(tmp_path: Path, clock: ManualClock) -> None:
    root = Path(_dirs(tmp_path, 1)[0])
    (root / "t-0.0123abcd-delete").mkdir(parents=True)
    (root / "t-0.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (root / "not a partition").mkdir()
    manager = LogManager([str(root)], clock, LogConfig())
    assert manager.partitions() == []
    assert sorted(os.listdir(root)) == [RECORDS_VALIDATED_MARKER, "not a partition"]
    manager.close()


def test_retention_deletes_in_slices_between_which_a_deleted_log_is_left(tmp_path: Path,
                                                                           clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    config = replace(LogConfig(), segment_bytes=500)
    logs = [manager.create("t", partition, None, config) for partition in range(3)]
    for log in logs:
        for _ in range(40):
            log.append(batches_of(make_batch(values(3, size=40))), 0)
    counts = [len(log.segments) for log in logs]
    assert min(counts) > 2 * RETENTION_SEGMENTS_PER_SLICE
    manager.update_config("t", replace(config, retention_ms=1000))
    clock.advance(1001)
    slices = []
    for deleted in manager.retention_slices(clock.time_ms()):
        slices.append(deleted)
        if len(slices) == 1:  # while clients are served: the third partition is deleted
            assert manager.delete("t", 2)
    assert all(0 < deleted <= RETENTION_SEGMENTS_PER_SLICE for deleted in slices)
    # Every segment of the first two, the expired active ones rolled first; nothing of the deleted one.
    assert sum(slices) == counts[0] + counts[1]
    assert all(log.log_start_offset == log.log_end_offset == 120 for log in logs[:2])
    assert manager.get("t", 2) is None


def test_a_log_deletes_at_most_the_segments_it_is_given_and_rolls_only_for_the_last(
        tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None, replace(LogConfig(), segment_bytes=500, retention_bytes=0))
    for _ in range(12):
        log.append(batches_of(make_batch(values(3, size=40))), 0)
    count = len(log.segments)
    assert log.apply_retention(clock.time_ms(), count - 1) == count - 1
    assert len(log.segments) == 1 and log.log_start_offset < log.log_end_offset  # the active one is kept
    assert log.apply_retention(clock.time_ms(), 5) == 1  # now rolled, then deleted
    assert (len(log.segments), log.log_start_offset, log.log_end_offset) == (1, 36, 36)


def test_config_updates_retention_and_rolling(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None, replace(LogConfig(), segment_bytes=500))
    for _ in range(8):
        log.append(batches_of(make_batch(values(3, size=40))), 0)
    assert len(log.segments) > 2
    manager.update_config("t", replace(LogConfig(), segment_bytes=500, retention_ms=1000, segment_ms=60_000))
    assert log.config.retention_ms == 1000
    clock.advance(1001)
    segments = len(log.segments)
    assert manager.run_retention(clock.time_ms()) == segments  # the expired active segment is rolled first
    assert log.log_start_offset == log.log_end_offset == 24
    log.append(batches_of(make_batch(values(1), timestamp_ms=clock.time_ms())), 0)
    clock.advance(60_001)
    manager.roll_and_flush_due(clock.time_ms())
    assert log.segments[-1].size_bytes == 0
    assert log.recovery_point == log.log_end_offset
    manager.close()


def test_describe_log_dirs(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, LogConfig())
    manager.create("a", 0, None).append(batches_of(make_batch(values(3))), 0)
    manager.create("b", 0, None)
    described = manager.describe_log_dirs()
    assert [d.path for d in described] == _dirs(tmp_path)
    partitions = {(p.topic, p.partition): p for d in described for p in d.partitions}
    assert partitions[("a", 0)].size_bytes > 0 and partitions[("b", 0)].size_bytes == 0
    assert all(p.offset_lag == 0 for p in partitions.values())
    assert all(d.error == ErrorCode.none and d.total_bytes > 0 for d in described)
    manager.close()


def test_full_disk_on_append(tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None)
    log.append(batches_of(make_batch(values(2))), 0)

    def full(*args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", full)
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(2))), 0)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert [o for o, _ in decode(log.read(0, 1000, True).read_bytes())] == [0, 1]
    monkeypatch.undo()
    manager.close()


def test_an_fsync_error_takes_its_directory_offline_and_leaves_the_others_working(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(_dirs(tmp_path, 2), clock, LogConfig(flush_messages=1))
    topic_id = uuid.uuid4()
    sick, healthy, neighbour = (manager.create("t", p, topic_id, LogConfig(flush_messages=1)) for p in range(3))
    assert os.path.dirname(neighbour.directory) == os.path.dirname(sick.directory)
    sick_dir = sick.directory
    real_fsync = os.fsync

    def failing_fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(sick_dir):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(KafkaError) as failed:
        sick.append(batches_of(make_batch(values(2))), 0)
        sick.flush()
    assert failed.value.code == ErrorCode.kafka_storage_error
    # After a failed fsync nothing in that directory can be trusted (Kafka takes it offline too).
    assert manager.offline_dirs == {os.path.dirname(sick_dir)}
    with pytest.raises(KafkaError) as failed:
        neighbour.append(batches_of(make_batch(values(1))), 0)
    assert failed.value.code == ErrorCode.kafka_storage_error
    healthy.append(batches_of(make_batch(values(3))), 0)
    healthy.flush()
    manager.roll_and_flush_due(clock.time_ms() + 10**9)  # skips the offline directory, carries on with the rest
    healthy.append(batches_of(make_batch(values(1))), 0)
    assert healthy.log_end_offset == 4
    monkeypatch.setattr(os, "fsync", real_fsync)
    manager.close()


def test_the_periodic_pass_visits_only_logs_with_something_due(tmp_path: Path, clock: ManualClock) -> None:
    config = replace(LogConfig(), segment_ms=60_000)
    manager = LogManager(_dirs(tmp_path, 1), clock, config)
    idle = [manager.create("idle", p, None, config) for p in range(50)]
    busy = manager.create("busy", 0, None, config)
    manager.roll_and_flush_due(clock.time_ms())
    assert all(manager.maintenance_due_ms("idle", p) is None for p in range(50))
    assert manager.maintenance_due_ms("busy", 0) is None  # empty: nothing can become due before a write

    busy.append(batches_of(make_batch(values(3), timestamp_ms=clock.time_ms())), 0)
    manager.roll_and_flush_due(clock.time_ms())
    assert manager.maintenance_due_ms("busy", 0) == clock.time_ms() + 60_001  # rolls once older than segment.ms
    clock.advance(60_001)
    manager.roll_and_flush_due(clock.time_ms())
    assert len(busy.segments) == 2 and busy.segments[-1].size_bytes == 0
    manager.roll_and_flush_due(clock.time_ms())  # the rolled segment is fsynced by the next pass at the latest
    assert busy.recovery_point == busy.log_end_offset == 3
    due = manager.maintenance_due_ms("busy", 0)
    assert due is None or due >= 2**62  # flush.ms is "never" by default
    assert all(len(log.segments) == 1 for log in idle)
    manager.close()


def test_a_log_reopened_with_data_still_rolls_by_age(tmp_path: Path, clock: ManualClock) -> None:
    config = replace(LogConfig(), segment_ms=60_000)
    manager = LogManager(_dirs(tmp_path, 1), clock, config)
    manager.create("t", 0, None, config).append(batches_of(make_batch(values(2), timestamp_ms=clock.time_ms())), 0)
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, config, topic_configs={"t": config})
    clock.advance(60_001)
    again.roll_and_flush_due(clock.time_ms())
    reopened = again.get("t", 0)
    assert reopened is not None and len(reopened.segments) == 2
    again.close()


def test_closing_unchanged_logs_costs_no_fsync_per_log(tmp_path: Path, clock: ManualClock,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    for p in range(40):
        manager.create("t", p, None).append(batches_of(make_batch(values(p % 3 + 1))), 0)
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    fsyncs = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    again.close()
    monkeypatch.undo()
    assert len(fsyncs) <= 2, fsyncs  # the log directory's marker and its directory, nothing per log
    third = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    for p in range(40):
        reopened = third.get("t", p)
        assert reopened is not None and reopened.log_end_offset == p % 3 + 1 == reopened.recovery_point
        assert [o for o, _ in decode(reopened.read(0, 10_000, True).read_bytes())] == list(range(p % 3 + 1))
    third.close()


def test_a_log_appended_to_after_a_restart_is_flushed_at_close(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None
    reopened.append(batches_of(make_batch(values(3))), 0)
    again.close()
    third = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    last = third.get("t", 0)
    assert last is not None and last.log_end_offset == last.recovery_point == 5
    third.close()


def test_the_periodic_pass_flushes_when_flush_ms_has_passed(tmp_path: Path, clock: ManualClock) -> None:
    config = replace(LogConfig(), flush_ms=1000)
    manager = LogManager(_dirs(tmp_path, 1), clock, config)
    log = manager.create("t", 0, None, config)
    log.append(batches_of(make_batch(values(4))), 0)
    manager.roll_and_flush_due(clock.time_ms())
    assert log.recovery_point == 0
    clock.advance(1000)
    manager.roll_and_flush_due(clock.time_ms())
    assert log.recovery_point == log.log_end_offset == 4


def test_a_leadership_epoch_reaches_the_file_with_the_first_append(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None)
    log.leader_epochs.assign(3, log.log_end_offset, write=False)  # as the replica manager does on leading
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.leader_epochs.entries == ()  # nothing was written in epoch 3
    reopened.leader_epochs.assign(4, 0, write=False)
    reopened.append(batches_of(make_batch(values(2))), 4)  # the leader stamps its epoch on the batch
    again.close()
    third = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    last = third.get("t", 0)
    assert last is not None and [tuple(e) for e in last.leader_epochs.entries] == [(4, 0)]
    third.close()


def test_closing_a_new_empty_log_writes_nothing_beside_its_segment(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    log = manager.create("t", 0, None)
    manager.close()
    # No offset checkpoints, producer snapshot, leader epochs or marker of its own: absent, they read as what an
    # empty log holds, and the log directory's marker says it closed cleanly.
    assert sorted(os.listdir(log.directory)) == ["00000000000000000000.log"]
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None
    assert (reopened.log_start_offset, reopened.log_end_offset, reopened.recovery_point) == (0, 0, 0)
    reopened.append(batches_of(make_batch(values(2))), 0)
    again.close()
    third = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    last = third.get("t", 0)
    assert last is not None and last.log_end_offset == last.recovery_point == last.high_watermark == 2
    third.close()


def test_a_clean_close_writes_kafkas_log_dir_checkpoints_and_the_next_start_defers_every_log(
        tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    for p in range(3):
        manager.create("t", p, None).append(batches_of(make_batch(values(p + 1))), 0)
    manager.get("t", 2).delete_records_before(1)  # type: ignore[union-attr]
    manager.close(broker_epoch=42)
    log_dir = Path(_dirs(tmp_path, 1)[0])
    assert (log_dir / "recovery-point-offset-checkpoint").read_text() == "0\n3\nt 0 1\nt 1 2\nt 2 3\n"
    assert (log_dir / "log-start-offset-checkpoint").read_text() == "0\n3\nt 0 0\nt 1 0\nt 2 1\n"
    assert (log_dir / "replication-offset-checkpoint").read_text() == "0\n3\nt 0 1\nt 1 2\nt 2 3\n"
    assert (log_dir / CLEAN_SHUTDOWN_MARKER).read_text() == '{"version": 0, "brokerEpoch": 42}'

    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    assert again.previous_broker_epoch == 42
    logs = [again.get("t", p) for p in range(3)]
    assert all(log is not None and not log.loaded for log in logs)
    assert [(log.log_start_offset, log.log_end_offset, log.high_watermark) for log in logs if log] == \
        [(0, 1, 1), (0, 2, 2), (1, 3, 3)]
    first = logs[1]
    assert first is not None
    first.high_watermark_follows_log_end = False
    first.high_watermark = 1  # what the owner does while the log is deferred stands once it loads
    first.begin_leader_epoch(7)
    assert not first.loaded
    assert [o for o, _ in decode(first.read(0, 10_000, True, 2).read_bytes())] == [0, 1]  # the first read loads it
    assert first.loaded and first.high_watermark == 1 and first.leader_epochs.latest_epoch == 7
    again.close()
    # A log never loaded keeps its offsets through the next close; a crash makes the checkpoints untrusted.
    third = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    assert third.previous_broker_epoch == -1  # the marker was written without an epoch
    never_loaded = third.get("t", 2)
    assert never_loaded is not None and (never_loaded.log_start_offset, never_loaded.log_end_offset) == (1, 3)
    third.close()


def test_sizes_of_deferred_logs_come_from_their_directories_without_loading_them(
        tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig(segment_bytes=200))
    manager.create("t", 0, None).append(batches_of(make_batch(values(1))), 0)
    for _ in range(5):  # small segments: several files
        manager.get("t", 0).append(batches_of(make_batch(values(3))), 0)  # type: ignore[union-attr]
    manager.create("t", 1, None)
    loaded = {p: (log.segment_count, log.size_bytes) for p in (0, 1) if (log := manager.get("t", p))}
    assert loaded[0][0] > 1 and loaded[0][1] > 0 and loaded[1] == (1, 0)
    manager.close()

    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig(segment_bytes=200))
    # What a metrics scrape and DescribeLogDirs ask of every log.
    deferred = {p: (log.segment_count, log.size_bytes) for p in (0, 1) if (log := again.get("t", p))}
    described = {p.partition: p.size_bytes for d in again.describe_log_dirs() for p in d.partitions}
    assert deferred == loaded and described == {0: loaded[0][1], 1: 0}
    reopened = [again.get("t", p) for p in (0, 1)]
    assert all(log is not None and not log.loaded for log in reopened)
    again.close()


def test_after_a_crash_the_log_dir_checkpoints_are_ignored_and_every_log_recovers(
        tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    for p in range(2):
        manager.create("t", p, None).append(batches_of(make_batch(values(2))), 0)
    manager.close(broker_epoch=5)
    running = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    written = running.get("t", 0)
    assert written is not None and not written.loaded
    written.append(batches_of(make_batch(values(3))), 0)  # loads it, then moves it past the checkpoints
    written.flush()
    # kill -9: nothing is closed, so the directory has no marker and its checkpoints still say 2 for t-0.
    after_crash = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    assert after_crash.previous_broker_epoch == -1
    recovered = [after_crash.get("t", p) for p in range(2)]
    assert all(log is not None and log.loaded for log in recovered)
    assert [log.log_end_offset for log in recovered if log] == [5, 2]
    assert [o for o, _ in decode(recovered[0].read(0, 10_000, True).read_bytes())] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    after_crash.close()


def test_unreadable_log_dir_checkpoints_open_every_log_from_its_own_files(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    (Path(_dirs(tmp_path, 1)[0]) / "replication-offset-checkpoint").write_text("0\n7\nt 0 2\n")  # a wrong count
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.loaded and reopened.log_end_offset == 2
    again.close()


@pytest.mark.parametrize("content", [
    b"", b"0\n", b"1\n1\nt 0 2\n", b"0\n1\nt zero 2\n", b"0\n1\nt 0\n", b"0\n2147483647\nt 0 2\n",
    b"\x00\xff\xfe garbage", b"0\n1\n" + b"t" * 100_000 + b" 0 2\n",
])
def test_hostile_log_dir_checkpoints_open_every_log_from_its_own_files(tmp_path: Path, clock: ManualClock,
                                                                        content: bytes) -> None:
    """Empty, truncated, another version, non-numbers, a count far beyond the lines, binary, a huge name: the
    file is not believed, and the log opens from its own files with its records."""
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    (Path(_dirs(tmp_path, 1)[0]) / "recovery-point-offset-checkpoint").write_bytes(content)
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.loaded and reopened.log_end_offset == 2
    again.close()


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"version": 0}', b'{"brokerEpoch": "7"}', b"\xff\xfe"])
def test_a_clean_shutdown_marker_without_a_readable_epoch_names_none(tmp_path: Path, clock: ManualClock,
                                                                     content: bytes) -> None:
    """A marker whose broker epoch cannot be read still says the logs closed cleanly, but names no previous epoch
    (-1), so the controller re-elects as after any unknown restart."""
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    (Path(_dirs(tmp_path, 1)[0]) / CLEAN_SHUTDOWN_MARKER).write_bytes(content)
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    assert again.previous_broker_epoch == -1
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.log_end_offset == 2
    again.close()


def test_deferred_logs_with_records_are_loaded_by_the_periodic_pass(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    manager.create("empty", 0, None)
    manager.create("full", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    again.roll_and_flush_due(clock.time_ms())
    assert again.get("full", 0).loaded  # type: ignore[union-attr]
    assert not again.get("empty", 0).loaded  # type: ignore[union-attr]  # nothing to roll or retain
    assert again.run_retention(clock.time_ms()) == 0 and not again.get("empty", 0).loaded  # type: ignore[union-attr]
    again.close()


def test_unrecorded_assignments_name_only_logs_opened_created_or_moved_since_recorded(
        tmp_path: Path, clock: ManualClock) -> None:
    dirs = _dirs(tmp_path)
    ids = {dirs[0]: "dir-a", dirs[1]: "dir-b"}
    manager = LogManager(dirs, clock, LogConfig(), directory_ids=ids)
    topic_id = uuid.uuid4()
    for p in range(4):
        manager.create("t", p, topic_id)
    pending = manager.unrecorded_assignments()
    assert sorted((topic, p) for _, topic, p in pending) == [("t", p) for p in range(4)]
    assert all(d == ids[str(manager.log_dir_of(topic, p))] for d, topic, p in pending)
    manager.assignments_recorded([("t", 0), ("t", 1)])
    assert sorted(p for _, _, p in manager.unrecorded_assignments()) == [2, 3]
    manager.assignments_recorded([("t", 2), ("t", 3)])
    assert manager.unrecorded_assignments() == []

    # The metadata naming the directory the log is in changes nothing; naming another one reports it again.
    where = ids[str(manager.log_dir_of("t", 0))]
    manager.check_assignment("t", 0, where)
    assert manager.unrecorded_assignments() == []
    manager.check_assignment("t", 0, "")
    assert manager.unrecorded_assignments() == [(where, "t", 0)]
    manager.check_assignment("t", 9, "")  # no such log: nothing to report
    manager.delete("t", 0)
    assert manager.unrecorded_assignments() == []

    # A directory going offline: its logs are no longer reported.
    manager.check_assignment("t", 1, "")
    manager.check_assignment("t", 2, "")
    offline = str(manager.log_dir_of("t", 1))
    manager.mark_offline(offline, "test")
    assert [(t, p) for _, t, p in manager.unrecorded_assignments()] == \
        [("t", p) for p in (1, 2) if manager.log_dir_of("t", p) != offline]
    manager.close()

    # Every log opened at a start is reported once.
    again = LogManager(dirs, clock, LogConfig(), directory_ids=ids)
    assert sorted(p for _, _, p in again.unrecorded_assignments()) == [1, 2, 3]
    again.close()


def test_a_deferred_new_log_makes_its_directory_on_first_use_and_nothing_before(
        tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    topic_id = uuid.uuid4()
    log = manager.create("t", 0, topic_id, defer=True)
    assert not os.path.exists(log.directory) and not log.on_disk and not log.loaded
    # What clients and tools ask of an empty partition is answered without making it: offsets, sizes, a read at the
    # end (a follower or consumer waiting for records), the last stable offset.
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.last_stable_offset) == (0, 0, 0, 0)
    assert (log.segment_count, log.size_bytes, log.topic_id) == (1, 0, topic_id)
    assert log.read(0, 1000, True).read_bytes() == b""
    assert [p.size_bytes for d in manager.describe_log_dirs() for p in d.partitions] == [0]
    assert log.latest_epoch == -1
    log.begin_leader_epoch(4)
    assert log.latest_epoch == 4
    assert not os.path.exists(log.directory)

    log.append(batches_of(make_batch(values(3))), 4)
    assert log.loaded and log.on_disk and log.log_end_offset == 3
    assert {"00000000000000000000.log", "partition.metadata"} <= set(os.listdir(log.directory))
    manager.close()
    again = LogManager(_dirs(tmp_path, 1), clock, LogConfig())
    reopened = again.get("t", 0)
    assert reopened is not None and reopened.topic_id == topic_id and reopened.leader_epochs.entries[-1].epoch == 4
    assert [o for o, _ in decode(reopened.read(0, 10_000, True).read_bytes())] == [0, 1, 2]
    again.close()


def test_the_periodic_passes_leave_new_logs_never_used_unmade(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path, 1), clock, LogConfig(retention_ms=1))
    log = manager.create("t", 0, None, defer=True)
    clock.advance(10_000)
    manager.roll_and_flush_due(clock.time_ms())
    manager.run_retention(clock.time_ms())
    assert not log.on_disk and not os.path.exists(log.directory)
    manager.close()


def test_closing_or_deleting_a_new_log_never_made_leaves_nothing_behind(tmp_path: Path, clock: ManualClock) -> None:
    log_dir = _dirs(tmp_path, 1)[0]
    manager = LogManager([log_dir], clock, LogConfig())
    manager.create("t", 0, None, defer=True)
    manager.create("t", 1, None, defer=True).append(batches_of(make_batch(values(1))), 0)
    doomed = manager.create("u", 0, None, defer=True)
    assert manager.delete("u", 0) and not os.path.exists(doomed.directory)
    manager.close()
    # Only the log that was written exists, on disk and in the log directory's checkpoints; at the next start the
    # broker creates the other again from the metadata.
    assert sorted(n for n in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, n))) == ["t-1"]
    assert (Path(log_dir) / "recovery-point-offset-checkpoint").read_text() == "0\n1\nt 1 1\n"
    again = LogManager([log_dir], clock, LogConfig())
    assert again.partitions() == [("t", 1)]
    again.close()


def test_a_deferred_create_reads_a_directory_that_is_already_there(tmp_path: Path, clock: ManualClock) -> None:
    log_dir = _dirs(tmp_path, 1)[0]
    manager = LogManager([log_dir], clock, LogConfig())
    manager.create("t", 0, None).append(batches_of(make_batch(values(2))), 0)
    manager.close()
    again = LogManager([log_dir], clock, LogConfig())
    # The metadata may name a partition the log manager did not open (its directory is made by hand, or the manager
    # forgot it): an existing directory is never replaced by an empty deferred log.
    assert again.delete("t", 0) is True
    os.makedirs(os.path.join(log_dir, "t-0"))
    (Path(log_dir) / "t-0" / "00000000000000000000.log").write_bytes(b"")
    log = again.create("t", 0, None, defer=True)
    assert log.on_disk and log.loaded
    again.close()


def test_the_cleaner_leaves_empty_compacted_logs_unloaded(tmp_path: Path, clock: ManualClock) -> None:
    compacted = LogConfig(cleanup_policy=("compact",))
    manager = LogManager(_dirs(tmp_path, 1), clock, compacted)
    new = manager.create("c", 0, None, compacted, defer=True)
    manager.run_cleaner(clock.time_ms())
    assert not new.on_disk
    manager.close()
