"""Reading and writing the internal topics coordinators keep their state in (`__consumer_offsets`,
`__transaction_state`).

Coordinators write their records as ordinary record batches through the replica manager (acks=all, so a write is
refused when the ISR is below min.insync.replicas) and rebuild their state by reading a partition from its log
start to its log end when they become its leader. Decoding is kafka-python's `MemoryRecords`, which reads every
codec; internal topics are small and this happens once per leadership change.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from moldau.protocol.record_batch import split_batches
from moldau.replication.replica_manager import HostedPartition, ReplicaManager
from moldau.storage.log import AppendResult, PartitionLog

__all__ = ["append_records", "build_batch", "iter_batches"]

_READ_CHUNK_BYTES = 1024 * 1024
_MAX_BATCH_BYTES = 2**31 - 1


def build_batch(records: Sequence[tuple[bytes, bytes | None]], now_ms: int, *, producer_id: int = -1,
                producer_epoch: int = -1, transactional: bool = False) -> bytes:
    """One uncompressed v2 batch holding (key, value) records. Sequence -1: coordinators' batches are not
    deduplicated; for a transactional batch the producer's epoch alone fences an old producer."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=_MAX_BATCH_BYTES)
    for i, (key, value) in enumerate(records):
        builder.append(i, now_ms, key, value, [])
    return bytes(builder.build())


def append_records(replicas: ReplicaManager, hosted: HostedPartition, batch: bytes,
                   verification_guard: object | None = None) -> AppendResult:
    """Append one batch built by `build_batch` as the partition's leader, acks=all (refused when the ISR is below
    min.insync.replicas). Raises KafkaError."""
    return replicas.append_as_leader(hosted, split_batches(batch), required_acks=-1,
                                     verification_guard=verification_guard)


def iter_batches(plog: PartitionLog) -> Iterator[tuple[Any, bytes]]:
    """Every stored batch from the log start to the log end: a kafka-python batch object (iterate it for its
    records; `is_control_batch`, `is_transactional`, `producer_id` describe it) and the batch's bytes."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, _READ_CHUNK_BYTES, min_one_batch=True, max_offset=plog.log_end_offset).read_bytes()
        if not data:
            return
        batches = MemoryRecords(data)
        position = 0
        while (batch := batches.next_batch()) is not None:
            yield batch, data[position:position + batch.size_in_bytes]
            position += batch.size_in_bytes
            offset = batch.next_offset
