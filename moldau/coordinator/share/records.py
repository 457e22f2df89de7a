"""The records of `__share_group_state`: ShareSnapshot records (the whole durable state of a share-partition) and
ShareUpdate records (the state batches one write changed, applied over the snapshot before them).

The layout is Kafka's. The key's leading int16 is the record type (0 ShareSnapshot, 1 ShareUpdate); both keys
hold the same fields. Values are flexible versions, with compact arrays and tagged fields:

    key   (int16 type 0 or 1): group_id string, topic_id uuid, partition int32
    ShareSnapshotValue (int16 version 0): snapshot_epoch uint16, state_epoch int32, leader_epoch int32,
                             start_offset int64, state_batches [first_offset int64, last_offset int64,
                             delivery_state int8, delivery_count int16]
    ShareUpdateValue (int16 version 0): snapshot_epoch int32, leader_epoch int32, start_offset int64 (-1: not
                             moved), state_batches [as above]; tagged field 0 (DeliveryCompleteCount) is skipped

A null value (a tombstone) under either key means the share-partition's state was deleted.

A share-partition is placed on partition `abs(javaStringHashCode("group:topicId:partition")) % partitions`, the
key FindCoordinator's share key type (2) names.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from moldau.coordinator.record_codec import Reader, RecordFormatError, Writer

SHARE_STATE_TOPIC = "__share_group_state"
KEY_VERSION = 0  # the ShareSnapshot record type
UPDATE_KEY_VERSION = 1  # the ShareUpdate record type
VALUE_VERSION = 0
UPDATE_VALUE_VERSION = 0

_U16 = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class StateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int

    @property
    def coordinator_key(self) -> str:
        """The string FindCoordinator (key type 2) and the placement hash use."""
        return f"{self.group_id}:{self.topic_id}:{self.partition}"


@dataclass(frozen=True, slots=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int  # 0 Available, 2 Acknowledged, 4 Archived
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


@dataclass(frozen=True, slots=True)
class ShareUpdate:
    """The batches one write changed; start_offset -1 when the SPSO did not move."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


def encode_key(key: StateKey, record_type: int = KEY_VERSION) -> bytes:
    writer = Writer(record_type).string(key.group_id)
    writer.buf += key.topic_id.bytes
    return bytes(writer.i32(key.partition).buf)


def decode_key(data: bytes) -> StateKey:
    """A ShareSnapshot key."""
    record_type, key = decode_record_key(data)
    if record_type != KEY_VERSION:
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} key version {record_type}")
    return key


def decode_record_key(data: bytes) -> tuple[int, StateKey]:
    """The record type (KEY_VERSION or UPDATE_KEY_VERSION) and the key."""
    reader = Reader(data)
    record_type = reader.i16()
    if record_type not in (KEY_VERSION, UPDATE_KEY_VERSION):
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} key version {record_type}")
    group_id = reader.string()
    topic_id = uuid.UUID(bytes=reader._raw(16))
    key = StateKey(group_id, topic_id, reader.i32())
    if reader.pos != len(data):
        raise RecordFormatError(f"{len(data) - reader.pos} bytes after the {SHARE_STATE_TOPIC} key")
    return record_type, key


def encode_value(snapshot: ShareSnapshot) -> bytes:
    writer = Writer(VALUE_VERSION)
    writer.buf += _U16.pack(snapshot.snapshot_epoch & 0xFFFF)
    writer.i32(snapshot.state_epoch).i32(snapshot.leader_epoch).i64(snapshot.start_offset)
    _write_batches(writer, snapshot.batches)
    _uvarint(writer, 0)
    return bytes(writer.buf)


def encode_update(update: ShareUpdate) -> bytes:
    writer = Writer(UPDATE_VALUE_VERSION)
    writer.i32(update.snapshot_epoch).i32(update.leader_epoch).i64(update.start_offset)
    _write_batches(writer, update.batches)
    _uvarint(writer, 0)
    return bytes(writer.buf)


def decode_update(data: bytes) -> ShareUpdate:
    reader = Reader(data)
    version = reader.i16()
    if version != UPDATE_VALUE_VERSION:
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} update value version {version}")
    snapshot_epoch, leader_epoch, start_offset = reader.i32(), reader.i32(), reader.i64()
    batches = _read_batches(reader, len(data))
    _skip_tagged(reader)
    _check_end(reader, data)
    return ShareUpdate(snapshot_epoch, leader_epoch, start_offset, batches)


def _write_batches(writer: Writer, batches: tuple[StateBatch, ...]) -> None:
    _uvarint(writer, len(batches) + 1)
    for batch in batches:
        writer.i64(batch.first_offset).i64(batch.last_offset).i8(batch.delivery_state).i16(batch.delivery_count)
        _uvarint(writer, 0)  # no tagged fields


def _read_batches(reader: Reader, size: int) -> tuple[StateBatch, ...]:
    count = _read_uvarint(reader) - 1
    if count < 0 or count > size:
        raise RecordFormatError(f"bad state batch count {count}")
    batches = []
    for _ in range(count):
        batch = StateBatch(reader.i64(), reader.i64(), reader.i8(), reader.i16())
        if batch.first_offset > batch.last_offset or batch.first_offset < 0:
            raise RecordFormatError(f"bad state batch {batch.first_offset}-{batch.last_offset}")
        batches.append(batch)
        _skip_tagged(reader)
    return tuple(batches)


def _check_end(reader: Reader, data: bytes) -> None:
    if reader.pos != len(data):
        raise RecordFormatError(f"{len(data) - reader.pos} bytes after a {SHARE_STATE_TOPIC} value")


def decode_value(data: bytes) -> ShareSnapshot:
    reader = Reader(data)
    version = reader.i16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} value version {version}")
    snapshot_epoch = reader.i16() & 0xFFFF
    state_epoch, leader_epoch, start_offset = reader.i32(), reader.i32(), reader.i64()
    batches = _read_batches(reader, len(data))
    _skip_tagged(reader)
    _check_end(reader, data)
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start_offset, batches)


def _uvarint(writer: Writer, value: int) -> None:
    while value >= 0x80:
        writer.buf.append((value & 0x7F) | 0x80)
        value >>= 7
    writer.buf.append(value)


def _read_uvarint(reader: Reader) -> int:
    value, shift = 0, 0
    while True:
        byte = reader.i8() & 0xFF
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
        shift += 7
        if shift > 28:
            raise RecordFormatError("varint too long")


def _skip_tagged(reader: Reader) -> None:
    for _ in range(_read_uvarint(reader)):
        _read_uvarint(reader)  # tag
        reader._raw(_read_uvarint(reader))
