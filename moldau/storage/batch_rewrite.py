"""Record-level access to stored v2 batches, for the log cleaner and the compacted-topic produce check.

The hot path never looks inside a batch; compaction has to. Decoding (every codec) is kafka-python's
`DefaultRecordBatch`; encoding is done here, because a cleaned batch must keep properties that a
producer-side builder does not offer:

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import crc32c
from kafka.codec import gzip_encode, lz4_encode, snappy_encode, zstd_encode
from kafka.record.default_records import DefaultRecordBatch

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, BatchHeader

__all__ = [
    "DELETE_HORIZON_BIT",
    "StoredRecord",
    "decode_records",
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

_COMPRESSORS: dict[int, Callable[[bytes], bytes]] = {
    1: gzip_encode,
    2: snappy_encode,  # xerial framing, as Kafka's Java client writes it
    3: lz4_encode,
    4: zstd_encode,
}


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def decode_records(batch: bytes | bytearray | memoryview) -> list[StoredRecord]:
    """Every record of one whole stored batch; raises KafkaError(CORRUPT_MESSAGE) if it cannot be read."""
    try:
        return [
            StoredRecord(int(r.offset), int(r.timestamp), r.key, r.value, tuple(r.headers))
            for r in DefaultRecordBatch(bytes(batch))
        ]
    except Exception as e:
        # Decompressors and the record parser raise many unrelated types on bad input; all mean "corrupt".
        raise KafkaError(ErrorCode.corrupt_message, f"undecodable record batch: {e}") from e


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
        _append_record(body, record, record.offset - header.base_offset, record.timestamp - base_timestamp)
    codec = header.compression
    payload = _COMPRESSORS[codec](bytes(body)) if codec else bytes(body)
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


def _append_record(out: bytearray, record: StoredRecord, offset_delta: int, timestamp_delta: int) -> None:
    body = bytearray(b"\x00")  # record attributes: unused in v2
    _varint(body, timestamp_delta)
    _varint(body, offset_delta)
    _nullable_bytes(body, record.key)
    _nullable_bytes(body, record.value)
    _varint(body, len(record.headers))
    for name, value in record.headers:
        _nullable_bytes(body, name.encode("utf-8"))
        _nullable_bytes(body, value)
    _varint(out, len(body))
    out += body


def _nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _varint(out, -1)
        return
    _varint(out, len(data))
    out += data


def _varint(out: bytearray, value: int) -> None:
    """Zigzag varint (Kafka's varint/varlong)."""
    n = (value << 1) ^ (value >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
