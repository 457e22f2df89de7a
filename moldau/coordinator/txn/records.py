"""The durable form of transactions: records of the compacted internal topic `__transaction_state`.

The encoding is Kafka's own (`TransactionLogKey` v0 and `TransactionLogValue` v0), so Kafka's tools read these
records:

    TransactionLogKey   v0: transactional_id string
    TransactionLogValue v0: producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
                            transaction_status int8, transaction_partitions [topic string, partition_ids [int32]]
                            (nullable), transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms
                            int64

A null value is a tombstone: the transactional id expired. A transactional id is placed on partition
`abs(javaStringHashCode(id)) % partitions`, as Kafka does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from moldau.coordinator.record_codec import Reader, RecordFormatError, Writer

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

TopicPartition = tuple[str, int]


class TxnState(IntEnum):
    """Kafka's transaction states, numbered as in its log."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions and ListTransactions use ("Ongoing", "CompleteCommit", ...)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_display_name(cls, name: str) -> TxnState | None:
        return next((s for s in cls if s.display_name == name), None)


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int  # -1 when no transaction has started


def encode_key(transactional_id: str) -> bytes:
    return bytes(Writer(KEY_VERSION).string(transactional_id).buf)


def encode_value(value: TxnValue | None) -> bytes | None:
    if value is None:
        return None
    w = Writer(VALUE_VERSION).i64(value.producer_id).i16(value.producer_epoch).i32(value.timeout_ms)
    w.i8(int(value.state))
    by_topic = _by_topic(value.partitions)
    w.i32(len(by_topic))
    for topic, partitions in by_topic:
        w.string(topic).i32(len(partitions))
        for partition in partitions:
            w.i32(partition)
    return bytes(w.i64(value.last_update_ms).i64(value.start_ms).buf)


def decode_key(data: bytes) -> str:
    r = Reader(data)
    version = r.i16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown transaction key version {version}")
    return r.string()


def decode_value(data: bytes | None) -> TxnValue | None:
    if data is None:
        return None
    r = Reader(data)
    version = r.i16()
    if version not in (0, 1):
        raise RecordFormatError(f"unknown transaction value version {version}")
    if version == 1:
        raise RecordFormatError("flexible (v1) transaction values are not read yet")
    producer_id, epoch, timeout = r.i64(), r.i16(), r.i32()
    try:
        state = TxnState(r.i8())
    except ValueError as exc:
        raise RecordFormatError(str(exc)) from exc
    partitions: set[TopicPartition] = set()
    for _ in range(r.array_length()):
        topic = r.string()
        partitions.update((topic, r.i32()) for _ in range(r.array_length()))
    return TxnValue(producer_id, epoch, timeout, state, frozenset(partitions), r.i64(), r.i64())


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        grouped.setdefault(topic, []).append(partition)
    return list(grouped.items())
