"""Kafka v2 record batch headers: parsing, validation and offset assignment, without decompression.

A v2 batch starts with a fixed 61-byte header (big-endian):

    baseOffset i64 @0, batchLength i32 @8, partitionLeaderEpoch i32 @12, magic i8 @16, crc u32 @17,
    attributes i16 @21, lastOffsetDelta i32 @23, baseTimestamp i64 @27, maxTimestamp i64 @35,
    producerId i64 @43, producerEpoch i16 @51, baseSequence i32 @53, recordsCount i32 @57

`batchLength` counts the bytes after itself, so a batch occupies `batchLength + 12` bytes. The CRC-32C
covers bytes 21..end, which is why the broker may rewrite baseOffset and partitionLeaderEpoch without
recomputing it. Nothing here looks at individual records: the broker's hot path stays per batch.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "BATCH_HEADER_SIZE",
    "BatchHeader",
    "InvalidBatch",
    "assign_offsets",
    "iter_batch_headers",
    "parse_header",
    "split_batches",
    "validate_header",
]

BATCH_HEADER_SIZE = 61
# Bytes before batchLength's coverage starts: baseOffset (8) + batchLength (4).
LOG_OVERHEAD = 12
MAGIC_V2 = 2
MAX_COMPRESSION = 4
INT32_MAX = 2**31 - 1

_MAGIC_POS = 16
_CRC_POS = 17
_ATTRIBUTES_POS = 21
_MAX_TIMESTAMP_POS = 35

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_BIT = 0x08
_TRANSACTIONAL_BIT = 0x10
_CONTROL_BIT = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
# baseOffset, batchLength, partitionLeaderEpoch: the only bytes rewritten on the common append path.
_PREFIX = struct.Struct(">qii")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")

assert _HEADER.size == BATCH_HEADER_SIZE


class InvalidBatch(KafkaError):
    """A record batch that cannot be accepted; `code` says why (CORRUPT_MESSAGE, ...)."""


class BatchHeader(NamedTuple):
    """The decoded fixed header of one v2 batch. Immutable; field names follow the Kafka spec.

    A named tuple rather than a frozen dataclass: one is made for every batch appended, and a frozen dataclass
    sets its 13 fields one `object.__setattr__` at a time (about ten times the cost of building the tuple)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def total_size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & _COMPRESSION_MASK

    @property
    def timestamp_type_is_log_append(self) -> bool:
        return bool(self.attributes & _TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0 as in Kafka."""
        seq = self.base_sequence + self.last_offset_delta
        return seq - INT32_MAX - 1 if seq > INT32_MAX else seq


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Decode the header at `pos`; raises InvalidBatch(CORRUPT_MESSAGE) if fewer than 61 bytes remain."""
    if len(buf) - pos < BATCH_HEADER_SIZE:
        raise InvalidBatch(ErrorCode.corrupt_message, "record batch header is truncated")
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def validate_header(header: BatchHeader, available_bytes: int, *, from_client: bool = True) -> None:
    """Check a header's self-consistency and that the whole batch fits in `available_bytes`.

    `from_client` applies the produce-time rule that lastOffsetDelta == recordsCount - 1; batches already
    in the log may legitimately break it once compaction exists, so recovery relaxes it.
    """
    if header.magic != MAGIC_V2:
        raise InvalidBatch(ErrorCode.unsupported_for_message_format, f"magic {header.magic} is not 2")
    size = header.total_size
    if size < BATCH_HEADER_SIZE:
        raise InvalidBatch(ErrorCode.corrupt_message, f"record batch size {size} is below the header size")
    if size > available_bytes:
        raise InvalidBatch(ErrorCode.corrupt_message, f"record batch of {size} bytes is truncated")
    if header.compression > MAX_COMPRESSION:
        raise InvalidBatch(ErrorCode.unsupported_compression_type, f"compression {header.compression}")
    if header.last_offset_delta < 0:
        raise InvalidBatch(ErrorCode.corrupt_message, "negative lastOffsetDelta")
    if from_client and (
        header.records_count <= 0 or header.last_offset_delta != header.records_count - 1
    ):
        raise InvalidBatch(
            ErrorCode.corrupt_message,
            f"inconsistent batch: {header.records_count} records, lastOffsetDelta {header.last_offset_delta}",
        )


def crc_matches(batch: bytes | bytearray | memoryview, header: BatchHeader) -> bool:
    """True when the CRC-32C of bytes 21..end equals the header's crc. `batch` is exactly one batch."""
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    return bool(crc32c.crc32c(view[_ATTRIBUTES_POS:]) == header.crc)


def split_batches(
    records: bytes | bytearray | memoryview, verify_crc: bool = True, *, from_client: bool = True
) -> list[tuple[BatchHeader, memoryview]]:
    """Split a produce request's record set into fully validated batches (views, no copies).

    The record set must consist of whole v2 batches back to back: an empty set, a truncated trailing
    batch or trailing bytes too short for a header are CORRUPT_MESSAGE. `from_client=False` is for batches
    copied from a leader's log, where compaction may have left fewer records than offsets.
    """
    view = _byte_view(records)
    end = len(view)
    if end == 0:
        raise InvalidBatch(ErrorCode.corrupt_message, "empty record set")
    batches: list[tuple[BatchHeader, memoryview]] = []
    pos = 0
    while pos < end:
        remaining = end - pos
        if remaining < BATCH_HEADER_SIZE:
            _refuse_short_batch(view, pos, remaining)
        # The header is read once and its fields compared directly: one batch per request is the common case, so
        # this loop is paid per request.
        header = BatchHeader._make(_HEADER.unpack_from(view, pos))
        # As in Kafka, a length below the smallest possible batch is corruption, whatever the magic byte says.
        if header.batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(ErrorCode.corrupt_message, f"batch at byte {pos} is shorter than a batch header")
        if header.magic != MAGIC_V2:
            raise InvalidBatch(ErrorCode.unsupported_for_message_format, "only magic 2 batches are accepted")
        validate_header(header, remaining, from_client=from_client)
        size = header.batch_length + LOG_OVERHEAD
        batch = view[pos : pos + size]
        if verify_crc and crc32c.crc32c(batch[_ATTRIBUTES_POS:]) != header.crc:
            raise InvalidBatch(ErrorCode.corrupt_message, f"CRC mismatch in batch at byte {pos}")
        batches.append((header, batch))
        pos += size
    return batches


def _refuse_short_batch(view: memoryview, pos: int, remaining: int) -> None:
    """Raise the error for a record set whose last `remaining` bytes cannot hold a batch header."""
    if remaining >= LOG_OVERHEAD and _batch_length(view, pos) < BATCH_HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatch(ErrorCode.corrupt_message, f"batch at byte {pos} is shorter than a batch header")
    # Older magics have the magic byte at the same place; report them as such even when short.
    if remaining > _MAGIC_POS and view[pos + _MAGIC_POS] != MAGIC_V2:
        raise InvalidBatch(ErrorCode.unsupported_for_message_format, "only magic 2 batches are accepted")
    parse_header(view, pos)  # raises: truncated


def _batch_length(view: memoryview, pos: int) -> int:
    return int.from_bytes(view[pos + 8 : pos + LOG_OVERHEAD], "big", signed=True)


def assign_offsets(
    batch: memoryview, base_offset: int, leader_epoch: int, log_append_time_ms: int | None
) -> list[bytes | memoryview]:
    """The byte pieces that store `batch` at `base_offset`, for one vectored write.

    Common path: a fresh 16-byte prefix (new baseOffset, the unchanged batchLength, new leader epoch)
    followed by a view of the untouched rest; the CRC stays valid because it does not cover the prefix.
    With `log_append_time_ms`, the attributes and maxTimestamp change inside the CRC-covered range, so the
    batch is copied once and its CRC recomputed (the rare LogAppendTime path).
    """
    batch_length = len(batch) - LOG_OVERHEAD
    if log_append_time_ms is None:
        return [_PREFIX.pack(base_offset, batch_length, leader_epoch), batch[_MAGIC_POS:]]
    copy = bytearray(batch)
    _PREFIX.pack_into(copy, 0, base_offset, batch_length, leader_epoch)
    (attributes,) = _ATTRIBUTES.unpack_from(copy, _ATTRIBUTES_POS)
    _ATTRIBUTES.pack_into(copy, _ATTRIBUTES_POS, attributes | _TIMESTAMP_TYPE_BIT)
    _TIMESTAMP.pack_into(copy, _MAX_TIMESTAMP_POS, log_append_time_ms)
    _CRC.pack_into(copy, _CRC_POS, crc32c.crc32c(memoryview(copy)[_ATTRIBUTES_POS:]))
    return [bytes(copy)]


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, pos: int, end: int
) -> Iterator[tuple[int, BatchHeader]]:
    """Walk stored batches in `buf[pos:end]`, yielding (position, header) for every header that lies
    wholly inside the range; a batch's body may extend past `end` (callers compare `total_size`).

    Stops quietly when the next header does not fit, so a caller reading in chunks resumes at the last
    yielded position plus its total size. Raises InvalidBatch if a size would not advance the walk.
    """
    end = min(end, len(buf))
    while end - pos >= BATCH_HEADER_SIZE:
        header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
        size = header.batch_length + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE:
            raise InvalidBatch(ErrorCode.corrupt_message, f"record batch size {size} at byte {pos}")
        yield pos, header
        pos += size


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = records if isinstance(records, memoryview) else memoryview(records)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view
