"""Record-level access to stored v2 batches, for the log cleaner and the compacted-topic produce check.

The hot path never looks inside a batch; compaction has to. Records are decoded and encoded by
`moldau.protocol.record_codec`; the batch around them is built here, because a cleaned batch must keep
properties that a producer-side builder does not offer:

* the original base offset and lastOffsetDelta, even when the last records were removed, so the batch
  still ends where it ended (the log end and a producer's last sequence do not move);
* the original compression codec, even when compressing no longer pays off (Kafka re-compresses with the
  batch's codec);
* producer id, epoch, base sequence, partition leader epoch and the timestamp type;
* optionally a delete horizon (KIP-534): attribute bit 6 set and the base timestamp holding the time
  after which the batch's tombstones may go; record timestamp deltas are then relative to that value, so
  every reader still computes each record's own timestamp as base timestamp + delta.

Record headers, keys, values and timestamps are copied unchanged. Functions here are pure and
thread-safe (the cleaner thread calls them).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import crc32c

from moldau.protocol.compression import Compression
from moldau.protocol.recompression import compress
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader
from moldau.protocol.record_codec import StoredRecord, encode_record

__all__ = [
    "DELETE_HORIZON_BIT",
    "delete_horizon_ms",
    "empty_batch",
    "rebuild_batch",
]

DELETE_HORIZON_BIT = 0x40
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20
_COMPRESSION_MASK = 0x07
_ATTRIBUTES_POS = 21
_CRC_POS = 17
_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")

# Kafka's cleaner re-compresses with the batch's codec at the codec's default level.
_DEFAULT_LEVELS = Compression()


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), or None when none was set."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def rebuild_batch(header: BatchHeader, records: Sequence[StoredRecord], horizon_ms: int | None) -> bytes:
    """`header`'s batch holding only `records` (a non-empty, offset-ordered subset of its records)."""
    if not records:
        raise ValueError("a rebuilt batch needs at least one record")
    log_append_time = header.timestamp_type_is_log_append
    base_timestamp = horizon_ms if horizon_ms is not None else records[0].timestamp
    body = bytearray()
    for record in records:
        encode_record(body, record.offset - header.base_offset, record.timestamp - base_timestamp, record.key,
                      record.value, record.headers)
    payload = compress(bytes(body), header.compression, _DEFAULT_LEVELS)
    max_timestamp = header.max_timestamp if log_append_time else max(r.timestamp for r in records)
    attributes = header.attributes & ~DELETE_HORIZON_BIT
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    return _pack(header, attributes, base_timestamp, max_timestamp, len(records), payload)


def empty_batch(header: BatchHeader) -> bytes:
    """A header-only batch standing for `header`'s batch after all its records went, as Kafka keeps a
    producer's last batch so that its sequence and epoch survive compaction."""
    attributes = header.attributes & (_TIMESTAMP_TYPE_BIT | _TRANSACTIONAL_BIT | _CONTROL_BIT)
    return _pack(header, attributes, header.max_timestamp, header.max_timestamp, 0, b"")


def _pack(header: BatchHeader, attributes: int, base_timestamp: int, max_timestamp: int, count: int,
          payload: bytes) -> bytes:
    out = bytearray(BATCH_HEADER_SIZE)
    _HEADER.pack_into(
        out, 0, header.base_offset, BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        header.partition_leader_epoch, MAGIC_V2, 0, attributes, header.last_offset_delta, base_timestamp,
        max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence, count,
    )
    out += payload
    _CRC.pack_into(out, _CRC_POS, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_POS:]))
    return bytes(out)
