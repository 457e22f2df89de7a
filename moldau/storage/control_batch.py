"""Transaction markers: the control batches that end a transaction on a partition (Kafka's format).

A marker is a v2 batch with the transactional and control attribute bits set, the producer's id and epoch, base
sequence -1 and one record whose key says what happened and whose value names the transaction coordinator's
epoch (Kafka's `ControlRecordType` and `EndTransactionMarker`):

    key   = version int16 (0), type int16 (0 abort, 1 commit)
    value = version int16 (0), coordinator epoch int32

Control batches are never compressed, so the one record is read straight from the bytes after the header.
Consumers never see control records: clients skip control batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, MAGIC_V2, BatchHeader, InvalidBatch
from moldau.protocol.record_codec import StoredRecord
from moldau.protocol.record_validation import read_zigzag_varint
from moldau.storage.batch_rewrite import rebuild_batch

__all__ = ["ABORT", "COMMIT", "TransactionMarker", "build_marker_batch", "parse_marker"]

ABORT = 0
COMMIT = 1
CONTROL_ATTRIBUTES = 0x10 | 0x20  # transactional | control
NO_SEQUENCE = -1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_CONTROL_KEY_VERSION = 0
_MARKER_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """What a control batch says: a commit or an abort, written by which coordinator epoch."""

    commit: bool
    coordinator_epoch: int


def build_marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                       timestamp_ms: int) -> bytes:
    """A one-record control batch at base offset 0 (the log assigns the real offset), CRC included."""
    header = BatchHeader(
        base_offset=0, batch_length=0, partition_leader_epoch=-1, magic=MAGIC_V2, crc=0,
        attributes=CONTROL_ATTRIBUTES, last_offset_delta=0, base_timestamp=timestamp_ms, max_timestamp=timestamp_ms,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, records_count=1,
    )
    key = _KEY.pack(_CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
    value = _VALUE.pack(_MARKER_VALUE_VERSION, coordinator_epoch)
    return rebuild_batch(header, [StoredRecord(0, timestamp_ms, key, value, ())], None)


def parse_marker(batch: bytes | bytearray | memoryview) -> TransactionMarker | None:
    """The marker of a whole control batch; None for other control records (e.g. a leader change).

    Raises InvalidBatch(CORRUPT_MESSAGE) when the record cannot be read."""
    view = memoryview(batch)
    end = len(view)
    try:
        position = BATCH_HEADER_SIZE
        _, position = read_zigzag_varint(view, position, end)  # record length
        position += 1  # record attributes
        _, position = read_zigzag_varint(view, position, end)  # timestamp delta
        _, position = read_zigzag_varint(view, position, end)  # offset delta
        key_length, position = read_zigzag_varint(view, position, end)
        if key_length < _KEY.size:
            raise InvalidBatch(ErrorCode.corrupt_message, "control record key is too short")
        _, record_type = _KEY.unpack_from(view, position)
        if record_type not in (ABORT, COMMIT):
            return None
        position += key_length
        value_length, position = read_zigzag_varint(view, position, end)
        if value_length < _VALUE.size:
            raise InvalidBatch(ErrorCode.corrupt_message, "transaction marker value is too short")
        _, coordinator_epoch = _VALUE.unpack_from(view, position)
    except (IndexError, struct.error) as exc:
        raise InvalidBatch(ErrorCode.corrupt_message, f"unreadable control record: {exc}") from exc
    return TransactionMarker(record_type == COMMIT, coordinator_epoch)
