"""Record-level validation of v2 record batches, as Kafka's LogValidator does it before acknowledging.

A batch whose header and CRC are sound can still lie about its records: a count that disagrees with the
records present, offset deltas past the batch, broken varints, lengths that run past the batch, a compressed
payload that does not decompress. Once acknowledged, such a batch stops every consumer of its partition. So
every record of every batch is walked before it is appended:

- the records fill the batch exactly, each record's fields fill its declared length exactly, and there are
  exactly `recordsCount` of them;
- offset deltas run 0..count-1 for batches from clients; batches copied from a leader's log may have gaps left
  by compaction, so there they only have to increase and stay within `lastOffsetDelta`;
- no record is larger than `max_record_bytes` (`message.max.bytes`);
- compressed payloads (gzip, snappy raw or xerial-framed, lz4 frame, zstd) decompress within an output bound
  (`max_decompressed_bytes`), so a decompression bomb is refused after using at most that much memory.

The walk returns what later checks need (smallest and largest timestamp delta, which records have no key), so
timestamp bounds and compacted topics' keys are checked without a second walk.

The record walk runs for every produced byte, so it exists twice: `moldau._records` is a small C extension
built at install time, and `_walk_records_py` below is the same walk in Python, used where no compiler was
available. Both are tested against each other on valid and corrupt inputs.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import cramjam
import lz4.frame
import zstandard

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, BatchHeader, InvalidBatch

__all__ = [
    "RecordErrors",
    "RecordsCheck",
    "RecordsSummary",
    "decompress_records",
    "key_values",
    "native_walker_loaded",
    "read_nullable_bytes",
    "read_zigzag_varint",
    "validate_batch_records",
    "walk_records",
]

log = logging.getLogger(__name__)

NO_INDEX = -1
# Kafka never produces a decompressed batch larger than what a client may send in one request; the default
# bound follows socket.request.max.bytes (callers pass the broker's value).
DEFAULT_MAX_DECOMPRESSED_BYTES = 100 * 1024 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16


class RecordErrors(InvalidBatch):
    """A refused batch, with Kafka's per-record errors: (index of the record in its batch, message)."""

    def __init__(self, code: ErrorCode, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(code, message)
        self.record_errors = record_errors


@dataclass(slots=True)  # one per appended batch: not frozen, whose __init__ costs several times as much
class RecordsSummary:
    """What the walk learnt of a valid batch's records."""

    count: int
    min_timestamp_delta: int
    max_timestamp_delta: int
    null_key_indexes: tuple[int, ...]


# (records, count, last offset delta, strict offsets, max record bytes)
#   -> (error index or -1, error kind, message, min ts delta, max ts delta, null-key indexes)
# error kind: 0 corrupt (CORRUPT_MESSAGE), 1 inconsistent with the header (INVALID_RECORD).
WalkResult = tuple[int, int, str, int, int, list[int]]
Walker = Callable[[bytes | memoryview, int, int, bool, int], WalkResult]

_CORRUPT, _INCONSISTENT = 0, 1

# A further check of a client batch's records once the walk found them sound: given the batch's header and its
# (decompressed) records section; raises RecordErrors. Broker-side schema validation is one (moldau.registry).
RecordsCheck = Callable[[BatchHeader, bytes | memoryview], None]


def validate_batch_records(
    batch: memoryview, header: BatchHeader, *, from_client: bool,
    max_record_bytes: int = 2**31 - 1, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    records_check: RecordsCheck | None = None,
) -> RecordsSummary:
    """Walk every record of one whole batch; raise RecordErrors if any is corrupt or inconsistent, or if
    `records_check` refuses the sound records (it is given them decompressed, so nothing decompresses twice)."""
    records = decompress_records(batch, header, max_decompressed_bytes)
    index, kind, message, min_ts, max_ts, null_keys = walk_records(
        records, header.records_count, header.last_offset_delta, from_client, max_record_bytes)
    if index != NO_INDEX:
        code = ErrorCode.corrupt_message if kind == _CORRUPT else ErrorCode.invalid_record
        raise RecordErrors(code, f"record {index} of the batch at offset delta range "
                           f"0..{header.last_offset_delta}: {message}", [(index, message)])
    if records_check is not None:
        records_check(header, records)
    return RecordsSummary(header.records_count, min_ts, max_ts, tuple(null_keys))


def decompress_records(batch: memoryview, header: BatchHeader, limit: int) -> bytes | memoryview:
    """The batch's records section, decompressed if need be, never more than `limit` bytes."""
    payload = batch[BATCH_HEADER_SIZE:]
    codec = header.compression
    if codec == 0:
        return payload
    try:
        data = _DECOMPRESSORS[codec](payload, limit)
    except RecordErrors:
        raise
    except Exception as exc:
        # Each codec raises its own types on bad input; all of them mean a corrupt batch.
        raise RecordErrors(ErrorCode.corrupt_message, f"compressed records do not decompress: {exc}",
                           [(0, "compressed records do not decompress")]) from exc
    if len(data) > limit:
        raise _too_large(limit)
    return data


def _too_large(limit: int) -> RecordErrors:
    message = f"records decompress to more than {limit} bytes"
    return RecordErrors(ErrorCode.corrupt_message, message, [(0, message)])


def _gunzip(payload: memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
    data = inflater.decompress(payload, limit + 1)
    if not inflater.eof and len(data) <= limit:
        raise ValueError("gzip stream is truncated")
    return data


def _snappy(payload: memoryview, limit: int) -> bytes:
    if bytes(payload[:8]) == _XERIAL_MAGIC:
        return _xerial_snappy(payload, limit)
    return _raw_snappy(payload, limit)


def _raw_snappy(block: memoryview | bytes, limit: int) -> bytes:
    # Raw snappy starts with the uncompressed length as a varint: refuse a bomb before allocating.
    length = shift = 0
    for pos in range(min(len(block), 5)):
        length |= (block[pos] & 0x7F) << shift
        shift += 7
        if not block[pos] & 0x80:
            break
    if length > limit:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(bytes(block)))


def _xerial_snappy(payload: memoryview, limit: int) -> bytes:
    # Java's SnappyOutputStream framing: a 16-byte header, then blocks of (int32 length, raw snappy block).
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(payload):
        if pos + 4 > len(payload):
            raise ValueError("xerial snappy block length is truncated")
        size = int.from_bytes(payload[pos : pos + 4], "big", signed=True)
        pos += 4
        if size < 0 or pos + size > len(payload):
            raise ValueError(f"xerial snappy block of {size} bytes runs past the payload")
        out += _raw_snappy(payload[pos : pos + size], limit - len(out))
        pos += size
    return bytes(out)


def _lz4(payload: memoryview, limit: int) -> bytes:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    data: bytes = decompressor.decompress(bytes(payload), max_length=limit + 1)
    if not decompressor.eof and len(data) <= limit:
        raise ValueError("lz4 frame is truncated")
    return data


def _zstd(payload: memoryview, limit: int) -> bytes:
    # A streaming read: a frame header may declare any content size, so never let it size the output.
    reader = zstandard.ZstdDecompressor().stream_reader(bytes(payload), read_across_frames=True)
    out = bytearray()
    while len(out) <= limit:
        chunk = reader.read(min(limit + 1 - len(out), 1 << 20))  # a read may return less than asked
        if not chunk:
            break
        out += chunk
    return bytes(out)


_DECOMPRESSORS: dict[int, Callable[[memoryview, int], bytes]] = {1: _gunzip, 2: _snappy, 3: _lz4, 4: _zstd}


# -- the walk ----------------------------------------------------------------------------------------------------

class _Corrupt(InvalidBatch):
    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.corrupt_message, message)


def read_zigzag_varint(buf: bytes | memoryview, pos: int, end: int, max_bytes: int = 10) -> tuple[int, int]:
    """A zigzag-encoded signed varint of a record's fields (5 bytes at most for int32 fields, 10 for int64):
    (value, position after it). Raises InvalidBatch(CORRUPT_MESSAGE)."""
    raw = shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Corrupt("varint runs past the end of the record")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise _Corrupt(f"varint longer than {max_bytes} bytes")



def _skip_bytes(buf: bytes | memoryview, pos: int, end: int, what: str, nullable: bool) -> tuple[int, bool]:
    """A length-prefixed field: returns (position after it, whether it was null)."""
    length, pos = read_zigzag_varint(buf, pos, end, 5)
    if length < 0:
        if length == -1 and nullable:
            return pos, True
        raise _Corrupt(f"invalid {what} length {length}")
    if length > end - pos:
        raise _Corrupt(f"{what} of {length} bytes runs past the end of the record")
    return pos + length, False


def _walk_records_py(buf: bytes | memoryview, count: int, last_offset_delta: int, strict: bool,
                     max_record_bytes: int) -> WalkResult:
    """The reference walk; `moldau._records.walk_records` does exactly this in C."""
    end = len(buf)
    pos = index = 0
    previous_delta = -1
    min_ts = max_ts = 0
    null_keys: list[int] = []
    try:
        while pos < end:
            if index >= count:
                return (index, _INCONSISTENT, f"more records than the {count} the batch header declares",
                        0, 0, [])
            length, pos = read_zigzag_varint(buf, pos, end, 5)
            if length < 0 or length > end - pos:
                raise _Corrupt(f"record length {length} runs past the end of the batch")
            if length > max_record_bytes:
                raise _Corrupt(f"record of {length} bytes exceeds the {max_record_bytes}-byte limit")
            record_end = pos + length
            pos += 1  # attributes
            ts_delta, pos = read_zigzag_varint(buf, pos, record_end, 10)
            offset_delta, pos = read_zigzag_varint(buf, pos, record_end, 5)
            if strict and offset_delta != index:
                return (index, _INCONSISTENT, f"offset delta {offset_delta}, expected {index}", 0, 0, [])
            if not strict and not previous_delta < offset_delta <= last_offset_delta:
                return (index, _INCONSISTENT, f"offset delta {offset_delta} out of order or past "
                        f"the batch's last offset delta {last_offset_delta}", 0, 0, [])
            previous_delta = offset_delta
            pos, key_is_null = _skip_bytes(buf, pos, record_end, "key", nullable=True)
            if key_is_null:
                null_keys.append(index)
            pos, _ = _skip_bytes(buf, pos, record_end, "value", nullable=True)
            headers, pos = read_zigzag_varint(buf, pos, record_end, 5)
            if headers < 0 or headers > record_end - pos:
                raise _Corrupt(f"invalid header count {headers}")
            for _ in range(headers):
                pos, _ = _skip_bytes(buf, pos, record_end, "header key", nullable=False)
                pos, _ = _skip_bytes(buf, pos, record_end, "header value", nullable=True)
            if pos != record_end:
                raise _Corrupt(f"record fields end at {pos - record_end:+d} bytes from its declared length")
            if index == 0 or ts_delta < min_ts:
                min_ts = ts_delta
            if index == 0 or ts_delta > max_ts:
                max_ts = ts_delta
            index += 1
    except _Corrupt as exc:
        return index, _CORRUPT, exc.message, 0, 0, []
    if index != count:
        return (index, _INCONSISTENT, f"the batch header declares {count} records, the batch holds {index}",
                0, 0, [])
    return NO_INDEX, 0, "", min_ts, max_ts, null_keys


def read_nullable_bytes(buf: bytes | memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    """A length-prefixed record field that may be null: (its bytes or None, position after it). Raises
    InvalidBatch(CORRUPT_MESSAGE)."""
    length, pos = read_zigzag_varint(buf, pos, end, 5)
    if length == -1:
        return None, pos
    if length < 0 or length > end - pos:
        raise _Corrupt(f"invalid {what} length {length}")
    return bytes(buf[pos : pos + length]), pos + length


def _key_values_py(buf: bytes | memoryview) -> list[tuple[bytes | None, bytes | None]]:
    """The (key, value) of every record of a (decompressed) records section, for schema validation; raises
    ValueError where the records do not parse. `moldau._records.key_values` does exactly this in C."""
    out = []
    pos, end = 0, len(buf)
    try:
        while pos < end:
            length, pos = read_zigzag_varint(buf, pos, end, 5)
            if length <= 0 or length > end - pos:
                raise ValueError(f"record length {length} runs past the end of the batch")
            record_end = pos + length
            _, pos = read_zigzag_varint(buf, pos + 1, record_end, 10)  # after the attributes: timestamp delta
            _, pos = read_zigzag_varint(buf, pos, record_end, 5)  # offset delta
            key, pos = read_nullable_bytes(buf, pos, record_end, "key")
            value, pos = read_nullable_bytes(buf, pos, record_end, "value")
            out.append((key, value))
            pos = record_end  # headers are not needed
    except InvalidBatch as exc:
        raise ValueError(exc.message) from exc
    return out


def _load_native_walker() -> Walker | None:
    if os.environ.get("MOLDAU_PURE_PYTHON_RECORDS"):
        return None
    try:
        from moldau import _records  # type: ignore[attr-defined]
    except ImportError:
        log.warning("moldau._records (C) is not built: record validation runs in pure Python, several times "
                    "slower; reinstall with a C compiler present (./dev does it) to build it")
        return None
    walker: Walker = _records.walk_records
    return walker


_NATIVE = _load_native_walker()
walk_records: Walker = _NATIVE or _walk_records_py
KeyValues = Callable[[bytes | memoryview], list[tuple[bytes | None, bytes | None]]]
key_values: KeyValues = _key_values_py
if _NATIVE is not None:
    from moldau import _records  # type: ignore[attr-defined]

    key_values = getattr(_records, "key_values", _key_values_py)  # an extension built before it had one


def native_walker_loaded() -> bool:
    return _NATIVE is not None


def decompress_payload(codec: int, payload: bytes | memoryview, limit: int) -> bytes:
    """A whole payload compressed with a Kafka codec (1 gzip, 2 snappy, 3 lz4, 4 zstd; 0 none), as KIP-714's
    pushed client metrics are; never more than `limit` bytes. Raises RecordErrors (CORRUPT_MESSAGE) when it
    does not decompress, or decompresses past the limit, and KeyError for an unknown codec."""
    if codec == 0:
        return bytes(payload)
    decompress = _DECOMPRESSORS[codec]
    try:
        data = decompress(memoryview(payload), limit)
    except RecordErrors:
        raise
    except Exception as exc:
        raise RecordErrors(ErrorCode.corrupt_message, f"payload does not decompress: {exc}",
                           [(0, "payload does not decompress")]) from exc
    if len(data) > limit:
        raise _too_large(limit)
    return bytes(data)
