"""The record log a coordinator keeps its state in, as the coordinator sees it, and reading it back for replay.

`CoordinatorLog` is the whole of what a coordinator asks of the partitions of its internal topic: append a
batch as the partition's leader, wait until appended records are durable (below the high watermark, on every
in-sync replica), read every batch for replay, and the partition's high watermark, log end and leader epoch.
The broker's implementation is `internal_topic.ReplicaLog`, over the replica manager; tests use an in-memory one.
Every method that needs the partition led here raises KafkaError when it is not.

`read_partition` turns the stored batches into what replay needs: data records (key, value, offset, and the
producer of a transactional batch) and transaction markers. Decoding is `moldau.protocol.record_codec`'s, which
reads every codec; internal topics are small and this happens once per leadership change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BatchHeader, InvalidBatch
from moldau.protocol.record_codec import decode_batch, whole_batches
from moldau.storage.control_batch import parse_marker

__all__ = ["NO_PRODUCER_ID", "Appended", "CoordinatorLog", "LogMarker", "LogRecord", "read_partition"]

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1


@dataclass(frozen=True, slots=True)
class Appended:
    """Where an appended batch landed: the offsets of its first and last records."""

    first_offset: int
    last_offset: int


class CoordinatorLog(Protocol):
    """The partitions of one internal topic, from the coordinator's side. Raises KafkaError where noted."""

    @property
    def topic(self) -> str: ...

    def append(self, partition: int, batch: bytes, verification_guard: object | None = None) -> Appended:
        """Append one v2 batch as the leader, acks=all (refused up front when too few replicas are in sync).
        Raises KafkaError: not the leader, or the log refused it (for a transactional batch also the producer's
        errors)."""
        ...

    async def await_durable(self, partition: int, end_offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until the high watermark reaches `end_offset`; ErrorCode.none then, else why not (leadership
        moved, too few in-sync replicas, timed out)."""
        ...

    def read_for_replay(self, partition: int) -> Iterator[bytes]:
        """The stored batches, log start to log end, as bytes holding whole batches. Raises KafkaError."""
        ...

    def high_watermark(self, partition: int) -> int:
        """Raises KafkaError."""
        ...

    def log_end_offset(self, partition: int) -> int:
        """Raises KafkaError."""
        ...

    def leader_epoch(self, partition: int) -> int:
        """The partition's leader epoch; raises KafkaError when it is not led here (the check before a load)."""
        ...

    def needs_verification(self, partition: int, producer_id: int, producer_epoch: int) -> bool:
        """Whether the producer's next transactional batch would open its transaction here, so the transaction
        coordinator must confirm it first (KIP-890). Raises KafkaError."""
        ...

    def verification_guard(self, partition: int, producer_id: int) -> object:
        """The guard to append that first batch with, once confirmed. Raises KafkaError."""
        ...


@dataclass(frozen=True, slots=True)
class LogRecord:
    """A data record read back: its key and value bytes, its offset, the end of its batch (the offset after the
    batch's last record), and the producer if its batch is transactional (else NO_PRODUCER_ID)."""

    key: bytes
    value: bytes | None
    offset: int
    batch_end: int
    producer_id: int


@dataclass(frozen=True, slots=True)
class LogMarker:
    """A transaction marker read back: the producer's transaction committed or aborted."""

    producer_id: int
    commit: bool
    offset: int


def read_partition(coordinator_log: CoordinatorLog, partition: int) -> Iterator[LogRecord | LogMarker]:
    """Everything a partition holds, in log order. Records without a key are skipped, as are control batches
    that are not transaction markers (and unreadable ones, with a warning). Raises KafkaError."""
    for data in coordinator_log.read_for_replay(partition):
        for header, batch in whole_batches(data):
            if header.is_control:
                marker = _marker(coordinator_log.topic, partition, header, batch)
                if marker is not None:
                    yield marker
                continue
            producer_id = header.producer_id if header.is_transactional else NO_PRODUCER_ID
            for rec in decode_batch(batch):
                if rec.key is not None:
                    yield LogRecord(rec.key, rec.value, rec.offset, header.next_offset, producer_id)


def _marker(topic: str, partition: int, header: BatchHeader, batch: memoryview) -> LogMarker | None:
    try:
        marker = parse_marker(batch)
    except InvalidBatch as exc:
        log.warning("skipping unreadable control batch at %s-%d@%d: %s", topic, partition, header.base_offset, exc)
        return None
    return None if marker is None else LogMarker(header.producer_id, marker.commit, header.base_offset)
