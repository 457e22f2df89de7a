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
    """One uncompressed v2 batch holding (key, value) records; sequence numbers are not used."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=_MAX_BATCH_BYTES)
    for i, (key, value) in enumerate(records):
        builder.append(i, now_ms, key, value, [])
    return bytes(builder.build())


def append_records(replicas: ReplicaManager, hosted: HostedPartition, batch: bytes) -> AppendResult:
    """Append one batch built by `build_batch` as the partition's leader, acks=all. Raises KafkaError."""
    return replicas.append_as_leader(hosted, split_batches(batch), required_acks=-1)


def iter_batches(plog: PartitionLog) -> Iterator[Any]:
    """Every stored batch from the log start to the log end, as kafka-python batch objects (iterate one for its
    records; `is_control_batch`, `is_transactional`, `producer_id` describe it)."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, _READ_CHUNK_BYTES, min_one_batch=True, max_offset=plog.log_end_offset).read_bytes()
        if not data:
            return
        batches = MemoryRecords(data)
        while (batch := batches.next_batch()) is not None:
            yield batch
            offset = batch.next_offset
