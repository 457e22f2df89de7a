"""Transactions on a partition log: the last stable offset, markers, the aborted-transaction index,
verification guards, recovery, truncation, replication and compaction."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import iter_batch_headers, split_batches
from moldau.storage.cleaner import LogCleaner
from moldau.storage.control_batch import parse_marker
from moldau.storage.log import PartitionLog
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.transaction_index import AbortedTxn
from tests.unit.storage.batches import START_MS
from tests.unit.storage.conftest import OpenLog, crash

COMPACT = {"cleanup_policy": ("compact",), "min_cleanable_dirty_ratio": 0.0}


def txn_batch(pid: int, seq: int, n: int = 1, *, epoch: int = 0, keys: list[bytes] | None = None,
              value: bytes = b"v", transactional: bool = True, pad: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=pid, producer_epoch=epoch, base_sequence=seq, batch_size=1 << 30)
    for i in range(n):
        key = keys[i] if keys is not None else b"k%d" % i
        builder.append(i, START_MS, key, value + b"x" * pad, [])
    return bytes(builder.build())


def plain_batch(n: int = 1) -> bytes:
    return txn_batch(-1, -1, n, epoch=-1, transactional=False)


def add(log: PartitionLog, raw: bytes, guard: object | None = None) -> tuple[int, int]:
    result = log.append(split_batches(raw), 0, guard)
    return result.first_offset, result.last_offset


def unverified(log: PartitionLog) -> PartitionLog:
    log.transaction_verification = False
    return log


def code_of(excinfo: pytest.ExceptionInfo[KafkaError]) -> ErrorCode:
    return excinfo.value.code


def all_bytes(log: PartitionLog) -> bytes:
    return b"".join(s.read_bytes(0, s.size_bytes) for s in log.segments)


# -- the last stable offset ----------------------------------------------------------------------


def test_lso_with_one_transaction_committed(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, plain_batch(2))
    assert add(log, txn_batch(1, 0, 2)) == (2, 3)
    assert (log.high_watermark, log.last_stable_offset, log.first_unstable_offset) == (4, 2, 2)
    add(log, plain_batch(1))
    assert log.last_stable_offset == 2
    marker = log.append_marker(1, 0, True, 0, 0)
    assert (marker.first_offset, marker.last_offset) == (5, 5)
    assert log.last_stable_offset == log.log_end_offset == 6
    assert log.aborted_transactions(0, 6) == [] and log.ongoing_transactions() == []
    assert not os.path.exists(log.segments[0].txn_index.path)


def test_lso_with_several_transactions_and_an_abort(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, txn_batch(1, 0))  # 0
    add(log, txn_batch(2, 0))  # 1
    add(log, txn_batch(1, 1))  # 2
    assert log.ongoing_transactions() == [(1, 0), (2, 1)]
    assert log.last_stable_offset == 0
    assert log.append_marker(1, 0, False, 0, 0).first_offset == 3
    assert log.last_stable_offset == 1
    # Producer 2 still holds the partition back at 1: the entry's stable offset says so.
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 3, 1)]
    assert log.aborted_transactions(0, 4) == [(1, 0)]
    assert log.aborted_transactions(3, 4) == [(1, 0)]  # the marker itself is in range
    assert log.aborted_transactions(4, 10) == []
    log.append_marker(2, 0, True, 0, 0)
    assert log.last_stable_offset == log.log_end_offset == 5
    assert log.ongoing_transactions() == []


def test_a_completed_transaction_holds_the_lso_until_the_high_watermark_passes_its_marker(
        open_log: OpenLog) -> None:
    log = unverified(open_log())
    log.high_watermark_follows_log_end = False
    add(log, txn_batch(1, 0, 2))  # 0..1
    log.append_marker(1, 0, True, 0, 0)  # 2
    add(log, plain_batch(1))  # 3
    assert log.last_stable_offset == 0  # high watermark 0
    log.high_watermark = 2
    assert log.last_stable_offset == 0  # the marker at 2 is not below the high watermark yet
    log.high_watermark = 3
    assert log.last_stable_offset == 3
    log.high_watermark = 4
    assert log.last_stable_offset == 4


def test_aborted_transactions_across_segments(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=400))
    aborted: list[tuple[int, int, int]] = []  # (pid, first, marker)
    seqs: dict[int, int] = {}
    for round_ in range(12):
        pid_a, pid_b = 10 + round_ % 3, 20 + round_ % 2
        for pid in (pid_a, pid_b):
            first, _ = add(log, txn_batch(pid, seqs.get(pid, 0), 2, pad=30))
            seqs[pid] = seqs.get(pid, 0) + 2
            if pid == pid_a:
                first_a = first
            else:
                first_b = first
        add(log, plain_batch(1))
        marker_a = log.append_marker(pid_a, 0, round_ % 2 == 0, 0, 0).first_offset
        marker_b = log.append_marker(pid_b, 0, False, 0, 0).first_offset
        if round_ % 2:
            aborted.append((pid_a, first_a, marker_a))
        aborted.append((pid_b, first_b, marker_b))
    assert len(log.segments) > 4
    end = log.log_end_offset
    for start in range(0, end, 3):
        for upper in range(start + 1, end + 1, 4):
            expected = {(pid, first) for pid, first, last in aborted if last >= start and first < upper}
            found = log.aborted_transactions(start, upper)
            assert set(found) == expected and len(found) == len(expected), (start, upper)


# -- markers -------------------------------------------------------------------------------------


def test_marker_fencing(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, txn_batch(1, 0, epoch=2))
    with pytest.raises(KafkaError) as e:
        log.append_marker(1, 1, True, 0, 0)
    assert code_of(e) == ErrorCode.invalid_producer_epoch
    log.append_marker(1, 2, False, 5, 0)
    add(log, txn_batch(1, 1, epoch=2))
    with pytest.raises(KafkaError) as e:
        log.append_marker(1, 2, True, 4, 0)
    assert code_of(e) == ErrorCode.transaction_coordinator_fenced
    assert log.ongoing_transactions() == [(1, 2)]
    # A newer epoch is accepted and becomes the producer's.
    log.append_marker(1, 3, True, 5, 0)
    assert log.producer_state.producers[1].epoch == 3
    with pytest.raises(KafkaError) as e:
        add(log, txn_batch(1, 0, epoch=2))
    assert code_of(e) == ErrorCode.invalid_producer_epoch


def test_marker_without_a_transaction_is_written_but_not_indexed(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, plain_batch(1))
    result = log.append_marker(42, 0, False, 1, 0)
    assert result.first_offset == 1 and log.log_end_offset == 2
    assert log.aborted_transactions(0, 2) == []
    headers = list(iter_batch_headers(all_bytes(log), 0, len(all_bytes(log))))
    control = headers[-1][1]
    assert control.is_control and control.is_transactional and control.producer_id == 42
    data = all_bytes(log)[headers[-1][0]:]
    marker = parse_marker(data)
    assert marker is not None and not marker.commit and marker.coordinator_epoch == 1
    entry = log.producer_state.producers[42]
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (1, None)


def test_describing_producers(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, txn_batch(1, 0, 3, epoch=4))
    add(log, txn_batch(2, 0, 2, transactional=False))
    log.append_marker(2, 0, True, 7, 0)
    by_id = {p.producer_id: p for p in log.active_producers()}
    assert (by_id[1].producer_epoch, by_id[1].last_sequence, by_id[1].current_txn_start_offset) == (4, 2, 0)
    assert (by_id[2].last_sequence, by_id[2].coordinator_epoch, by_id[2].current_txn_start_offset) == (1, 7, -1)


# -- batches -------------------------------------------------------------------------------------


def test_batch_rules(open_log: OpenLog) -> None:
    log = unverified(open_log())
    with pytest.raises(KafkaError) as e:
        add(log, txn_batch(-1, -1, epoch=-1))
    assert code_of(e) == ErrorCode.invalid_record  # transactional without a producer id
    with pytest.raises(KafkaError) as e:
        add(log, txn_batch(5, -1, transactional=False))
    assert code_of(e) == ErrorCode.invalid_record  # a producer id without sequence, not transactional
    add(log, txn_batch(5, 0, 2, transactional=False, epoch=1))
    # Coordinator-style batches without sequence: fenced by epoch, invisible to the sequence bookkeeping.
    add(log, txn_batch(5, -1, epoch=1))
    with pytest.raises(KafkaError) as e:
        add(log, txn_batch(5, -1, epoch=0))
    assert code_of(e) == ErrorCode.invalid_producer_epoch
    assert log.producer_state.producers[5].last_seq == 1
    assert log.ongoing_transactions() == [(5, 2)]
    assert add(log, txn_batch(5, 2, transactional=False, epoch=1)) == (3, 3)
    assert log.append(split_batches(txn_batch(5, 2, transactional=False, epoch=1)), 0).duplicate


def test_verification_guards(open_log: OpenLog) -> None:
    log = open_log()
    first = split_batches(txn_batch(1, 0))
    assert log.needs_verification(first[0][0])
    with pytest.raises(KafkaError) as e:
        log.append(first, 0)
    assert code_of(e) == ErrorCode.invalid_txn_state and "verif" in e.value.message
    with pytest.raises(KafkaError) as e:
        log.append(first, 0, object())  # not the producer's guard
    assert code_of(e) == ErrorCode.invalid_txn_state
    guard = log.verification_guard(1)
    assert log.verification_guard(1) is guard
    log.append(first, 0, guard)
    # Continuing the transaction needs no guard.
    later = split_batches(txn_batch(1, 1))
    assert not log.needs_verification(later[0][0])
    log.append(later, 0)
    log.append_marker(1, 0, True, 0, 0)
    # A verification that was under way when the marker was written is refused.
    stale = log.verification_guard(1)
    log.append_marker(1, 0, False, 0, 0)
    with pytest.raises(KafkaError) as e:
        log.append(split_batches(txn_batch(1, 2)), 0, stale)
    assert code_of(e) == ErrorCode.invalid_txn_state
    # So is one from before a newer epoch.
    stale = log.verification_guard(1)
    add(log, txn_batch(1, 0, epoch=1, transactional=False))
    with pytest.raises(KafkaError):
        log.append(split_batches(txn_batch(1, 1, epoch=1)), 0, stale)
    fresh = log.verification_guard(1)
    log.append(split_batches(txn_batch(1, 1, epoch=1)), 0, fresh)
    assert log.producer_state.current_guard(1) is None  # used up
    assert log.ongoing_transactions() == [(1, 5)]
    log.transaction_verification = False
    log.append_marker(1, 1, True, 0, 0)
    add(log, txn_batch(1, 2, epoch=1))


# -- snapshots, recovery, truncation -------------------------------------------------------------


def test_snapshot_round_trip_with_an_ongoing_transaction(open_log: OpenLog, tmp_path: Path) -> None:
    log = unverified(open_log())
    add(log, txn_batch(1, 0, 2))
    add(log, txn_batch(2, 0))
    log.append_marker(2, 0, False, 3, 0)
    add(log, txn_batch(3, -1))  # no sequence
    log.close()
    again = ProducerStateManager(log.directory)
    assert again.load(log.log_end_offset, START_MS) == 5
    assert list(again.ongoing_transactions()) == [(1, 0), (3, 4)]
    assert (again.producers[2].coordinator_epoch, again.producers[2].current_txn_first_offset) == (3, None)
    assert again.producers[3].last_offset == 4 and again.producers[3].last_seq is None
    reopened = open_log()
    assert reopened.last_stable_offset == 0 and reopened.aborted_transactions(0, 5) == [(2, 2)]


def test_version_1_snapshots_are_read_as_producers_without_transactions(tmp_path: Path) -> None:
    body = struct.pack(">I", 1) + struct.pack(">qhqB", 9, 2, START_MS, 1) + struct.pack(">iiqqq", 0, 4, 10, 14,
                                                                                         START_MS)
    data = struct.pack(">4sHI", b"MPSS", 1, crc32c.crc32c(body)) + body
    (tmp_path / f"{15:020d}.snapshot").write_bytes(data)
    psm = ProducerStateManager(str(tmp_path))
    assert psm.load(20, START_MS) == 15
    entry = psm.producers[9]
    assert (entry.epoch, entry.last_seq, entry.last_offset, entry.current_txn_first_offset) == (2, 4, 14, None)
    assert entry.coordinator_epoch == -1 and psm.first_unstable_offset(100) is None


def _transactional_history(log: PartitionLog) -> None:
    """Aborts and commits over several segments, ending with two transactions still open."""
    seqs = {1: 0, 2: 0, 3: 0}
    for i in range(8):
        pid = 1 + i % 3
        add(log, txn_batch(pid, seqs[pid], 2, pad=40))
        seqs[pid] += 2
        add(log, plain_batch(1))
        log.append_marker(pid, 0, i % 3 == 1, 0, 0)
    add(log, txn_batch(1, seqs[1], pad=40))
    add(log, txn_batch(3, seqs[3], pad=40))


def _txn_view(log: PartitionLog) -> tuple[object, ...]:
    end = log.log_end_offset
    return (log.last_stable_offset, log.ongoing_transactions(), log.aborted_transactions(0, end),
            [s.txn_index.entries for s in log.segments])


def test_unclean_restart_rebuilds_transactions_and_indexes(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=500))
    _transactional_history(log)
    before = _txn_view(log)
    assert len(log.segments) > 3 and before[2]
    directory = Path(log.directory)
    crash(log)
    for path in directory.glob("*.txnindex"):
        path.unlink()
    (directory / "recovery-point").write_text("0\n")
    log = open_log(segment_bytes=500)
    assert _txn_view(log) == before
    assert sorted(p.name for p in directory.glob("*.txnindex"))  # written again


def test_unclean_restart_replays_from_a_snapshot_before_the_recovered_segments(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=500))
    _transactional_history(log)
    log.flush()
    recovered_from = log.segments[-1].base_offset
    directory = Path(log.directory)
    log.close()
    log = unverified(open_log(segment_bytes=500))
    add(log, txn_batch(2, 6, pad=40))
    log.append_marker(2, 0, False, 0, 0)
    log.append_marker(1, 0, False, 0, 0)
    before = _txn_view(log)
    crash(log)
    for segment_base in [int(p.stem) for p in directory.glob("*.log") if int(p.stem) >= recovered_from]:
        (directory / f"{segment_base:020d}.txnindex").unlink(missing_ok=True)
    log = open_log(segment_bytes=500)
    assert _txn_view(log) == before


def test_an_unclean_restart_that_lost_the_snapshots_taken_at_rolls_rebuilds_the_same_state(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=500))
    _transactional_history(log)
    before = _txn_view(log), dict(log.producer_state.producers)
    directory = Path(log.directory)
    crash(log)  # before any pass: the recovery point never passed a roll
    # Taken at the rolls without fsyncs, the snapshots may be lost or empty after a crash.
    snapshots = sorted(directory.glob("*.snapshot"))
    assert len(snapshots) > 2
    snapshots[-1].unlink()
    for path in snapshots[:-1]:
        path.write_bytes(b"")
    log = open_log(segment_bytes=500)
    assert (_txn_view(log), dict(log.producer_state.producers)) == before


def test_stray_txnindex_files_go_and_others_stay(open_log: OpenLog) -> None:
    log = unverified(open_log())
    add(log, txn_batch(1, 0))
    log.append_marker(1, 0, False, 0, 0)
    log.close()
    directory = Path(log.directory)
    (directory / f"{99:020d}.txnindex").write_bytes(b"\0" * 34)
    log = open_log()
    assert not (directory / f"{99:020d}.txnindex").exists()
    assert (directory / f"{0:020d}.txnindex").exists() and log.aborted_transactions(0, 2) == [(1, 0)]


def test_truncate_to_cuts_index_entries_and_reopens_transactions(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=500))
    _transactional_history(log)
    aborts = [e for s in log.segments for e in s.txn_index.entries]
    cut = aborts[-1].last_offset  # the last abort marker goes
    log.truncate_to(cut)
    assert log.log_end_offset == cut
    assert [e for s in log.segments for e in s.txn_index.entries] == aborts[:-1]
    assert aborts[-1].producer_id in dict(log.ongoing_transactions())
    assert log.last_stable_offset == min(first for _, first in log.ongoing_transactions())
    # Everything after the truncation point was rebuilt consistently: a reopen agrees.
    before = _txn_view(log)
    log.close()
    assert _txn_view(open_log(segment_bytes=500)) == before


def test_retention_and_delete_records_remove_txn_indexes_with_their_segments(open_log: OpenLog) -> None:
    log = unverified(open_log(segment_bytes=500))
    _transactional_history(log)
    directory = Path(log.directory)
    assert len(list(directory.glob("*.txnindex"))) >= 2
    log.delete_records_before(log.segments[-1].base_offset)
    bases = {s.base_offset for s in log.segments}
    assert all(int(p.stem) in bases for p in directory.glob("*.txnindex"))
    log.truncate_fully_and_start_at(500)
    assert not list(directory.glob("*.txnindex"))


# -- replication ---------------------------------------------------------------------------------


def test_follower_appends_have_the_leader_effects(open_log: OpenLog) -> None:
    leader = unverified(open_log(name="leader-0", segment_bytes=500))
    _transactional_history(leader)
    follower = open_log(name="follower-0", segment_bytes=500)
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 300, True, leader.log_end_offset).read_bytes()
        batches = split_batches(data)
        follower.append_as_follower(batches)
        offset = batches[-1][0].next_offset
    assert _txn_view(follower)[:3] == _txn_view(leader)[:3]
    assert sorted(follower.active_producers(), key=lambda p: p.producer_id) == \
        sorted(leader.active_producers(), key=lambda p: p.producer_id)


# -- compaction ----------------------------------------------------------------------------------


def _values_by_key(log: PartitionLog) -> dict[bytes, list[bytes]]:
    """Every data record's value per key, in offset order (no filtering of aborted ones)."""
    data = all_bytes(log)
    out: dict[bytes, list[bytes]] = {}
    for position, header in iter_batch_headers(data, 0, len(data)):
        if header.is_control:
            continue
        for record in DefaultRecordBatch(data[position : position + header.total_size]):
            out.setdefault(record.key, []).append(record.value)
    return out


def test_compaction_keeps_the_committed_value_over_a_later_aborted_one(open_log: OpenLog, clock: ManualClock) -> None:
    log = unverified(open_log(segment_bytes=400, **COMPACT))
    add(log, txn_batch(1, 0, keys=[b"a"], value=b"committed", pad=40))
    log.append_marker(1, 0, True, 0, 0)
    add(log, txn_batch(2, 0, keys=[b"a"], value=b"aborted", pad=40))
    add(log, txn_batch(1, 1, keys=[b"b"], value=b"kept", pad=40))
    log.append_marker(2, 0, False, 0, 0)
    log.append_marker(1, 0, True, 0, 0)
    for i in range(6):
        add(log, plain_batch(1) if i % 2 else txn_batch(-1, -1, keys=[b"c"], value=b"%d" % i, epoch=-1,
                                                       transactional=False, pad=40))
    assert len(log.segments) >= 3
    aborted_before = log.aborted_transactions(0, log.log_end_offset)
    assert aborted_before == [(2, 2)]
    markers_before = sum(1 for _, h in iter_batch_headers(all_bytes(log), 0, len(all_bytes(log))) if h.is_control)
    LogCleaner(clock, lambda: {(log.topic, log.partition): log}).clean_now(log, clock.time_ms(), force=True)
    values = _values_by_key(log)
    assert values[b"a"][-1].startswith(b"committed") and not any(v.startswith(b"aborted") for v in values[b"a"])
    assert values[b"b"][-1].startswith(b"kept")
    data = all_bytes(log)
    assert sum(1 for _, h in iter_batch_headers(data, 0, len(data)) if h.is_control) == markers_before
    assert log.aborted_transactions(0, log.log_end_offset) == aborted_before
    log.close()
    reopened = open_log(segment_bytes=400, **COMPACT)
    assert reopened.aborted_transactions(0, reopened.log_end_offset) == aborted_before
    assert len(list(Path(reopened.directory).glob("*.txnindex"))) == 1


def test_the_cleaner_stays_below_the_last_stable_offset(open_log: OpenLog, clock: ManualClock) -> None:
    log = unverified(open_log(segment_bytes=300, **COMPACT))
    add(log, txn_batch(1, 0, keys=[b"a"], value=b"open", pad=40))
    for i in range(8):
        add(log, txn_batch(-1, -1, keys=[b"a"], value=b"%d" % i, epoch=-1, transactional=False, pad=40))
    assert len(log.segments) > 3 and log.last_stable_offset == 0
    cleaner = LogCleaner(clock, lambda: {(log.topic, log.partition): log})
    assert cleaner.cleanable_range(log, clock.time_ms()).first_uncleanable_offset == 0
    assert cleaner.clean_now(log, clock.time_ms(), force=True) is None


# -- what the read handlers build on -------------------------------------------------------------


def test_read_committed_offsets_and_fetch_bounds(open_log: OpenLog) -> None:
    from moldau.server.handlers import fetch, list_offsets

    log = unverified(open_log())
    add(log, plain_batch(2))  # 0..1
    add(log, txn_batch(1, 0, 2))  # 2..3
    add(log, txn_batch(2, 0, 1))  # 4
    log.append_marker(1, 0, False, 0, 0)  # 5
    assert log.last_stable_offset == 4
    assert list_offsets._lookup(log, list_offsets.LATEST, True) == (4, -1)
    assert list_offsets._lookup(log, list_offsets.LATEST, False) == (6, -1)
    assert list_offsets._lookup(log, START_MS, True) == (0, START_MS)
    # A read_committed consumer reads below the last stable offset and learns what to drop there.
    data = log.read(0, 1 << 20, True, log.last_stable_offset).read_bytes()
    assert fetch._next_offset(data) == 4
    assert log.aborted_transactions(0, fetch._next_offset(data)) == [(1, 2)]
    data = log.read(2, 1 << 20, True).read_bytes()
    assert fetch._next_offset(data) == 6
