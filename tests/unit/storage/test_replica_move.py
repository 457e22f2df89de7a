"""Moving a partition log between log directories: the future log, its catch-up, the swap, and restarts."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import CLEAN_SHUTDOWN_MARKER, LogDirConflict, LogManager
from moldau.storage.replica_move import future_dir_name, parse_future_dir_name
from tests.unit.storage.batches import batches_of, decode, make_batch, values

SMALL_SEGMENTS = LogConfig(segment_bytes=4096)


def _dirs(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "d0"), str(tmp_path / "d1")]


def _contents(plog: PartitionLog) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        got = decode(plog.read(offset, 1 << 20, True, max_offset=plog.log_end_offset).read_bytes())
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def _append(plog: PartitionLog, n: int, epoch: int = 0, prefix: str = "v") -> None:
    plog.append(batches_of(make_batch(values(n, prefix, size=200))), epoch)


def _names(log_dir: str) -> set[str]:
    return {n for n in os.listdir(log_dir) if os.path.isdir(os.path.join(log_dir, n))}


def test_future_dir_names() -> None:
    name = future_dir_name("orders-eu", 3)
    assert name.startswith("orders-eu-3.") and name.endswith("-future")
    assert parse_future_dir_name(name) == ("orders-eu", 3)
    assert parse_future_dir_name("orders-eu-3") is None
    assert parse_future_dir_name(f"orders-3.{uuid.uuid4().hex}-delete") is None
    assert parse_future_dir_name("orders-x.0123456789abcdef0123456789abcdef-future") is None


def test_a_move_copies_while_appends_go_on_then_swaps(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    plog = manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    source, target = manager.log_dir_of("t", 0), _dirs(tmp_path)[1]
    assert source == _dirs(tmp_path)[0]
    for _ in range(20):
        _append(plog, 5)
    manager.alter_log_dir("t", 0, target)
    assert manager.future_dir_of("t", 0) == target
    described = {d.path: d.partitions for d in manager.describe_log_dirs()}
    assert [(p.is_future_key, p.offset_lag) for p in described[target]] == [(True, 100)]
    swapped: tuple[tuple[tuple[str, int], PartitionLog], ...] = ()
    steps = 0
    while not swapped:
        _append(plog, 2, epoch=1 if steps > 3 else 0)  # the producer goes on, in a new leader epoch too
        progress = manager.advance_moves(max_bytes=3000)
        swapped = progress.swapped
        steps += 1
        assert steps < 200
    ((key, moved),) = swapped
    assert key == ("t", 0) and manager.get("t", 0) is moved and moved is not plog
    assert manager.log_dir_of("t", 0) == target and manager.future_dir_of("t", 0) is None
    assert moved.directory == os.path.join(target, "t-0")
    assert [v for _, v in _contents(moved)] == [v for _, v in _contents_of_values(steps)]
    assert moved.leader_epochs.latest_epoch == 1
    assert _names(source) == set() and _names(target) == {"t-0"}
    manager.close()
    again = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    reopened = again.get("t", 0)
    assert reopened is not None and again.log_dir_of("t", 0) == target
    assert reopened.log_end_offset == 100 + 2 * steps
    again.close()


def _contents_of_values(steps: int) -> list[tuple[int, bytes]]:
    expected = [v for _ in range(20) for v in values(5, "v", size=200)]
    expected += [v for _ in range(steps) for v in values(2, "v", size=200)]
    return list(enumerate(expected))


def test_the_future_log_follows_a_truncation_of_the_current_one(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    plog = manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    for _ in range(10):
        _append(plog, 5)
    manager.alter_log_dir("t", 0, _dirs(tmp_path)[1])
    manager.advance_moves(max_bytes=1 << 20)  # swapped at once: nothing else was appended
    assert manager.future_dir_of("t", 0) is None
    current = manager.get("t", 0)
    assert current is not None
    plog = current
    manager.alter_log_dir("t", 0, _dirs(tmp_path)[0])
    progress = manager.advance_moves(max_bytes=3000)  # part of the way back
    assert not progress.swapped
    (future,) = [p for d in manager.describe_log_dirs() for p in d.partitions if p.is_future_key]
    assert 5 < plog.log_end_offset - future.offset_lag < plog.log_end_offset
    # A follower cuts a divergent suffix and appends the new leader's batches at the same offsets.
    plog.truncate_to(5)
    _append(plog, 5, epoch=2, prefix="new")
    while not progress.swapped:
        progress = manager.advance_moves(max_bytes=1500)
    moved = manager.get("t", 0)
    assert moved is not None and manager.log_dir_of("t", 0) == _dirs(tmp_path)[0]
    assert _contents(moved) == list(enumerate(
        values(5, size=200) + values(5, "new", size=200)))
    manager.close()


def test_a_move_left_by_a_crash_is_resumed_and_one_back_home_is_cancelled(tmp_path: Path,
                                                                          clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    plog = manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    for _ in range(10):
        _append(plog, 5)
    manager.alter_log_dir("t", 0, _dirs(tmp_path)[1])
    manager.advance_moves(max_bytes=1000)
    manager.close()  # (a crash leaves the same directories; the next start recovers their tails)
    again = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    assert again.log_dir_of("t", 0) == _dirs(tmp_path)[0] and again.future_dir_of("t", 0) == _dirs(tmp_path)[1]
    again.alter_log_dir("t", 0, _dirs(tmp_path)[0])  # back where it is: the move is called off
    assert again.future_dir_of("t", 0) is None and not again.moving()
    assert _names(_dirs(tmp_path)[1]) == set()
    again.alter_log_dir("t", 0, _dirs(tmp_path)[1])
    while not again.advance_moves().swapped:
        pass
    moved = again.get("t", 0)
    assert moved is not None and len(_contents(moved)) == 50
    again.close()


def test_alter_log_dir_errors(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    for bad in (str(tmp_path / "elsewhere"), "d1"):
        with pytest.raises(KafkaError) as raised:
            manager.alter_log_dir("t", 0, bad)
        assert raised.value.code == ErrorCode.log_dir_not_found
    with pytest.raises(KafkaError) as raised:
        manager.alter_log_dir("t", 1, _dirs(tmp_path)[0])
    assert raised.value.code == ErrorCode.replica_not_available
    created = manager.create("t", 1, None)  # created where it was asked to go, not the least loaded dir
    assert os.path.dirname(created.directory) == _dirs(tmp_path)[0]
    manager.close()


def test_the_same_partition_in_two_dirs_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    manager.create("t", 0, None)
    manager.close()
    os.mkdir(os.path.join(_dirs(tmp_path)[1], "t-0"))
    with pytest.raises(LogDirConflict, match="t-0 is in two log directories"):
        LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)


def test_a_failing_directory_goes_offline_and_the_others_carry_on(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    first, second = (manager.create("t", p, uuid.uuid4(), SMALL_SEGMENTS) for p in (0, 1))
    fine = manager.create("u", 0, None, SMALL_SEGMENTS)
    healthy, failing = _dirs(tmp_path)
    assert manager.log_dir_of("t", 1) == failing and manager.log_dir_of("u", 0) == healthy
    manager.alter_log_dir("t", 0, failing)  # a move into the directory that is about to fail
    shutil.rmtree(second.directory)  # the disk loses the partition's files
    with pytest.raises(KafkaError) as raised:
        second.flush()
    assert raised.value.code == ErrorCode.kafka_storage_error
    assert manager.offline_dirs == {failing} and not manager.moving()
    for call in (lambda: _append(second, 1), lambda: second.read(0, 100, True)):
        with pytest.raises(KafkaError) as raised:
            call()
        assert raised.value.code == ErrorCode.kafka_storage_error
    _append(first, 3)
    _append(fine, 3)
    assert len(_contents(first)) == 3
    assert os.path.dirname(manager.create("t", 2, None).directory) == healthy  # new partitions avoid it
    assert manager.create("t", 1, None) is second  # never created afresh elsewhere
    with pytest.raises(KafkaError) as raised:
        manager.alter_log_dir("t", 0, failing)
    assert raised.value.code == ErrorCode.kafka_storage_error
    described = {d.path: d.error for d in manager.describe_log_dirs()}
    assert described == {healthy: ErrorCode.none, failing: ErrorCode.kafka_storage_error}
    manager.close()
    assert (Path(healthy) / CLEAN_SHUTDOWN_MARKER).exists()
    assert not (Path(failing) / CLEAN_SHUTDOWN_MARKER).exists()


def test_a_directory_unusable_at_start_starts_offline_and_hides_nothing(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    for p in range(2):
        _append(manager.create("t", p, uuid.uuid4(), SMALL_SEGMENTS), 3)
    failing = _dirs(tmp_path)[1]
    assert manager.log_dir_of("t", 1) == failing
    manager.close()
    os.rename(failing, str(tmp_path / "unplugged"))
    Path(failing).write_text("not a directory any more")
    again = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    assert again.offline_dirs == {failing} and again.get("t", 1) is None
    t0 = again.get("t", 0)
    assert t0 is not None and len(_contents(t0)) == 3
    for partition in (1, 2):  # either may be in the unreadable directory: neither is created afresh
        with pytest.raises(KafkaError) as raised:
            again.create("t", partition, None)
        assert raised.value.code == ErrorCode.kafka_storage_error
    assert {d.path: d.error for d in again.describe_log_dirs()}[failing] == ErrorCode.kafka_storage_error
    again.close()
    os.unlink(failing)
    os.rename(str(tmp_path / "unplugged"), failing)
    back = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    t1 = back.get("t", 1)
    assert not back.offline_dirs and t1 is not None and len(_contents(t1)) == 3
    back.close()
    for d in _dirs(tmp_path):
        shutil.rmtree(d)
        Path(d).write_text("")
    with pytest.raises(OSError, match="every log directory is unusable"):
        LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)


def test_a_moved_log_keeps_its_transactions(tmp_path: Path, clock: ManualClock) -> None:
    manager = LogManager(_dirs(tmp_path), clock, SMALL_SEGMENTS)
    plog = manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    plog.transaction_verification = False
    for producer_id in (1, 2, 3):
        plog.append(batches_of(make_batch(values(2), producer_id=producer_id, producer_epoch=0, base_sequence=0,
                                          transactional=True)), 0)
    plog.append_marker(1, 0, False, 0, 0)  # aborted
    plog.append_marker(2, 0, True, 0, 0)  # committed; producer 3's stays open
    before = (plog.aborted_transactions(0, plog.log_end_offset), plog.ongoing_transactions(),
              plog.last_stable_offset, plog.log_end_offset)
    manager.alter_log_dir("t", 0, _dirs(tmp_path)[1])
    (((_, moved),)) = manager.advance_moves().swapped
    assert (moved.aborted_transactions(0, moved.log_end_offset), moved.ongoing_transactions(),
            moved.last_stable_offset, moved.log_end_offset) == before == ([(1, 0)], [(3, 4)], 4, 8)
    moved.append_marker(3, 0, True, 0, 0)
    assert moved.last_stable_offset == moved.log_end_offset == 9
    manager.close()


def test_a_swapped_move_reports_the_new_directory_for_assignment(tmp_path: Path, clock: ManualClock) -> None:
    dirs = _dirs(tmp_path)
    manager = LogManager(dirs, clock, SMALL_SEGMENTS, directory_ids={dirs[0]: "dir-a", dirs[1]: "dir-b"})
    plog = manager.create("t", 0, uuid.uuid4(), SMALL_SEGMENTS)
    _append(plog, 5)
    assert manager.unrecorded_assignments() == [("dir-a", "t", 0)]
    manager.assignments_recorded([("t", 0)])
    manager.alter_log_dir("t", 0, dirs[1])
    assert manager.unrecorded_assignments() == []  # the metadata is told once the move is done
    manager.advance_moves(max_bytes=1 << 20)
    assert manager.unrecorded_assignments() == [("dir-b", "t", 0)]
    manager.close()
