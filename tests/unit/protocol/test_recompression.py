"""Broker-side recompression: a batch in another codec than the topic's is re-encoded with everything but its
records section's encoding kept; batches already right, or `producer`, pass through as the same bytes."""

from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.protocol.compression import CODECS, Compression
from moldau.protocol.recompression import recompress
from moldau.protocol.record_batch import split_batches
from moldau.protocol.record_validation import RecordErrors

RECORDS = [(b"k%d" % i, b"value %d " % i * 20, [("h", b"x")]) for i in range(50)]


def batch(codec: int, transactional: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(2, codec, transactional, 4242, 3, 17, 1 << 20)
    for i, (key, value, headers) in enumerate(RECORDS):
        builder.append(i, 1_700_000_000_000 + i, key, value, headers)
    return bytes(builder.build())


def decoded(data: bytes) -> DefaultRecordBatch:
    found = DefaultRecordBatch(data)
    assert found.validate_crc()
    return found


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("transactional", [False, True])
def test_a_batch_is_stored_in_the_topic_codec_with_its_identity_kept(target: str, transactional: bool) -> None:
    sent = batch(DefaultRecordBatch.CODEC_LZ4 if target != "lz4" else DefaultRecordBatch.CODEC_GZIP, transactional)
    stored = recompress(split_batches(sent), Compression(target, gzip_level=9, lz4_level=17, zstd_level=19))
    assert stored is not None and len(stored) == 1
    header, view = stored[0]
    out, before = decoded(bytes(view)), decoded(sent)
    assert out.compression_type == CODECS[target] == header.compression
    for field in ("producer_id", "producer_epoch", "base_sequence", "is_transactional", "first_timestamp",
                  "max_timestamp", "last_offset_delta", "records_count", "base_offset"):
        assert getattr(out, field) == getattr(before, field), field
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == \
        [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in before]


def test_batches_already_right_pass_through_as_they_came() -> None:
    zstd, lz4 = batch(DefaultRecordBatch.CODEC_ZSTD), batch(DefaultRecordBatch.CODEC_LZ4)
    assert recompress(split_batches(zstd), Compression("zstd")) is None
    assert recompress(split_batches(lz4), Compression("producer")) is None
    # Of several batches only the one in another codec is rewritten; the other is the request's own bytes.
    mixed = split_batches(zstd + lz4)
    stored = recompress(mixed, Compression("zstd"))
    assert stored is not None and stored[0][1] is mixed[0][1]
    assert decoded(bytes(stored[1][1])).compression_type == DefaultRecordBatch.CODEC_ZSTD


def test_a_corrupt_batch_is_not_laundered() -> None:
    good = bytearray(batch(DefaultRecordBatch.CODEC_LZ4))
    good[-5] ^= 0xFF  # inside the compressed payload: the CRC no longer matches
    # (The produce path's split_batches refuses it first; recompression must not depend on that.)
    batches = split_batches(bytes(good), verify_crc=False)
    stored = recompress(batches, Compression("zstd"))
    assert stored is not None and stored[0][1] is batches[0][1]  # left for the log to refuse


def test_a_payload_that_does_not_decompress_is_corrupt_message() -> None:
    builder = bytearray(batch(DefaultRecordBatch.CODEC_LZ4))
    builder[61:] = b"\x00" * (len(builder) - 61)  # garbage payload, CRC fixed up below
    struct.pack_into(">I", builder, 17, crc32c.crc32c(bytes(builder[21:])))
    with pytest.raises(RecordErrors):
        recompress(split_batches(bytes(builder)), Compression("zstd"))
