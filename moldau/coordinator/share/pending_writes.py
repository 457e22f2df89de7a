"""The share coordinator's writes waiting to be appended together: one batch per partition of `__share_group_state`.

A write is staged at once (its records encoded, the coordinator's view of the state after it updated, so the next
write is laid over it) and waits for the flush its linger arranges (`moldau.coordinator.append_linger`). The flush
appends each partition's records as one batch and tells each write where its records landed. When a partition's
append fails, every write of its batch fails, and the changes staging made are undone, newest first, so the
coordinator's view is again what the log holds: Kafka reverts its state to the batch's base offset the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from moldau.coordinator.internal_topic import build_batch
from moldau.coordinator.log import Appended

__all__ = ["PendingWrites"]

Record = tuple[bytes, bytes | None]
Undo = Callable[[], None]


@dataclass(slots=True)
class _Waiter:
    future: asyncio.Future[Appended]
    first: int  # the index of the write's first record in the batch
    count: int


@dataclass(slots=True)
class _PartitionBatch:
    now_ms: int  # the batch's timestamp: its first write's time
    records: list[Record] = field(default_factory=list)
    waiters: list[_Waiter] = field(default_factory=list)
    undo: list[Undo] = field(default_factory=list)


class PendingWrites:
    def __init__(self) -> None:
        self._batches: dict[int, _PartitionBatch] = {}
        self.bytes = 0  # the waiting records' keys and values

    def __bool__(self) -> bool:
        return bool(self._batches)

    def add(self, partition: int, records: Sequence[Record], now_ms: int, undo: Undo) -> asyncio.Future[Appended]:
        """Stage a write of `records` to `partition`; `undo` reverts what staging it changed. The future is where
        the records landed, or the KafkaError of the append."""
        batch = self._batches.get(partition)
        if batch is None:
            batch = self._batches[partition] = _PartitionBatch(now_ms)
        future: asyncio.Future[Appended] = asyncio.get_running_loop().create_future()
        batch.waiters.append(_Waiter(future, len(batch.records), len(records)))
        batch.records += records
        batch.undo.append(undo)
        self.bytes += sum(len(key) + len(value or b"") for key, value in records)
        return future

    def flush(self, append: Callable[[int, bytes], Appended], codec: int) -> None:
        """Append each partition's waiting records as one batch (`append(partition, batch)`, which raises
        KafkaError) in `codec`, and answer the writes: where their records landed, or the append's error."""
        batches, self._batches, self.bytes = self._batches, {}, 0
        for partition, batch in batches.items():
            try:
                appended = append(partition, build_batch(batch.records, batch.now_ms, codec=codec))
            except Exception as exc:  # the log's refusal (KafkaError), or a bug: the batch's writes fail with it
                for undo in reversed(batch.undo):
                    undo()
                _fail(batch.waiters, exc)
                continue
            for waiter in batch.waiters:
                first = appended.first_offset + waiter.first
                if not waiter.future.done():  # its writer went away: the write stands, the answer goes to no one
                    waiter.future.set_result(Appended(first, first + waiter.count - 1))


def _fail(waiters: list[_Waiter], exc: Exception) -> None:
    for waiter in waiters:
        if not waiter.future.done():
            waiter.future.set_exception(exc)
