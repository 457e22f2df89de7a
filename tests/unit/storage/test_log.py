from __future__ import annotations

import os
import struct
import time
import uuid
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import parse_header, split_batches
from moldau.storage import checkpoint_writer, drop_behind
from moldau.storage.leader_epoch_cache import EpochEntry
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig, TimestampType
from tests.unit.storage.batches import START_MS, batches_of, decode, decode_with_timestamps, make_batch, values
from tests.unit.storage.conftest import OpenLog, crash


def _append(log: PartitionLog, n: int, *, epoch: int = 0, size: int = 0, **kwargs: object) -> tuple[int, int]:
    result = log.append(batches_of(make_batch(values(n, size=size), **kwargs)), epoch)  # type: ignore[arg-type]
    return result.first_offset, result.last_offset


def _epochs(log: PartitionLog) -> tuple[EpochEntry, ...]:
    """The log's leader epochs, read anew (mypy would keep what an earlier assert narrowed the attribute to)."""
    return log.leader_epochs.entries


def _all_records(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = start
    while offset < log.high_watermark:
        data = log.read(offset, 1 << 20, True).read_bytes()
        records = decode(data)
        out.extend(r for r in records if r[0] >= offset)
        offset = parse_last_next_offset(data)
    return out


def parse_last_next_offset(data: bytes) -> int:
    position, next_offset = 0, 0
    while position < len(data):
        header = parse_header(data, position)
        next_offset, position = header.next_offset, position + header.total_size
    return next_offset


def test_offsets_are_assigned_consecutively_across_batches(open_log: OpenLog) -> None:
    log = open_log()
    result = log.append(batches_of(make_batch(values(3)), make_batch(values(2), compression=4)), 5)
    assert (result.first_offset, result.last_offset, result.log_append_time_ms) == (0, 4, -1)
    assert (result.log_start_offset, result.duplicate) == (0, False)
    assert _append(log, 4) == (5, 8)
    assert (log.log_end_offset, log.high_watermark) == (9, 9)
    data = log.read(0, 1 << 20, False).read_bytes()
    assert [o for o, _ in decode(data)] == list(range(9))
    assert parse_header(data).partition_leader_epoch == 5


def test_an_own_batch_is_stored_as_a_checked_one(open_log: OpenLog, tmp_path: Path) -> None:
    own, checked = open_log(name="own-0"), open_log(name="checked-0")
    for n in (3, 1, 5):
        batch = make_batch(values(n))
        assert own.append(batches_of(batch), 2, own=True) == checked.append(batches_of(batch), 2)
    assert own.read(0, 1 << 20, False).read_bytes() == checked.read(0, 1 << 20, False).read_bytes()
    assert (own.log_end_offset, own.high_watermark) == (9, 9)


def test_an_own_batch_still_meets_the_size_limits(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=500, segment_bytes=1200)
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(2, size=600))), 0, own=True)
    assert e.value.code == ErrorCode.message_too_large
    small = make_batch(values(3, size=100))
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(small, small, small), 0, own=True)
    assert e.value.code == ErrorCode.record_list_too_large
    with pytest.raises(ValueError):  # a producer's batch never skips the producer checks
        log.append(batches_of(make_batch(values(1), producer_id=7)), 0, own=True)
    assert log.log_end_offset == 0 and log.size_bytes == 0


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_every_codec_round_trips_byte_for_byte(open_log: OpenLog, compression: int) -> None:
    log = open_log()
    raw = make_batch(values(20, size=50), compression=compression)
    assert parse_header(raw).compression == compression
    log.append(batches_of(raw), 0)
    log.append(batches_of(raw), 0)
    data = log.read(20, 1 << 20, False).read_bytes()
    assert data[16:] == raw[16:]
    assert decode(data) == [(20 + i, v) for i, v in enumerate(values(20, size=50))]


def test_segments_roll_by_size(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=1000)
    for _ in range(10):
        _append(log, 5, size=40)
    assert len(log.segments) > 3
    assert all(s.size_bytes <= 1000 for s in log.segments)
    names = sorted(p.name for p in (tmp_path / "topic-0").iterdir() if p.suffix == ".log")
    assert names[0] == "00000000000000000000.log"
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    assert _all_records(log) == [(i, v) for i in range(50) for v in [values(5, size=40)[i % 5]]]


def test_segments_roll_by_time(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_ms=1000)
    _append(log, 2)
    clock.advance(500)
    _append(log, 2)
    assert len(log.segments) == 1
    clock.advance(501)
    _append(log, 2, timestamp_ms=clock.time_ms())
    assert [s.base_offset for s in log.segments] == [0, 4]
    assert not log.roll_if_due(clock.time_ms())
    clock.advance(1001)
    assert log.roll_if_due(clock.time_ms())
    assert [s.base_offset for s in log.segments] == [0, 4, 6]
    assert not log.roll_if_due(clock.time_ms() + 10_000)  # the new active segment is empty


def test_segments_roll_by_time_less_their_roll_jitter(open_log: OpenLog, clock: ManualClock) -> None:
    """segment.jitter.ms: each segment draws its jitter once (below the bound), and rolls that much earlier."""
    log = open_log(segment_ms=1000, segment_jitter_ms=400)
    draws: list[int] = []
    jitters = iter([300, 100])

    def draw(bound: int) -> int:
        draws.append(bound)
        return next(jitters)

    log.random_below = draw
    _append(log, 2)
    assert log.maintenance_due_ms() == clock.time_ms() + 700 + 1
    clock.advance(700)
    _append(log, 2)
    assert len(log.segments) == 1 and not log.roll_if_due(clock.time_ms())
    clock.advance(1)
    _append(log, 2, timestamp_ms=clock.time_ms())  # 701 ms after the first: past 1000 - 300
    assert [s.base_offset for s in log.segments] == [0, 4]
    clock.advance(900)  # the new segment drew 100
    assert not log.roll_if_due(clock.time_ms())
    clock.advance(1)
    assert log.roll_if_due(clock.time_ms())
    assert draws == [400, 400]  # once per segment, not per append


def test_roll_jitter_is_bounded_by_the_roll_age(open_log: OpenLog, clock: ManualClock) -> None:
    """A jitter above segment.ms (or a compacted log's max.compaction.lag.ms) is drawn below that age instead."""
    log = open_log(segment_ms=1000, segment_jitter_ms=10_000, cleanup_policy=("compact",), max_compaction_lag_ms=500)
    draws: list[int] = []

    def draw(bound: int) -> int:
        draws.append(bound)
        return bound - 1

    log.random_below = draw
    _append(log, 2)
    assert draws == [500]
    assert log.maintenance_due_ms() == clock.time_ms() + 1 + 1


def test_no_jitter_draws_nothing(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_ms=1000)
    log.random_below = lambda bound: pytest.fail("drew a jitter with segment.jitter.ms=0")
    _append(log, 2)
    assert log.maintenance_due_ms() == clock.time_ms() + 1000 + 1


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(open_log: OpenLog) -> None:
    log = open_log()
    _append(log, 5)
    _append(log, 5)
    data = log.read(7, 1 << 20, False).read_bytes()
    assert [o for o, _ in decode(data)] == [5, 6, 7, 8, 9]


def test_max_bytes_and_min_one_batch(open_log: OpenLog) -> None:
    log = open_log()
    raw = make_batch(values(4, size=100))
    for _ in range(5):
        log.append(batches_of(raw), 0)
    size = len(raw)
    assert log.read(0, size * 2 + size // 2, False).size_bytes == size * 2
    assert log.read(0, size - 1, False).slices == ()
    assert log.read(0, size - 1, True).size_bytes == size
    assert log.read(0, 0, True).size_bytes == size
    assert log.read(6, size * 3, False).size_bytes == size * 3
    whole = log.read(0, 10**9, False)
    assert whole.size_bytes == size * 5 and len(whole.slices) == 1


def test_offset_out_of_range(open_log: OpenLog) -> None:
    log = open_log()
    _append(log, 3)
    for offset in (-1, 4):
        with pytest.raises(KafkaError) as e:
            log.read(offset, 100, True)
        assert e.value.code == ErrorCode.offset_out_of_range
    at_end = log.read(3, 100, True)
    assert at_end.slices == () and at_end.log_end_offset == 3


def test_reads_stop_at_high_watermark_and_max_offset(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=600)
    for _ in range(6):
        _append(log, 2, size=50)
    assert len(log.segments) > 1
    log.high_watermark_follows_log_end = False
    log.high_watermark = 6
    assert [o for o, _ in decode(log.read(0, 10**6, False).read_bytes())][-1] == 5
    assert log.read(6, 10**6, True).slices == ()
    assert [o for o, _ in decode(log.read(0, 10**6, False, max_offset=4).read_bytes())][-1] == 3
    assert decode(log.read(6, 10**6, False, max_offset=12).read_bytes())[0][0] == 6


def test_reads_use_the_index_from_any_offset(open_log: OpenLog) -> None:
    log = open_log(index_interval_bytes=100, segment_bytes=5000)
    for n in range(1, 40):
        _append(log, n % 4 + 1, size=30)
    assert log.segments[0].offset_index.entries > 5
    expected = _all_records(log)
    for offset in range(log.log_end_offset):
        data = log.read(offset, 1, True).read_bytes()
        records = decode(data)
        assert records[0][0] <= offset <= records[-1][0]
        assert next(r for r in records if r[0] >= offset) == expected[offset]


def test_message_size_limits(open_log: OpenLog) -> None:
    log = open_log(max_message_bytes=500, segment_bytes=1200)
    with pytest.raises(KafkaError) as e:
        _append(log, 2, size=600)
    assert e.value.code == ErrorCode.message_too_large
    small = make_batch(values(3, size=100))
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(small, small, small), 0)
    assert e.value.code == ErrorCode.record_list_too_large
    assert log.log_end_offset == 0 and log.size_bytes == 0  # all or nothing


def test_create_time_bounds(open_log: OpenLog) -> None:
    log = open_log(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    for ts in (START_MS - 1001, START_MS + 1001):
        with pytest.raises(KafkaError) as e:
            log.append(batches_of(make_batch(values(1)), make_batch(values(1), timestamp_ms=ts)), 0)
        assert e.value.code == ErrorCode.invalid_timestamp
    assert log.log_end_offset == 0
    _append(log, 1, timestamp_ms=START_MS + 1000)
    _append(log, 1, timestamp_ms=-1)


def test_log_append_time(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    clock.advance(7)
    result = log.append(batches_of(make_batch(values(3), timestamp_ms=5)), 0)
    assert result.log_append_time_ms == START_MS + 7
    data = log.read(0, 10**6, False).read_bytes()
    assert decode_with_timestamps(data) == [(i, START_MS + 7) for i in range(3)]
    split_batches(data)  # valid CRC
    assert log.offset_for_timestamp(START_MS) == (0, START_MS + 7)


def test_control_batches_from_clients_are_refused(open_log: OpenLog) -> None:
    import struct

    import crc32c

    raw = bytearray(make_batch(values(1), producer_id=1, producer_epoch=0, base_sequence=0, transactional=True))
    struct.pack_into(">h", raw, 21, 0x30)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(KafkaError) as e:
        open_log().append(split_batches(bytes(raw)), 0)
    assert e.value.code == ErrorCode.invalid_record


def test_retention_by_time_moves_log_start(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=700, retention_ms=10_000)
    for i in range(12):
        _append(log, 2, size=60, timestamp_ms=START_MS + i * 1000)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    assert log.apply_retention(START_MS + 5_000) == 0
    now = START_MS + 10_000 + log.segments[1].largest_timestamp - START_MS + 1
    deleted = log.apply_retention(now)
    assert deleted == 2
    assert log.log_start_offset == bases[2] == log.segments[0].base_offset
    assert not (Path(log.directory) / f"{bases[0]:020d}.log").exists()
    with pytest.raises(KafkaError):
        log.read(bases[2] - 1, 100, True)
    # When everything has expired the active segment is rolled and deleted too.
    end = log.log_end_offset
    assert log.apply_retention(START_MS + 10**6) > 0
    assert log.log_start_offset == end == log.log_end_offset
    assert [s.base_offset for s in log.segments] == [end]
    assert _append(log, 1) == (end, end)


def test_retention_by_size(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    for _ in range(12):
        _append(log, 2, size=60)
    total = log.size_bytes
    sizes = [s.size_bytes for s in log.segments]
    deleted = log.apply_retention(START_MS)
    assert deleted > 0
    assert log.size_bytes == total - sum(sizes[:deleted])
    assert log.size_bytes >= 1500 > log.size_bytes - log.segments[0].size_bytes
    assert log.log_start_offset == log.segments[0].base_offset
    assert _all_records(log, log.log_start_offset)[0][0] == log.log_start_offset


def _deleted_files(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".deleted"))


def test_retention_renames_segments_then_unlinks_them_off_the_caller_after_the_delay(
        open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1, file_delete_delay_ms=1000)
    for _ in range(12):
        _append(log, 2, size=60)
    first = log.segments[0]
    fd, size, base = first.fd, first.size_bytes, first.base_offset
    assert log.apply_retention(START_MS) > 0
    directory = tmp_path / "topic-0"
    assert f"{base:020d}.log.deleted" in _deleted_files(directory)
    assert not (directory / f"{base:020d}.log").exists()
    assert len(os.pread(fd, size, 0)) == size  # a fetch already holding a slice of it still reads it
    log.apply_retention(START_MS + 999)
    assert f"{base:020d}.log.deleted" in _deleted_files(directory)
    log.apply_retention(START_MS + 1000)  # due: closed and unlinked on the worker thread
    deadline = time.monotonic() + 10
    while _deleted_files(directory) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _deleted_files(directory) == []
    assert _all_records(log, log.log_start_offset)[0][0] == log.log_start_offset


def test_deleted_segments_left_by_a_crash_are_removed_at_the_next_open(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    for _ in range(12):
        _append(log, 2, size=60)
    log.flush()
    assert log.apply_retention(START_MS) > 0
    start, end = log.log_start_offset, log.log_end_offset
    assert _deleted_files(tmp_path / "topic-0")
    crash(log)
    reopened = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    assert _deleted_files(tmp_path / "topic-0") == []
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
    assert [o for o, _ in _all_records(reopened, start)] == list(range(start, end))


def test_retention_writes_its_checkpoints_without_fsyncs_and_a_crash_that_loses_them_loses_nothing(
        open_log: OpenLog, tmp_path: Path, fsyncs: list[tuple[bool, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    # An fsync or rename there waited behind the file system freeing the deleted blocks, holding every client; the
    # segments left say where the log starts, so the log start is written on the worker thread, the leader epochs
    # without an fsync.
    monkeypatch.setattr(checkpoint_writer, "call_later", drop_behind.call_later)
    log = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    for epoch in range(12):
        _append(log, 2, size=60, epoch=epoch)
    log.flush()
    directory = tmp_path / "topic-0"
    before = {name: (directory / name).read_bytes() for name in ("log-start-offset", "leader-epoch-checkpoint")}
    fsyncs.clear()
    assert log.apply_retention(START_MS) > 0
    assert drop_behind.drain()
    assert not [name for on_loop, name in fsyncs if on_loop]
    assert any(name.startswith("log-start-offset") for _, name in fsyncs), fsyncs  # durably, on the worker
    assert (directory / "log-start-offset").read_text().strip() == str(log.log_start_offset)
    start, end = log.log_start_offset, log.log_end_offset
    assert _epochs(log)[0][1] == start
    # A crash before the kernel wrote them: the old checkpoints, the deleted segments gone all the same.
    crash(log)
    for name, data in before.items():
        (directory / name).write_bytes(data)
    for name in _deleted_files(directory):
        (directory / name).unlink()
    reopened = open_log(segment_bytes=700, retention_bytes=1500, retention_ms=-1)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (start, end)
    assert _epochs(reopened) == _epochs(log)
    assert [o for o, _ in _all_records(reopened, start)] == list(range(start, end))


def test_retention_is_skipped_for_compact_only(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700, retention_bytes=0, cleanup_policy=("compact",))
    for _ in range(12):
        _append(log, 2, size=60)
    assert log.apply_retention(START_MS + 10**10) == 0


def test_empty_cleanup_policy_keeps_everything_until_delete_records(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700, retention_bytes=0, retention_ms=1, cleanup_policy=())
    for _ in range(12):
        _append(log, 2, size=60)
    assert log.apply_retention(START_MS + 10**10) == 0 and log.log_start_offset == 0
    second = log.segments[1].base_offset
    assert log.delete_records_before(second) == second


def test_delete_records_before(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700)
    for _ in range(12):
        _append(log, 2, size=60)
    second = log.segments[1].base_offset
    assert log.delete_records_before(second + 1) == second + 1
    assert log.segments[0].base_offset == second
    assert log.log_start_offset == second + 1
    with pytest.raises(KafkaError) as e:
        log.read(second, 100, True)
    assert e.value.code == ErrorCode.offset_out_of_range
    # Reading at the log start returns the batch holding it.
    assert decode(log.read(second + 1, 1, True).read_bytes())[0][0] == second
    assert log.delete_records_before(3) == second + 1  # never backwards
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(log.high_watermark + 1)
    assert e.value.code == ErrorCode.offset_out_of_range
    assert log.delete_records_before(-1) == log.high_watermark == 24
    assert log.read(24, 100, True).slices == ()
    assert _append(log, 1) == (24, 24)


def test_offset_for_timestamp_and_max_timestamp(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=800, index_interval_bytes=50)
    for i in range(10):
        base = START_MS + i * 100
        ts = [base + 30, base + 10, base + 50, base + 20]
        log.append(batches_of(make_batch(values(4, size=60), timestamps=ts, compression=i % 5)), 0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, START_MS + 30)
    assert log.offset_for_timestamp(START_MS + 31) == (2, START_MS + 50)
    assert log.offset_for_timestamp(START_MS + 51) == (4, START_MS + 130)
    assert log.offset_for_timestamp(START_MS + 540) == (22, START_MS + 550)
    assert log.offset_for_timestamp(START_MS + 950) == (38, START_MS + 950)
    assert log.offset_for_timestamp(START_MS + 951) is None
    assert log.max_timestamp_offset() == (38, START_MS + 950)
    log.delete_records_before(23)
    assert log.offset_for_timestamp(0) == (23, START_MS + 520)


def test_max_timestamp_is_found_after_a_clean_restart(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=800, index_interval_bytes=50)
    for i in range(10):
        ts = [START_MS + 5, START_MS + (999 if i == 3 else i), START_MS + 1]
        log.append(batches_of(make_batch(values(3, size=60), timestamps=ts)), 0)
    assert log.max_timestamp_offset() == (10, START_MS + 999)
    log.close()
    log = open_log(segment_bytes=800, index_interval_bytes=50)
    assert log.max_timestamp_offset() == (10, START_MS + 999)
    assert log.offset_for_timestamp(START_MS + 500) == (10, START_MS + 999)


def test_empty_log(open_log: OpenLog) -> None:
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (0, 0, 0)
    assert log.read(0, 100, True).slices == ()
    assert log.offset_for_timestamp(0) is None and log.max_timestamp_offset() is None
    assert log.apply_retention(START_MS + 10**12) == 0


def test_truncate_to(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700)
    for _ in range(12):
        _append(log, 2, size=60)
    log.truncate_to(15)  # inside the batch 14..15: the whole batch goes
    assert log.log_end_offset == 14 == log.high_watermark
    assert _all_records(log)[-1][0] == 13
    assert _append(log, 2) == (14, 15)
    log.close()
    log = open_log(segment_bytes=700)
    assert log.log_end_offset == 16
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, len(log.segments)) == (0, 0, 1)


def test_topic_id_is_kept_in_partition_metadata(tmp_path: Path, clock: ManualClock) -> None:
    topic_id = uuid.uuid4()
    directory = str(tmp_path / "orders-3")
    log = PartitionLog.open(directory, LogConfig(), clock, topic_id)
    assert (log.topic, log.partition) == ("orders", 3)
    text = (tmp_path / "orders-3" / "partition.metadata").read_text()
    assert text.startswith("version: 0\ntopic_id: ") and len(text.split()[-1]) == 22
    log.close()
    assert PartitionLog.open(directory, LogConfig(), clock).topic_id == topic_id
    with pytest.raises(KafkaError) as e:
        PartitionLog.open(directory, LogConfig(), clock, uuid.uuid4())
    assert e.value.code == ErrorCode.inconsistent_topic_id


def test_checkpoints_are_written(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700)
    for _ in range(12):
        _append(log, 2, size=60)
    log.delete_records_before(5)
    log.flush()
    directory = Path(log.directory)
    assert (directory / "recovery-point").read_text() == "24\n"
    assert (directory / "log-start-offset").read_text() == "5\n"
    assert not any(name.endswith(".tmp") for name in os.listdir(directory))


# -- replication: follower appends, leader epochs, high watermark ------------------------------------------------


def _stored_at(raw: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """`raw` as the leader stored it: its base offset and partition leader epoch set (outside the CRC)."""
    batch = bytearray(raw)
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    return bytes(batch)


def _read_all(log: PartitionLog) -> bytes:
    out, offset = b"", log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20, True, max_offset=log.log_end_offset).read_bytes()
        out += data
        offset = parse_last_next_offset(data)
    return out


def test_follower_append_stores_bytes_and_offsets_as_given(open_log: OpenLog) -> None:
    log = open_log()
    log.high_watermark_follows_log_end = False
    raw = [_stored_at(make_batch(values(3)), 0, 2), _stored_at(make_batch(values(2), compression=1), 3, 2),
           _stored_at(make_batch(values(4), timestamp_ms=5), 5, 4)]
    result = log.append_as_follower(batches_of(*raw))
    assert (result.first_offset, result.last_offset, result.duplicate) == (0, 8, False)
    assert (log.log_end_offset, log.high_watermark) == (9, 0)  # the caller moves the high watermark
    assert _read_all(log) == b"".join(raw)
    assert _epochs(log) == ((2, 0), (4, 5))
    assert log.end_offset_for_epoch(2) == (2, 5) and log.end_offset_for_epoch(4) == (4, 9)
    log.high_watermark = 9
    assert [o for o, _ in _all_records(log)] == list(range(9))


def test_follower_append_accepts_gaps(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700)
    log.append_as_follower(batches_of(_stored_at(make_batch(values(2)), 0, 0)))
    gap = [_stored_at(make_batch(values(2, size=60)), 10 + 5 * i, 1) for i in range(8)]
    for i in range(0, 8, 2):  # rolls: a new segment starts at the first batch's offset
        log.append_as_follower(batches_of(*gap[i : i + 2]))
    assert log.log_end_offset == 47
    assert len(log.segments) > 1 and all(s.base_offset in (0, *(10 + 5 * i for i in range(8)))
                                         for s in log.segments)
    assert [o for o, _ in _all_records(log)] == [0, 1, *(o for i in range(8) for o in (10 + 5 * i, 11 + 5 * i))]
    assert decode(log.read(3, 100, True).read_bytes())[0][0] == 10
    assert _append(log, 1, epoch=3) == (47, 47)  # leader appends continue after the gap
    assert _epochs(log) == ((0, 0), (1, 10), (3, 47))


def test_follower_append_refuses_overlap_and_disorder_without_writing(open_log: OpenLog) -> None:
    log = open_log()
    log.append_as_follower(batches_of(_stored_at(make_batch(values(5)), 0, 1)))
    size = log.size_bytes
    for bad in (
        [_stored_at(make_batch(values(2)), 4, 1)],  # overlaps the log
        [_stored_at(make_batch(values(2)), 3, 1)],  # below the log end
        [_stored_at(make_batch(values(2)), 5, 1), _stored_at(make_batch(values(2)), 6, 1)],  # overlap
        [_stored_at(make_batch(values(2)), 8, 2), _stored_at(make_batch(values(2)), 5, 2)],  # backwards
    ):
        with pytest.raises(KafkaError) as e:
            log.append_as_follower(batches_of(*bad))
        assert e.value.code == ErrorCode.unknown_server_error
        assert "offset" in str(e.value)
    with pytest.raises(KafkaError):
        log.append_as_follower([])
    assert (log.log_end_offset, log.size_bytes) == (5, size)
    assert _epochs(log) == ((1, 0),)


def test_follower_append_too_large_for_a_segment_is_refused(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=600)
    raw = [_stored_at(make_batch(values(2, size=100)), 2 * i, 0) for i in range(4)]
    with pytest.raises(KafkaError) as e:
        log.append_as_follower(batches_of(*raw))
    assert e.value.code == ErrorCode.record_list_too_large
    assert log.log_end_offset == 0 and _epochs(log) == ()


def test_follower_append_write_failure_changes_nothing(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    import moldau.storage.segment as segment_module

    log = open_log()
    _append(log, 2, epoch=1)

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(segment_module, "write_all", fail)
    with pytest.raises(KafkaError) as e:
        log.append_as_follower(batches_of(_stored_at(make_batch(values(2)), 2, 5)))
    assert e.value.code == ErrorCode.kafka_storage_error
    assert log.log_end_offset == 2 and _epochs(log) == ((1, 0),)
    monkeypatch.undo()
    assert log.append_as_follower(batches_of(_stored_at(make_batch(values(2)), 2, 5))).last_offset == 3


def test_follower_appended_idempotent_batches_are_known_to_a_new_leader(open_log: OpenLog) -> None:
    log = open_log()
    first = make_batch(values(3), producer_id=7, producer_epoch=0, base_sequence=0)
    second = make_batch(values(2), producer_id=7, producer_epoch=0, base_sequence=3)
    log.append_as_follower(batches_of(_stored_at(first, 0, 1), _stored_at(second, 3, 1)))
    # This replica becomes the leader; the producer retries its last batch.
    retry = log.append(batches_of(second), 2)
    assert (retry.duplicate, retry.first_offset, retry.last_offset) == (True, 3, 4)
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(1), producer_id=7, producer_epoch=0, base_sequence=9)), 2)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    following = log.append(batches_of(make_batch(values(1), producer_id=7, producer_epoch=0, base_sequence=5)), 2)
    assert (following.duplicate, following.first_offset) == (False, 5)
    log.close()
    log = open_log()
    assert log.append(batches_of(second), 2).duplicate  # and after a restart


def test_leader_epochs_are_assigned_on_append_and_survive_reopen(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    _append(log, 2, epoch=0)
    _append(log, 2, epoch=0)
    _append(log, 3, epoch=3)
    _append(log, 1, epoch=2)  # an older epoch is never recorded
    assert _epochs(log) == ((0, 0), (3, 4))
    assert log.end_offset_for_epoch(0) == (0, 4)
    assert log.end_offset_for_epoch(3) == (3, 8)
    assert log.end_offset_for_epoch(1) == (0, 4)
    assert (tmp_path / "topic-0" / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 4\n"
    log.close()
    log = open_log()
    assert _epochs(log) == ((0, 0), (3, 4)) and log.leader_epochs.loaded_from_file


def test_leader_epochs_are_rebuilt_when_the_file_is_missing(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=700)
    for epoch in (0, 0, 1, 1, 1, 4, 4, 6):
        _append(log, 2, size=60, epoch=epoch)
    log.delete_records_before(3)
    entries = log.leader_epochs.entries
    assert entries == ((0, 3), (1, 4), (4, 10), (6, 14))
    log.close()
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").unlink()
    log = open_log(segment_bytes=700)
    assert _epochs(log) == entries
    assert (tmp_path / "topic-0" / "leader-epoch-checkpoint").exists()
    log.close()
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").write_text("rubbish")
    assert open_log(segment_bytes=700).leader_epochs.entries == entries


def test_leader_epochs_follow_truncation_and_retention(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700, retention_bytes=700, retention_ms=-1)
    for epoch in (0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5):
        _append(log, 2, size=60, epoch=epoch)
    assert _epochs(log) == ((0, 0), (1, 4), (2, 8), (3, 12), (4, 16), (5, 20))
    log.truncate_to(17)  # cuts the batch 16..17 whole
    assert log.log_end_offset == 16
    assert _epochs(log) == ((0, 0), (1, 4), (2, 8), (3, 12))
    assert log.end_offset_for_epoch(3) == (3, 16)
    assert log.end_offset_for_epoch(4) == (-1, -1)
    assert log.apply_retention(START_MS) > 0
    start = log.log_start_offset
    assert 4 < start < 8  # inside epoch 1: its entry moves up to the new log start
    assert _epochs(log) == ((1, start), (2, 8), (3, 12))
    log.delete_records_before(13)
    assert _epochs(log) == ((3, 13),)
    assert log.end_offset_for_epoch(1) == (1, 13)
    _append(log, 1, epoch=9)
    log.truncate_to(0)  # below the log start: the log restarts empty
    assert _epochs(log) == ()


def test_truncating_at_the_log_end_drops_an_epoch_nothing_was_written_in(open_log: OpenLog, tmp_path: Path
                                                                         ) -> None:
    log = open_log()
    _append(log, 2, epoch=1)
    log.leader_epochs.assign(4, log.log_end_offset)  # led epoch 4, wrote nothing in it
    assert _epochs(log) == ((1, 0), (4, 2))
    log.truncate_to(2)  # at the end: no record to cut, but the empty epoch goes
    assert log.log_end_offset == 2
    assert _epochs(log) == ((1, 0),)
    assert log.end_offset_for_epoch(1) == (1, 2)
    log.close()
    assert open_log().leader_epochs.entries == ((1, 0),)  # the checkpoint says so too


def test_leader_epochs_are_cut_after_a_torn_tail(open_log: OpenLog, tmp_path: Path) -> None:
    from tests.unit.storage.conftest import crash

    log = open_log()
    _append(log, 2, epoch=1)
    _append(log, 2, epoch=2)
    size = log.size_bytes
    crash(log)
    with open(tmp_path / "topic-0" / "00000000000000000000.log", "r+b") as f:
        f.truncate(size - 5)  # the epoch-2 batch is torn
    log = open_log()
    assert log.log_end_offset == 2
    assert _epochs(log) == ((1, 0),)


def test_high_watermark_checkpoint_survives_a_clean_restart(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    for _ in range(5):
        _append(log, 2)
    log.high_watermark_follows_log_end = False
    log.high_watermark = 6
    log.close()
    assert (tmp_path / "topic-0" / "high-watermark").read_text() == "6\n"
    log = open_log()
    assert log.high_watermark == 10  # a log that follows its end, the default, shows the log end
    log.high_watermark_follows_log_end = False
    assert log.high_watermark == 6
    assert [o for o, _ in decode(log.read(0, 1 << 20, False).read_bytes())] == list(range(6))
    log.truncate_to(4)
    assert log.high_watermark == 4


def test_high_watermark_without_checkpoint_is_the_log_end(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log()
    _append(log, 5)
    log.close()
    (tmp_path / "topic-0" / "high-watermark").unlink()
    log = open_log()
    log.high_watermark_follows_log_end = False
    assert log.high_watermark == 5


def test_truncate_fully_and_start_at(open_log: OpenLog, tmp_path: Path) -> None:
    log = open_log(segment_bytes=700)
    for i in range(6):
        _append(log, 2, size=60, epoch=1, producer_id=3, producer_epoch=0, base_sequence=2 * i)
    log.close()
    log = open_log(segment_bytes=700)
    log.high_watermark_follows_log_end = False
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (100, 100, 100, 100)
    assert [s.base_offset for s in log.segments] == [100]
    assert _epochs(log) == () and not log.producer_state.producers
    directory = tmp_path / "topic-0"
    assert sorted(p.name for p in directory.iterdir() if p.suffix in (".log", ".snapshot")) == [
        "00000000000000000100.log"]
    assert (directory / "log-start-offset").read_text() == "100\n"
    assert (directory / "high-watermark").read_text() == "100\n"
    with pytest.raises(KafkaError) as e:
        log.read(99, 100, True)
    assert e.value.code == ErrorCode.offset_out_of_range
    log.append_as_follower(batches_of(_stored_at(make_batch(values(2)), 100, 4)))
    assert _epochs(log) == ((4, 100),)
    log.close()
    log = open_log(segment_bytes=700)
    assert (log.log_start_offset, log.log_end_offset) == (100, 102)
    assert decode(log.read(100, 1000, True).read_bytes()) == [(100, b"v0-"), (101, b"v1-")]
    with pytest.raises(ValueError):
        log.truncate_fully_and_start_at(-1)


def test_truncate_to_rebuilds_producer_state(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=700)
    for i in range(6):
        _append(log, 2, size=60, producer_id=3, producer_epoch=0, base_sequence=2 * i)
    log.truncate_to(7)  # the batch 6..7 (sequences 6..7) and later ones go
    assert log.producer_state.producers[3].last_seq == 5
    retry = log.append(batches_of(make_batch(values(2, size=60), producer_id=3, producer_epoch=0,
                                             base_sequence=6)), 0)
    assert (retry.duplicate, retry.first_offset) == (False, 6)
