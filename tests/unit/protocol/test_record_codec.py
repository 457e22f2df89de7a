"""Records decoded and encoded by the broker's own codec, checked against kafka-python's, an independent one."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, MAGIC_V2, BatchHeader, InvalidBatch, parse_header
from moldau.protocol.record_codec import StoredRecord, decode_batch, encode_record, whole_batches
from moldau.storage.batch_rewrite import rebuild_batch

CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd
START_MS = 1_700_000_000_000

Rec = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def kafka_python_batch(records: list[Rec], compression: int = 0, base_offset: int = 0,
                       log_append_time: int | None = None) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=2**24)
    for i, (key, value, headers) in enumerate(records):
        builder.append(i, timestamp=START_MS + i * 11, key=key, value=value, headers=headers)
    out = bytearray(builder.build())
    struct.pack_into(">q", out, 0, base_offset)
    if log_append_time is not None:
        struct.pack_into(">h", out, 21, struct.unpack_from(">h", out, 21)[0] | 0x08)
        struct.pack_into(">q", out, 35, log_append_time)
        refresh_crc(out)
    return bytes(out)


def refresh_crc(out: bytearray) -> None:
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))


def as_kafka_python_reads(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, tuple[object, ...]]]:
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in DefaultRecordBatch(batch)]


def as_decoded(batch: bytes) -> list[tuple[int, int, bytes | None, bytes | None, tuple[object, ...]]]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(batch)]


RECORDS: list[Rec] = [
    (b"k0", b"v0", []),
    (None, b"no key", [("trace", b"abc"), ("empty", b""), ("null", None)]),
    (b"tombstone", None, []),
    (b"", b"", [("\u00e9t\u00e9", b"\x00\xff")]),
    (b"big", b"x" * 70_000, []),
]


@pytest.mark.parametrize("compression", CODECS)
def test_every_codec_decodes_as_kafka_python_reads_it(compression: int) -> None:
    batch = kafka_python_batch(RECORDS, compression, base_offset=1234)
    assert as_decoded(batch) == as_kafka_python_reads(batch)
    assert [r.offset for r in decode_batch(batch)] == [1234, 1235, 1236, 1237, 1238]


def test_a_log_append_time_batch_gives_every_record_the_batch_time() -> None:
    batch = kafka_python_batch(RECORDS[:3], log_append_time=START_MS + 99_000)
    assert [r.timestamp for r in decode_batch(batch)] == [START_MS + 99_000] * 3


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=300),
                          st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3)),
                min_size=1, max_size=12),
       st.sampled_from(CODECS))
def test_any_batch_decodes_as_kafka_python_reads_it_and_encodes_back_to_the_same_bytes(
        records: list[Rec], compression: int) -> None:
    batch = kafka_python_batch(records, compression)
    decoded = decode_batch(batch)
    assert as_decoded(batch) == as_kafka_python_reads(batch)
    rebuilt = rebuild_batch(parse_header(batch), decoded, None)
    assert as_kafka_python_reads(rebuilt) == as_kafka_python_reads(batch)
    if compression == 0:
        assert rebuilt == batch


def test_a_header_key_that_is_not_utf8_survives_a_decode_and_an_encode() -> None:
    body = bytearray()
    encode_record(body, 0, 0, b"k", b"v", [("ok", b"1")])
    raw_key_record = bytes(body).replace(b"\x04ok", b"\x04\xff\xfe")  # the key's length prefix, then the key
    batch = with_records(kafka_python_batch([(b"k", b"v", [("ok", b"1")])]), raw_key_record, 1)
    decoded = decode_batch(batch)
    assert rebuild_batch(parse_header(batch), decoded, None) == batch


def with_records(batch: bytes, records: bytes, count: int) -> bytes:
    out = bytearray(batch[:BATCH_HEADER_SIZE]) + records
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">i", out, 23, count - 1)
    refresh_crc(out)
    return bytes(out)


def test_whole_batches_leaves_out_a_batch_cut_short_by_a_read() -> None:
    first, second = kafka_python_batch(RECORDS[:2]), kafka_python_batch(RECORDS[2:4], base_offset=2)
    chunk = first + second[:-5]
    assert [(h.base_offset, bytes(b)) for h, b in whole_batches(chunk)] == [(0, first)]
    assert [h.base_offset for h, _ in whole_batches(first + second)] == [0, 2]
    assert list(whole_batches(first[:BATCH_HEADER_SIZE - 1])) == []


def test_a_batch_size_that_does_not_advance_is_refused() -> None:
    bad = bytearray(kafka_python_batch(RECORDS[:1]))
    struct.pack_into(">i", bad, 8, 0)
    with pytest.raises(InvalidBatch):
        list(whole_batches(bytes(bad)))


def one_record_section(record: bytes) -> bytes:
    return bytes([len(record) << 1]) + record


@pytest.mark.parametrize(("records", "count", "words"), [
    (one_record_section(b"\x00\x00\x00\x02k"), 1, "past the end"),  # key length 1, but no key bytes
    (one_record_section(b"\x00\x00\x00\x01\x01\x03"), 1, "header count"),  # -2 headers
    (one_record_section(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1, "null header key"),
    (one_record_section(b"\x00\x00\x00\x01\x01\x00\x00"), 1, "declared length"),  # one byte too many
    (one_record_section(b"\x00\x00\x00\x01\x01\x00"), 2, "declares 2 records"),
    (b"\x00", 1, "record length"),
])
def test_unreadable_records_are_corrupt(records: bytes, count: int, words: str) -> None:
    batch = with_records(kafka_python_batch([(b"k", b"v", [])]), records, count)
    with pytest.raises(InvalidBatch) as caught:
        decode_batch(batch)
    assert caught.value.code == ErrorCode.corrupt_message
    assert words in caught.value.message


def test_a_truncated_batch_and_other_magics_are_refused() -> None:
    batch = kafka_python_batch(RECORDS[:2])
    with pytest.raises(InvalidBatch) as caught:
        decode_batch(batch[:-1])
    assert caught.value.code == ErrorCode.corrupt_message
    old = bytearray(batch)
    old[16] = 1
    with pytest.raises(InvalidBatch) as caught:
        decode_batch(bytes(old))
    assert caught.value.code == ErrorCode.unsupported_for_message_format


def test_a_new_batch_from_stored_records_reads_back_in_kafka_python() -> None:
    records = [StoredRecord(i, START_MS, b"k%d" % i, b"v", (("h", None), ("i", b"1"))) for i in range(3)]
    header = BatchHeader(base_offset=0, batch_length=0, partition_leader_epoch=-1, magic=MAGIC_V2, crc=0,
                         attributes=0, last_offset_delta=2, base_timestamp=START_MS, max_timestamp=START_MS,
                         producer_id=-1, producer_epoch=-1, base_sequence=-1, records_count=3)
    batch = rebuild_batch(header, records, None)
    assert as_kafka_python_reads(batch) == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    assert DefaultRecordBatch(batch).validate_crc()
