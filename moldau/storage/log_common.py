"""Small pieces shared by `PartitionLog` and the modules it delegates to.

The answers a partition log gives (`AppendResult`, `ReadResult`, `ActiveProducer`), the one way an OSError
becomes a protocol error, the lookup of the segment holding an offset, and the `.txnindex` entry of an
abort (written both by appends and by recovery's replay). They live apart from `log.py` so
that the loading, retention, follower-append and truncation modules can use them without importing the
log itself (which imports them).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.producer_state import CompletedTxn, ProducerStateManager
from moldau.storage.segment import FileSlice
from moldau.storage.transaction_index import AbortedTxn
from moldau.text import ascii_digits

__all__ = [
    "ActiveProducer",
    "AppendResult",
    "ReadResult",
    "aborted_entry",
    "parse_partition_dir_name",
    "segment_index",
    "storage_error",
]


class AppendResult(NamedTuple):
    """Offsets given to an append; for a duplicate (`duplicate=True`) those of the original batch."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 for CreateTime topics
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    """A producer as DescribeProducers shows it; -1 for what is unknown or absent."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches for a fetch (possibly none), plus the partition's offsets at read time."""

    slices: tuple[FileSlice, ...]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.slices)

    def read_bytes(self) -> bytes:
        """The batches as bytes: one pread per slice (a fetch may sendfile the slices instead)."""
        if len(self.slices) == 1:
            return self.slices[0].read_bytes()
        return b"".join(s.read_bytes() for s in self.slices)

    @property
    def records(self) -> bytes:
        """Same as `read_bytes()`: reads the file on every access."""
        return self.read_bytes()


def parse_partition_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) for a directory named `<topic>-<partition>`, else None."""
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not ascii_digits(partition):
        return None
    return topic, int(partition)


def segment_index(bases: Sequence[int], offset: int) -> int:
    """Index of the segment that holds `offset` among segments with these sorted base offsets; the first
    one for an offset below them all (a log start inside the first segment)."""
    return max(bisect_right(bases, offset) - 1, 0)


def storage_error(error: OSError) -> KafkaError:
    """A failed file operation as clients see it: KAFKA_STORAGE_ERROR, whatever the errno."""
    return KafkaError(ErrorCode.kafka_storage_error, f"storage error: {error}")


def aborted_entry(producers: ProducerStateManager, completed: CompletedTxn) -> AbortedTxn:
    """The `.txnindex` entry of a transaction that just ended with an abort marker."""
    return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                      producers.stable_offset_after(completed))
