"""The records inside v2 batches, decoded and encoded, for the broker's own readers and writers.

Produce and fetch never look inside a batch (`record_batch`, `record_validation`); a few readers must:
coordinators and the schema registry replaying their internal topics, the log cleaner, timestamp lookups, share
groups copying records to a dead-letter topic. They decode here, and build new batches with `encode_record`.

Written here rather than borrowed from a client library: the client libraries' decoders come with their whole
client (kafka-python's record module loads its producer, consumer and admin client, a sixth of a second of every
broker start), and a client's builder cannot keep what the log cleaner must keep of a batch. Tests compare both
directions with kafka-python's, an independent implementation of the format.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import MAGIC_V2, BatchHeader, InvalidBatch, iter_batch_headers, parse_header
from moldau.protocol.record_validation import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    decompress_records,
    read_nullable_bytes,
    read_zigzag_varint,
)

__all__ = ["Header", "StoredRecord", "append_varint", "decode_batch", "encode_record", "whole_batches"]

# A record header: its key (UTF-8 text in Kafka) and its value.
Header = tuple[str, bytes | None]


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


def whole_batches(data: bytes | bytearray | memoryview) -> Iterator[tuple[BatchHeader, memoryview]]:
    """Each whole batch in `data`, as a log read returns it: a last batch cut short by the read's size limit is
    left out. Raises InvalidBatch when a batch size would not advance."""
    view = memoryview(data)
    for position, header in iter_batch_headers(view, 0, len(view)):
        end = position + header.total_size
        if end > len(view):
            return
        yield header, view[position:end]


def decode_batch(batch: bytes | bytearray | memoryview,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[StoredRecord]:
    """Every record of one whole v2 batch (decompressed if need be, never past `max_decompressed_bytes`).

    Raises InvalidBatch (CORRUPT_MESSAGE) when the batch cannot be read."""
    view = memoryview(batch)
    header = parse_header(view)
    if header.magic != MAGIC_V2:
        raise InvalidBatch(ErrorCode.unsupported_for_message_format, f"magic {header.magic} batch: only v2 is read")
    if header.total_size > len(view):
        raise InvalidBatch(ErrorCode.corrupt_message,
                           f"batch of {header.total_size} bytes, only {len(view)} present")
    records = decompress_records(view[:header.total_size], header, max_decompressed_bytes)
    # Every record of a LogAppendTime batch has the time the broker appended it: the batch's max timestamp.
    append_time = header.max_timestamp if header.timestamp_type_is_log_append else None
    return _decode_records(records, header, append_time)


def _decode_records(buf: bytes | memoryview, header: BatchHeader, append_time: int | None) -> list[StoredRecord]:
    out: list[StoredRecord] = []
    pos, end = 0, len(buf)
    while pos < end:
        length, pos = read_zigzag_varint(buf, pos, end, 5)
        if length <= 0 or length > end - pos:
            raise _corrupt(len(out), f"record length {length} runs past the end of the batch")
        record_end = pos + length
        timestamp_delta, pos = read_zigzag_varint(buf, pos + 1, record_end, 10)  # after the attributes byte
        offset_delta, pos = read_zigzag_varint(buf, pos, record_end, 5)
        key, pos = read_nullable_bytes(buf, pos, record_end, "key")
        value, pos = read_nullable_bytes(buf, pos, record_end, "value")
        count, pos = read_zigzag_varint(buf, pos, record_end, 5)
        if count < 0 or count > record_end - pos:
            raise _corrupt(len(out), f"invalid header count {count}")
        headers = []
        for _ in range(count):
            name, pos = read_nullable_bytes(buf, pos, record_end, "header key")
            if name is None:
                raise _corrupt(len(out), "null header key")
            header_value, pos = read_nullable_bytes(buf, pos, record_end, "header value")
            # surrogateescape: a key that is not UTF-8 survives a decode and encode (the cleaner's) unchanged.
            headers.append((name.decode("utf-8", "surrogateescape"), header_value))
        if pos != record_end:
            raise _corrupt(len(out), f"record fields end at {pos - record_end:+d} bytes from its declared length")
        timestamp = header.base_timestamp + timestamp_delta if append_time is None else append_time
        out.append(StoredRecord(header.base_offset + offset_delta, timestamp, key, value, tuple(headers)))
    if len(out) != header.records_count:
        raise InvalidBatch(ErrorCode.corrupt_message,
                           f"the batch header declares {header.records_count} records, the batch holds {len(out)}")
    return out


def _corrupt(index: int, message: str) -> InvalidBatch:
    return InvalidBatch(ErrorCode.corrupt_message, f"record {index}: {message}")


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[Header] = ()) -> None:
    """Append one record (its length first) to a records section."""
    body = bytearray(b"\x00")  # record attributes: unused in v2
    append_varint(body, timestamp_delta)
    append_varint(body, offset_delta)
    _nullable_bytes(body, key)
    _nullable_bytes(body, value)
    append_varint(body, len(headers))
    for name, header_value in headers:
        _nullable_bytes(body, name.encode("utf-8", "surrogateescape"))
        _nullable_bytes(body, header_value)
    append_varint(out, len(body))
    out += body


def _nullable_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
        return
    append_varint(out, len(data))
    out += data


def append_varint(out: bytearray, value: int) -> None:
    """Zigzag varint (Kafka's varint and varlong)."""
    n = (value << 1) ^ (value >> 63)
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
