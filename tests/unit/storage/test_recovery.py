"""Restarts: clean ones trust the data, unclean ones re-validate from the recovery point."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.log import PartitionLog
from moldau.storage.segment import LogSegment
from tests.unit.storage.batches import batches_of, decode, make_batch, values
from tests.unit.storage.conftest import OpenLog, crash


def _fill(log: PartitionLog, appends: int, n: int = 3) -> None:
    for _ in range(appends):
        log.append(batches_of(make_batch(values(n, size=40))), 0)


def _records(log: PartitionLog) -> list[int]:
    return [o for o, _ in decode(log.read(log.log_start_offset, 10**9, True).read_bytes())] + (
        [] if len(log.segments) == 1 else _records_after_first(log))


def _records_after_first(log: PartitionLog) -> list[int]:
    out = []
    for segment in log.segments[1:]:
        out += [o for o, _ in decode(log.read(segment.base_offset, 10**9, True).read_bytes())]
    return out


def _active_log_file(log: PartitionLog) -> Path:
    return Path(log.directory) / f"{log.segments[-1].base_offset:020d}.log"


@pytest.fixture
def count_recoveries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = LogSegment.recover

    def counting(self: LogSegment) -> int:
        calls.append(self.base_offset)
        return original(self)

    monkeypatch.setattr(LogSegment, "recover", counting)
    return calls


@pytest.mark.parametrize("tail", [b"\x00" * 7, b"garbage" * 20, "half-batch"])
def test_torn_tail_is_cut_after_a_crash(open_log: OpenLog, tail: bytes | str) -> None:
    log = open_log(segment_bytes=1000)
    _fill(log, 10)
    expected_end = log.log_end_offset
    expected = _records(log)
    crash(log)
    garbage = make_batch(values(3))[:40] if tail == "half-batch" else tail
    assert isinstance(garbage, bytes)
    with open(_active_log_file(log), "ab") as f:
        f.write(garbage)
    log = open_log(segment_bytes=1000)
    assert log.log_end_offset == expected_end
    assert _records(log) == expected
    assert os.path.getsize(_active_log_file(log)) == log.segments[-1].size_bytes
    assert log.append(batches_of(make_batch(values(2))), 0).first_offset == expected_end
    assert _records(log) == [*expected, expected_end, expected_end + 1]


def test_corrupt_batch_truncates_it_and_everything_after(open_log: OpenLog) -> None:
    log = open_log()
    _fill(log, 6)
    crash(log)
    path = _active_log_file(log)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside the 4th batch (offsets 9..11)
    path.write_bytes(bytes(data))
    log = open_log()
    assert log.log_end_offset == 9
    assert _records(log) == list(range(9))


def test_clean_restart_does_not_rescan(open_log: OpenLog, count_recoveries: list[int]) -> None:
    log = open_log(segment_bytes=1000)
    _fill(log, 20)
    end = log.log_end_offset
    log.close()
    path = _active_log_file(log)
    data = bytearray(path.read_bytes())
    data[-5] ^= 0xFF  # corrupt the last batch's body: only a scan would notice
    path.write_bytes(bytes(data))

    log = open_log(segment_bytes=1000)
    assert count_recoveries == []
    assert log.log_end_offset == end  # trusted without reading it
    crash(log)  # this run ends uncleanly ...

    log = open_log(segment_bytes=1000)  # ... so the next start re-validates from the recovery point
    assert count_recoveries == [log.segments[-1].base_offset]
    assert log.log_end_offset == end - 3


def test_unclean_restart_recovers_only_from_the_recovery_point(
    open_log: OpenLog, count_recoveries: list[int]
) -> None:
    log = open_log(segment_bytes=1000)
    _fill(log, 20)
    assert len(log.segments) > 3
    assert log.recovery_point == 0
    log.flush_if_due(0)  # the periodic task makes rolled segments durable
    recovery_point = log.recovery_point
    assert recovery_point == log.segments[-1].base_offset
    _fill(log, 1)
    crash(log)
    log = open_log(segment_bytes=1000)
    assert count_recoveries == [s.base_offset for s in log.segments if s.base_offset >= recovery_point]
    assert len(count_recoveries) < len(log.segments) - 2


def test_unclean_restart_without_checkpoint_recovers_everything(
    open_log: OpenLog, count_recoveries: list[int]
) -> None:
    log = open_log(segment_bytes=1000)
    _fill(log, 20)
    end, segments = log.log_end_offset, len(log.segments)
    crash(log)
    log = open_log(segment_bytes=1000)
    assert len(count_recoveries) == segments
    assert log.log_end_offset == end
    assert _records(log) == list(range(end))


def test_caller_can_force_recovery(open_log: OpenLog, count_recoveries: list[int]) -> None:
    log = open_log()
    _fill(log, 2)
    log.close()
    log = open_log(clean_shutdown=False)
    assert count_recoveries == [0]


def test_damaged_index_is_rebuilt(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=2000, index_interval_bytes=100)
    _fill(log, 30)
    expected = _records(log)
    log.close()
    index = Path(log.directory) / "00000000000000000000.index"
    index.write_bytes(index.read_bytes()[:-3])
    (Path(log.directory) / "00000000000000000000.timeindex").unlink()
    log = open_log(segment_bytes=2000, index_interval_bytes=100)
    assert _records(log) == expected
    assert decode(log.read(7, 1, True).read_bytes())[0][0] == 6
    assert log.segments[0].offset_index.entries > 3
    assert log.offset_for_timestamp(0) == (0, log.segments[0].largest_timestamp)


def _closed_log_directory(open_log: OpenLog) -> Path:
    """The directory of a log of two appends (offsets 0-5), closed cleanly."""
    log = open_log()
    _fill(log, 2)
    log.close()
    return Path(log.directory)


def test_stray_files_are_removed(open_log: OpenLog) -> None:
    directory = _closed_log_directory(open_log)
    (directory / "00000000000000000099.index").write_bytes(b"")
    (directory / "recovery-point.tmp").write_bytes(b"1")
    (directory / "00000000000000000000.log.deleted").write_bytes(b"1")
    open_log()
    assert sorted(os.listdir(directory)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "00000000000000000006.snapshot", "high-watermark", "leader-epoch-checkpoint", "log-start-offset",
        "recovery-point",
    ]


def test_files_named_with_digits_of_other_scripts_are_not_segments(open_log: OpenLog) -> None:
    """'²' passes str.isdigit but not int(); such a name (a copy gone wrong, a hostile file) must not stop the log
    from opening, nor pass for a segment."""
    directory = _closed_log_directory(open_log)
    (directory / "0000000000000000000\u00b2.log").write_bytes(b"not a segment")
    (directory / "0000000000000000000\u00b2.snapshot").write_bytes(b"not a snapshot")
    reopened = open_log()
    assert [segment.base_offset for segment in reopened.segments] == [0]
    assert _records(reopened) == list(range(6))


def test_disk_full_surfaces_as_storage_error_and_keeps_the_log(
    open_log: OpenLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log()
    _fill(log, 3)
    real_pwritev = os.pwritev

    def full(fd: int, buffers: list[bytes], offset: int) -> int:
        real_pwritev(fd, buffers[:1], offset)  # a partial write lands before the disk fills up
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwritev", full)
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(5))), 0)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert log.log_end_offset == 9
    assert _records(log) == list(range(9))
    monkeypatch.setattr(os, "pwritev", real_pwritev)
    assert log.append(batches_of(make_batch(values(2))), 0).first_offset == 9
    assert _records(log) == list(range(11))
    crash(log)
    log = open_log()
    assert _records(log) == list(range(11))


def test_failed_roll_is_a_storage_error(open_log: OpenLog, monkeypatch: pytest.MonkeyPatch) -> None:
    log = open_log(segment_bytes=300)
    _fill(log, 1)

    def broken(*args: object, **kwargs: object) -> LogSegment:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(LogSegment, "create", broken)
    with pytest.raises(KafkaError) as e:
        _fill(log, 2)
    assert e.value.code == ErrorCode.kafka_storage_error
    assert log.log_end_offset == 3 and _records(log) == [0, 1, 2]


def test_producer_state_survives_clean_and_unclean_restarts(open_log: OpenLog) -> None:
    def produce(log: PartitionLog, seq: int) -> tuple[int, bool]:
        raw = make_batch(values(2), producer_id=9, producer_epoch=1, base_sequence=seq)
        result = log.append(batches_of(raw), 0)
        return result.first_offset, result.duplicate

    log = open_log(segment_bytes=400)
    for seq in range(0, 20, 2):
        produce(log, seq)
    assert len(log.segments) > 2
    log.close()
    log = open_log(segment_bytes=400)
    assert produce(log, 18) == (18, True)
    with pytest.raises(KafkaError) as e:
        produce(log, 30)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    assert produce(log, 20) == (20, False)
    crash(log)  # no snapshot at the end: the tail is replayed from the log
    log = open_log(segment_bytes=400)
    assert produce(log, 20) == (20, True)
    assert produce(log, 22) == (22, False)
    crash(log)
    for snapshot in Path(log.directory).glob("*.snapshot"):
        snapshot.unlink()  # even without snapshots the state comes back from the batch headers
    log = open_log(segment_bytes=400)
    assert produce(log, 16) == (16, True)
    assert produce(log, 24) == (24, False)


def _lie_about_records(log_file: Path, batch_position: int) -> None:
    """Make the batch at `batch_position` claim one record more than it holds, with a valid CRC (as an older
    Moldau, which did not walk records, could have stored)."""
    import struct

    import crc32c

    data = bytearray(log_file.read_bytes())
    count_at, delta_at = batch_position + 57, batch_position + 23
    struct.pack_into(">i", data, count_at, struct.unpack_from(">i", data, count_at)[0] + 1)
    struct.pack_into(">i", data, delta_at, struct.unpack_from(">i", data, delta_at)[0] + 1)
    end = batch_position + 12 + struct.unpack_from(">i", data, batch_position + 8)[0]
    struct.pack_into(">I", data, batch_position + 17, crc32c.crc32c(bytes(data[batch_position + 21 : end])))
    log_file.write_bytes(bytes(data))


def test_a_batch_whose_records_lie_is_cut_and_set_aside_by_a_full_scan(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=1000)
    _fill(log, 10)  # several segments of three-record batches
    first_file = Path(log.directory) / f"{log.segments[0].base_offset:020d}.log"
    later_segments = len(log.segments) - 1
    assert later_segments >= 1
    batch_size = len(make_batch(values(3, size=40)))
    log.close()
    _lie_about_records(first_file, batch_size)  # the second batch: offsets 3..5
    first_size = first_file.stat().st_size
    # A clean start trusts the data; the one-time full scan (recover_all) finds the lie.
    reopened = PartitionLog.open(log.directory, log.config, log._clock, recover_all=True)
    try:
        assert reopened.log_end_offset == 3
        assert _records(reopened) == [0, 1, 2]
        kept = sorted(p.name for p in Path(log.directory).iterdir() if ".corrupt-" in p.name)
        assert kept[0] == f"{0:020d}.log.corrupt-{batch_size}"
        assert len(kept) == 1 + later_segments  # the rest of the first segment, and every later one
        assert (Path(log.directory) / kept[0]).stat().st_size == first_size - batch_size
        assert first_file.stat().st_size == batch_size
        # The log takes writes again from the cut.
        reopened.append(batches_of(make_batch(values(2))), 0)
        assert _records(reopened) == [0, 1, 2, 3, 4]
    finally:
        reopened.close()
