from __future__ import annotations

from pathlib import Path

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader, parse_header
from moldau.storage.producer_state import ProducerStateManager, snapshot_offsets
from tests.unit.storage.batches import START_MS, batches_of, make_batch, values
from tests.unit.storage.conftest import OpenLog


def _header(seq: int, n: int = 2, pid: int = 7, epoch: int = 0, base_offset: int = 0) -> BatchHeader:
    h = parse_header(make_batch(values(n), producer_id=pid, producer_epoch=epoch, base_sequence=seq))
    return BatchHeader(base_offset, *(getattr(h, f) for f in BatchHeader._fields if f != "base_offset"))


def _stored(psm: ProducerStateManager, header: BatchHeader, first_offset: int) -> None:
    assert not psm.check(header).is_duplicate
    psm.update(header, first_offset, first_offset + header.last_offset_delta)


def _code(psm: ProducerStateManager, header: BatchHeader) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        psm.check(header)
    return e.value.code


def test_in_sequence_duplicates_and_gaps(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    for i in range(7):
        _stored(psm, _header(i * 2), i * 2)
    # The last five batches are remembered with their offsets.
    decision = psm.check(_header(6))
    assert decision.is_duplicate and decision.duplicate_of is not None
    assert (decision.duplicate_of.first_offset, decision.duplicate_of.last_offset) == (6, 7)
    assert _code(psm, _header(2)) == ErrorCode.out_of_order_sequence_number  # too old to be remembered
    assert _code(psm, _header(15)) == ErrorCode.out_of_order_sequence_number  # gap
    assert _code(psm, _header(12, n=3)) == ErrorCode.out_of_order_sequence_number  # overlapping range
    assert not psm.check(_header(14)).is_duplicate


def test_epochs(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    _stored(psm, _header(0, epoch=3), 0)
    assert _code(psm, _header(2, epoch=2)) == ErrorCode.invalid_producer_epoch
    assert _code(psm, _header(5, epoch=4)) == ErrorCode.out_of_order_sequence_number
    _stored(psm, _header(0, epoch=4), 2)
    assert psm.producers[7].epoch == 4
    assert _code(psm, _header(2, epoch=3)) == ErrorCode.invalid_producer_epoch


def test_unknown_producers_are_accepted_at_any_sequence(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    _stored(psm, _header(1234, pid=99), 0)
    assert not psm.check(_header(1236, pid=99)).is_duplicate


def test_sequence_wraps_around(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    _stored(psm, _header(2**31 - 2, n=2), 0)  # sequences 2**31-2 and 2**31-1
    assert _code(psm, _header(1)) == ErrorCode.out_of_order_sequence_number
    _stored(psm, _header(0, n=3), 2)
    assert psm.producers[7].last_seq == 2
    assert psm.check(_header(0, n=3)).is_duplicate


def test_pending_batches_of_the_same_append(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    _stored(psm, _header(0), 0)
    first = _header(2)
    assert not psm.check(_header(4), {7: first}).is_duplicate
    with pytest.raises(KafkaError):
        psm.check(_header(2), {7: first})


def test_expiration(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path), producer_id_expiration_ms=1000)
    _stored(psm, _header(0), 0)  # max timestamp START_MS
    assert psm.remove_expired(START_MS + 999) == 0
    assert psm.remove_expired(START_MS + 1000) == 1
    assert not psm.producers


def test_snapshot_round_trip_and_damage(tmp_path: Path) -> None:
    psm = ProducerStateManager(str(tmp_path))
    for i in range(7):
        _stored(psm, _header(i * 2, pid=1), i * 2)
    _stored(psm, _header(0, pid=2, epoch=5), 14)
    psm.take_snapshot(16)
    psm.take_snapshot(40)
    again = ProducerStateManager(str(tmp_path))
    assert again.load(log_end_offset=30, now_ms=START_MS) == 16
    assert snapshot_offsets(str(tmp_path)) == [16]  # the one beyond the log end is gone
    assert {pid: list(e.batches) for pid, e in again.producers.items()} == {
        pid: list(e.batches) for pid, e in psm.producers.items()}
    assert again.producers[2].epoch == 5
    path = tmp_path / f"{16:020d}.snapshot"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    assert ProducerStateManager(str(tmp_path)).load(100, START_MS) is None
    assert snapshot_offsets(str(tmp_path)) == []


def test_log_answers_duplicates_with_original_offsets(open_log: OpenLog) -> None:
    log = open_log()
    raw = [make_batch(values(3), producer_id=5, producer_epoch=0, base_sequence=i * 3) for i in range(3)]
    log.append(batches_of(raw[0]), 0)
    log.append(batches_of(make_batch(values(4))), 0)  # a non-idempotent producer in between
    second = log.append(batches_of(raw[1]), 0)
    assert second.first_offset == 7
    retry = log.append(batches_of(raw[1]), 0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (7, 9, True)
    assert log.log_end_offset == 10
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(1), producer_id=5, producer_epoch=0, base_sequence=10)), 0)
    assert e.value.code == ErrorCode.out_of_order_sequence_number
    # Two batches of one producer in one append must follow each other.
    both = log.append(batches_of(raw[2], make_batch(values(1), producer_id=5, producer_epoch=0,
                                                    base_sequence=9)), 0)
    assert (both.first_offset, both.last_offset) == (10, 13)
    with pytest.raises(KafkaError):
        log.append(batches_of(make_batch(values(1), producer_id=5, producer_epoch=0, base_sequence=10),
                              make_batch(values(1), producer_id=5, producer_epoch=0, base_sequence=12)), 0)
    assert log.log_end_offset == 14


def test_fencing_through_the_log(open_log: OpenLog) -> None:
    log = open_log()
    log.append(batches_of(make_batch(values(1), producer_id=5, producer_epoch=2, base_sequence=0)), 0)
    log.append(batches_of(make_batch(values(1), producer_id=5, producer_epoch=3, base_sequence=0)), 0)
    with pytest.raises(KafkaError) as e:
        log.append(batches_of(make_batch(values(1), producer_id=5, producer_epoch=2, base_sequence=1)), 0)
    assert e.value.code == ErrorCode.invalid_producer_epoch


def test_retention_forgets_producers_of_deleted_data(open_log: OpenLog) -> None:
    log = open_log(segment_bytes=300, retention_ms=-1)
    log.append(batches_of(make_batch(values(3, size=40), producer_id=1, producer_epoch=0, base_sequence=0)), 0)
    for i in range(6):
        log.append(batches_of(make_batch(values(3, size=40), producer_id=2, producer_epoch=0,
                                         base_sequence=i * 3)), 0)
    log.delete_records_before(9)
    assert set(log.producer_state.producers) == {2}
