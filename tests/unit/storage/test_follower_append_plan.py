"""`plan_follower_append`: which replicated batches a follower stores, decided without files."""

from __future__ import annotations

import struct

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.control_batch import TransactionMarker, build_marker_batch
from moldau.storage.follower_append import plan_follower_append
from moldau.storage.segment import AppendedBatch
from tests.unit.storage.batches import START_MS, batches_of, make_batch, values

SEGMENT_BYTES = 1 << 20


def _stored_at(raw: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """`raw` as a leader stored it: base offset and partition leader epoch set (both outside the CRC)."""
    batch = bytearray(raw)
    struct.pack_into(">q", batch, 0, base_offset)
    struct.pack_into(">i", batch, 12, leader_epoch)
    return bytes(batch)


def test_batches_are_stored_at_their_own_offsets_gaps_included() -> None:
    raw = [_stored_at(make_batch(values(3)), 5, 1), _stored_at(make_batch(values(2)), 20, 2)]
    plan = plan_follower_append(batches_of(*raw), 5, SEGMENT_BYTES, "t-0")
    assert plan.stored == (AppendedBatch(5, 8, START_MS, len(raw[0])), AppendedBatch(20, 22, START_MS, len(raw[1])))
    assert plan.epochs == ((1, 5), (2, 20))
    assert plan.markers == (None, None)
    assert plan.total_bytes == len(raw[0]) + len(raw[1])


def test_a_marker_is_read_before_anything_is_written() -> None:
    marker = _stored_at(build_marker_batch(7, 0, False, 3, START_MS), 4, 1)
    plan = plan_follower_append(batches_of(marker), 4, SEGMENT_BYTES, "t-0")
    assert plan.markers == (TransactionMarker(commit=False, coordinator_epoch=3),)


@pytest.mark.parametrize("raw", [
    [_stored_at(make_batch(values(2)), 3, 0)],  # below the log end
    [_stored_at(make_batch(values(2)), 4, 0)],  # overlaps the log's last offset
    [_stored_at(make_batch(values(2)), 5, 0), _stored_at(make_batch(values(2)), 6, 0)],  # overlap each other
    [_stored_at(make_batch(values(2)), 9, 0), _stored_at(make_batch(values(2)), 5, 0)],  # go backwards
])
def test_offsets_overlapping_the_log_or_going_backwards_are_refused(raw: list[bytes]) -> None:
    with pytest.raises(KafkaError) as e:
        plan_follower_append(batches_of(*raw), 5, SEGMENT_BYTES, "t-0")
    assert e.value.code == ErrorCode.unknown_server_error
    assert "t-0" in str(e.value)


def test_no_batches_are_refused() -> None:
    with pytest.raises(KafkaError) as e:
        plan_follower_append([], 0, SEGMENT_BYTES, "t-0")
    assert e.value.code == ErrorCode.unknown_server_error


def test_a_batch_shorter_than_its_header_says_is_refused() -> None:
    [(header, view)] = batches_of(_stored_at(make_batch(values(2)), 0, 0))
    with pytest.raises(KafkaError) as e:
        plan_follower_append([(header, view[:-1])], 0, SEGMENT_BYTES, "t-0")
    assert e.value.code == ErrorCode.corrupt_message


def test_more_than_a_segment_holds_is_refused_whole() -> None:
    raw = [_stored_at(make_batch(values(2, size=100)), 2 * i, 0) for i in range(4)]
    total = sum(len(r) for r in raw)
    assert plan_follower_append(batches_of(*raw), 0, total, "t-0").total_bytes == total
    with pytest.raises(KafkaError) as e:
        plan_follower_append(batches_of(*raw), 0, total - 1, "t-0")
    assert e.value.code == ErrorCode.record_list_too_large
