"""Record batches for storage tests, built with kafka-python (an independent implementation)."""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from moldau.protocol.record_batch import BatchHeader, split_batches

START_MS = 1_700_000_000_000


def make_batch(
    values: list[bytes], *, timestamp_ms: int = START_MS, timestamps: list[int] | None = None,
    compression: int = 0, producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 30,
    )
    for i, value in enumerate(values):
        ts = timestamps[i] if timestamps is not None else timestamp_ms
        builder.append(i, ts, b"key-%d" % i, value, [])
    return bytes(builder.build())


def batches_of(*raw: bytes) -> list[tuple[BatchHeader, memoryview]]:
    return split_batches(b"".join(raw))


def decode(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in whole batches."""
    records = MemoryRecords(data)
    out: list[tuple[int, bytes]] = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        out.extend((r.offset, r.value) for r in batch)


def decode_with_timestamps(data: bytes) -> list[tuple[int, int]]:
    records = MemoryRecords(data)
    out: list[tuple[int, int]] = []
    while True:
        batch = records.next_batch()
        if batch is None:
            return out
        out.extend((r.offset, r.timestamp) for r in batch)


def values(n: int, prefix: str = "v", size: int = 0) -> list[bytes]:
    return [(f"{prefix}{i}-" + "x" * size).encode() for i in range(n)]
