from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    InvalidBatch,
    assign_offsets,
    iter_batch_headers,
    parse_header,
    split_batches,
)
from tests.unit.storage.batches import START_MS, decode, make_batch, values


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4])
def test_header_fields_in_every_codec(compression: int) -> None:
    raw = make_batch(values(3, size=200), compression=compression, timestamps=[START_MS, START_MS + 5, START_MS + 2],
                     producer_id=42, producer_epoch=3, base_sequence=10)
    header = parse_header(raw)
    assert header.magic == 2
    assert header.total_size == len(raw)
    assert header.compression == compression
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (0, 2, 3)
    assert (header.last_offset, header.next_offset) == (2, 3)
    assert (header.base_timestamp, header.max_timestamp) == (START_MS, START_MS + 5)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
    assert header.has_producer_id and header.last_sequence == 12
    assert not header.is_transactional and not header.is_control
    assert not header.timestamp_type_is_log_append
    [(parsed, view)] = split_batches(raw)
    assert parsed == header and bytes(view) == raw


def test_flags_and_sequence_wraparound() -> None:
    raw = make_batch(values(3), producer_id=1, producer_epoch=0, base_sequence=2**31 - 2, transactional=True)
    header = parse_header(raw)
    assert header.is_transactional
    assert header.last_sequence == 0  # 2**31-2, 2**31-1, 0
    assert not parse_header(make_batch(values(1))).has_producer_id


def test_split_several_batches_without_copying() -> None:
    one, two = make_batch(values(2)), make_batch(values(5, size=100), compression=4)
    records = bytearray(one + two)
    batches = split_batches(records)
    assert [h.records_count for h, _ in batches] == [2, 5]
    assert batches[1][1].obj is records  # views into the request buffer


def test_crc_mismatch_is_corrupt() -> None:
    raw = bytearray(make_batch(values(2)))
    raw[-1] ^= 0xFF
    with pytest.raises(InvalidBatch) as e:
        split_batches(bytes(raw))
    assert e.value.code == ErrorCode.corrupt_message
    assert len(split_batches(bytes(raw), verify_crc=False)) == 1


@pytest.mark.parametrize("cut", [1, 10, BATCH_HEADER_SIZE, 70])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    raw = make_batch(values(3))
    with pytest.raises(InvalidBatch) as e:
        split_batches(raw[:-cut] if cut < len(raw) else raw[:cut])
    assert e.value.code == ErrorCode.corrupt_message


def test_trailing_partial_batch_is_corrupt() -> None:
    raw = make_batch(values(3))
    with pytest.raises(InvalidBatch) as e:
        split_batches(raw + raw[:30])
    assert e.value.code == ErrorCode.corrupt_message


def test_empty_record_set_is_corrupt() -> None:
    with pytest.raises(InvalidBatch) as e:
        split_batches(b"")
    assert e.value.code == ErrorCode.corrupt_message


def _patched(raw: bytes, fmt: str, position: int, value: int) -> bytes:
    data = bytearray(raw)
    struct.pack_into(fmt, data, position, value)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_other_magic_is_unsupported() -> None:
    raw = _patched(make_batch(values(1)), ">b", 16, 1)
    with pytest.raises(InvalidBatch) as e:
        split_batches(raw)
    assert e.value.code == ErrorCode.unsupported_for_message_format


def test_unknown_compression_is_unsupported() -> None:
    raw = _patched(make_batch(values(1)), ">h", 21, 5)
    with pytest.raises(InvalidBatch) as e:
        split_batches(raw)
    assert e.value.code == ErrorCode.unsupported_compression_type


@pytest.mark.parametrize(("fmt", "position", "value"), [(">i", 57, 0), (">i", 23, 5), (">i", 8, 20)])
def test_inconsistent_counts_and_sizes_are_corrupt(fmt: str, position: int, value: int) -> None:
    raw = _patched(make_batch(values(2)), fmt, position, value)
    with pytest.raises(InvalidBatch) as e:
        split_batches(raw)
    assert e.value.code == ErrorCode.corrupt_message


def test_assign_offsets_rewrites_prefix_only() -> None:
    raw = make_batch(values(3, size=200), compression=1)
    [(header, view)] = split_batches(raw)
    assert header.compression == 1
    pieces = assign_offsets(view, 1000, 7, None)
    stored = b"".join(pieces)
    assert isinstance(pieces[-1], memoryview) and pieces[-1].obj is raw  # the body is not copied
    assert stored[16:] == raw[16:]
    h = parse_header(stored)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (1000, 7, header.crc)
    assert decode(stored) == [(1000 + i, v) for i, v in enumerate(values(3, size=200))]
    assert DefaultRecordBatch(stored).validate_crc()


def test_assign_offsets_with_log_append_time() -> None:
    raw = make_batch(values(2), timestamp_ms=5)
    [(_, view)] = split_batches(raw)
    stored = b"".join(assign_offsets(view, 50, 1, START_MS))
    h = parse_header(stored)
    assert h.timestamp_type_is_log_append and h.max_timestamp == START_MS and h.base_offset == 50
    split_batches(stored)  # CRC recomputed
    batch = DefaultRecordBatch(stored)
    assert [r.timestamp for r in batch] == [START_MS, START_MS]


def test_iter_batch_headers_stops_at_partial_header() -> None:
    one, two = make_batch(values(2)), make_batch(values(3))
    buf = one + two + two[:20]
    found = list(iter_batch_headers(buf, 0, len(buf)))
    assert [pos for pos, _ in found] == [0, len(one)]
    # A header that fits even if its body does not is still reported.
    found = list(iter_batch_headers(buf, 0, len(one) + BATCH_HEADER_SIZE))
    assert [h.records_count for _, h in found] == [2, 3]
