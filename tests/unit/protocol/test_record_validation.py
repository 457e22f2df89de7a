"""Record-level validation: every record of a batch is walked before the batch is accepted."""

from __future__ import annotations

import gzip
import random
import struct

import crc32c
import pytest
import zstandard
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.protocol import record_validation as rv
from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, parse_header
from moldau.protocol.record_validation import RecordErrors, validate_batch_records

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def build(values: list[bytes | None], keys: list[bytes | None] | None = None, compression: int = 0,
          headers: list[tuple[str, bytes]] | None = None, timestamp: int = 1_700_000_000_000) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**24)
    for i, value in enumerate(values):
        key = keys[i] if keys else b"k%d" % i
        builder.append(i, timestamp=timestamp + i * 7, key=key, value=value, headers=headers or [])
    return bytes(builder.build())


def with_records(batch: bytes, records: bytes, count: int | None = None) -> bytes:
    """`batch`'s header over another records section, with its length, count and CRC made consistent."""
    out = bytearray(batch[:BATCH_HEADER_SIZE]) + records
    struct.pack_into(">i", out, 8, len(out) - 12)
    if count is not None:
        struct.pack_into(">i", out, 57, count)
        struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def validate(batch: bytes, **kwargs: object) -> rv.RecordsSummary:
    view = memoryview(batch)
    return validate_batch_records(view, parse_header(view), from_client=True, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("compression", CODECS)
def test_valid_batches_in_every_codec(compression: int) -> None:
    batch = build([b"a" * 300, None, b"c"], keys=[b"k", None, None], compression=compression,
                  headers=[("h", b"v")])
    summary = validate(batch)
    assert summary.count == 3
    assert summary.null_key_indexes == (1, 2)
    assert (summary.min_timestamp_delta, summary.max_timestamp_delta) == (0, 14)


def test_the_native_walker_is_built() -> None:
    # ./dev builds it; the pure-Python walk is only the fallback for machines without a compiler.
    assert rv.native_walker_loaded()


def test_count_that_disagrees_with_the_records() -> None:
    batch = build([b"a", b"b"])
    lying = with_records(batch, batch[BATCH_HEADER_SIZE:], count=5)
    with pytest.raises(RecordErrors) as refused:
        validate(lying)
    assert refused.value.code == ErrorCode.invalid_record
    assert refused.value.record_errors[0][0] == 2
    fewer = with_records(batch, batch[BATCH_HEADER_SIZE:], count=1)
    with pytest.raises(RecordErrors, match="more records than the 1"):
        validate(fewer)


def test_offset_deltas_must_run_from_zero() -> None:
    batch = build([b"a", b"b"])
    records = bytearray(batch[BATCH_HEADER_SIZE:])
    # Second record: length varint, attributes, timestamp delta (one byte), then the offset delta (zigzag 1 = 2).
    second = 1 + records[0] // 2
    assert records[second + 3] == 2
    records[second + 3] = 8  # offset delta 4
    with pytest.raises(RecordErrors, match="offset delta 4, expected 1") as refused:
        validate(with_records(batch, bytes(records)))
    assert refused.value.code == ErrorCode.invalid_record


@pytest.mark.parametrize("records", [
    b"\x01",  # record length -1
    b"\xfe\xff\xff\xff\x0f",  # record length far past the batch
    b"\x06\x00\x00\x00\x01\x00\x00",  # key length -1 ok, value varint, but no header count
    b"\xff\xff\xff\xff\xff\xff",  # overlong varint
    bytes(50),  # zero lengths: fields that do not fill the record
])
def test_garbage_records_are_corrupt(records: bytes) -> None:
    with pytest.raises(RecordErrors) as refused:
        validate(with_records(build([b"a"]), records, count=1))
    assert refused.value.code == ErrorCode.corrupt_message
    assert refused.value.record_errors


def test_records_larger_than_the_limit() -> None:
    with pytest.raises(RecordErrors, match="exceeds the 100-byte limit"):
        validate(build([b"x" * 200]), max_record_bytes=100)


@pytest.mark.parametrize("compression", [1, 2, 3, 4])
def test_compressed_payloads_that_do_not_decompress(compression: int) -> None:
    batch = build([b"a" * 100, b"b" * 100], compression=compression)
    payload = bytearray(batch[BATCH_HEADER_SIZE:])
    for i in range(len(payload) // 3, len(payload)):
        payload[i] ^= 0x5A
    with pytest.raises(RecordErrors) as refused:
        validate(with_records(batch, bytes(payload)))
    assert refused.value.code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)


@pytest.mark.parametrize("compress", [gzip.compress, zstandard.ZstdCompressor().compress])
def test_a_decompression_bomb_is_refused_within_its_bound(compress: object) -> None:
    batch = build([b"a"], compression=1)
    bomb = compress(bytes(50 * 1024 * 1024))  # type: ignore[operator]
    assert len(bomb) < 100_000
    codec = 1 if compress is gzip.compress else 4
    out = bytearray(with_records(batch, bomb))
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    with pytest.raises(RecordErrors, match="decompress to more than 1048576 bytes"):
        validate(bytes(out), max_decompressed_bytes=1024 * 1024)


def test_follower_batches_may_have_compaction_gaps() -> None:
    batch = bytearray(build([b"a", b"b", b"c"]))
    records = bytes(batch[BATCH_HEADER_SIZE:])
    first_len = 1 + records[0] // 2
    # Keep records 0 and 2 (as compaction would), with lastOffsetDelta 2 and a count of 2.
    second_len = 1 + records[first_len] // 2
    kept = records[:first_len] + records[first_len + second_len:]
    gap = bytearray(with_records(bytes(batch), kept, count=2))
    struct.pack_into(">i", gap, 23, 2)
    struct.pack_into(">I", gap, 17, crc32c.crc32c(bytes(gap[21:])))
    view = memoryview(bytes(gap))
    assert validate_batch_records(view, parse_header(view), from_client=False).count == 2
    with pytest.raises(RecordErrors, match="expected 1"):
        validate_batch_records(view, parse_header(view), from_client=True)


def test_native_and_python_walks_agree_on_mutated_records() -> None:
    if not rv.native_walker_loaded():
        pytest.skip("the C walker is not built")
    rng = random.Random(20261124)
    for _ in range(3000):
        values = [rng.randbytes(rng.randint(0, 40)) if rng.random() < 0.9 else None
                  for _ in range(rng.randint(1, 6))]
        keys = [rng.randbytes(rng.randint(0, 5)) if rng.random() < 0.7 else None for _ in values]
        records = bytearray(build(values, keys=keys, headers=[("h", b"x")] * rng.randint(0, 2))[BATCH_HEADER_SIZE:])
        for _ in range(rng.randint(0, 3)):
            if records:
                records[rng.randrange(len(records))] = rng.randrange(256)
        if rng.random() < 0.2:
            records = records[: rng.randrange(len(records) + 1)]
        count = len(values) + rng.choice([0, 0, 0, -1, 1])
        strict = rng.random() < 0.7
        args = (bytes(records), count, len(values) - 1, strict, rng.choice([1000, 10]))
        assert rv._NATIVE is not None
        assert rv._NATIVE(*args) == rv._walk_records_py(*args), args
