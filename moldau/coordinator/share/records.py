"""The records of `__share_group_state`: one ShareSnapshot per share-partition, the whole durable state of it.

The layout is Kafka's (ShareSnapshotKey and ShareSnapshotValue, version 0; the value is a flexible version, with
compact arrays and empty tagged fields):

    key   (int16 version 0): group_id string, topic_id uuid, partition int32
    value (int16 version 0): snapshot_epoch uint16, state_epoch int32, leader_epoch int32, start_offset int64,
                             state_batches [first_offset int64, last_offset int64, delivery_state int8,
                             delivery_count int16]

A share-partition is placed on partition `abs(javaStringHashCode("group:topicId:partition")) % partitions`, the
key FindCoordinator's share key type (2) names.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from moldau.coordinator.record_codec import Reader, RecordFormatError, Writer

SHARE_STATE_TOPIC = "__share_group_state"
KEY_VERSION = 0
VALUE_VERSION = 0

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


def encode_key(key: StateKey) -> bytes:
    writer = Writer(KEY_VERSION).string(key.group_id)
    writer.buf += key.topic_id.bytes
    return bytes(writer.i32(key.partition).buf)


def decode_key(data: bytes) -> StateKey:
    reader = Reader(data)
    version = reader.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} key version {version}")
    group_id = reader.string()
    topic_id = uuid.UUID(bytes=reader._raw(16))
    return StateKey(group_id, topic_id, reader.i32())


def encode_value(snapshot: ShareSnapshot) -> bytes:
    writer = Writer(VALUE_VERSION)
    writer.buf += _U16.pack(snapshot.snapshot_epoch & 0xFFFF)
    writer.i32(snapshot.state_epoch).i32(snapshot.leader_epoch).i64(snapshot.start_offset)
    _uvarint(writer, len(snapshot.batches) + 1)
    for batch in snapshot.batches:
        writer.i64(batch.first_offset).i64(batch.last_offset).i8(batch.delivery_state).i16(batch.delivery_count)
        _uvarint(writer, 0)  # no tagged fields
    _uvarint(writer, 0)
    return bytes(writer.buf)


def decode_value(data: bytes) -> ShareSnapshot:
    reader = Reader(data)
    version = reader.i16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown {SHARE_STATE_TOPIC} value version {version}")
    snapshot_epoch = reader.i16() & 0xFFFF
    state_epoch, leader_epoch, start_offset = reader.i32(), reader.i32(), reader.i64()
    count = _read_uvarint(reader) - 1
    if count < 0 or count > len(data):
        raise RecordFormatError(f"bad state batch count {count}")
    batches = []
    for _ in range(count):
        batches.append(StateBatch(reader.i64(), reader.i64(), reader.i8(), reader.i16()))
        _skip_tagged(reader)
    _skip_tagged(reader)
    return ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start_offset, tuple(batches))


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
