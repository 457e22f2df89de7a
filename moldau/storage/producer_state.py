"""Idempotent-producer state of one partition, after Apache Kafka's ProducerStateManager.

For every producer id the partition remembers the current epoch and the metadata of its last
`BATCHES_RETAINED` (5) batches: sequence range, offset range and timestamp. `check` decides, before any
byte is written, whether a batch is the next one in sequence, a retry of one already stored (a
duplicate: the log answers with the original offsets and writes nothing) or an error:

* an epoch older than the stored one: INVALID_PRODUCER_EPOCH;
* a newer epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
* within an epoch, the base sequence must follow the last one (int32 wraps to 0), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* an unknown producer id is accepted at any sequence: its state may have expired or been removed with
  old segments, and Kafka >= 2.5 accepts it too (rejecting would make such producers fail forever).

State is rebuilt after a restart from the newest snapshot at or below the log end offset, plus a scan
of the batch headers after it. Snapshots are `<offset, 20 digits>.snapshot` files written atomically;
their format (big-endian) is: magic "MPSS", version u16, CRC-32C u32 of the body, then the body:
producer count u32, and per producer: id i64, epoch i16, last timestamp i64, batch count u8, then per
batch: first seq i32, last seq i32, first offset i64, last offset i64, timestamp i64.

Transactions will extend `ProducerEntry` with the first offset of the producer's open transaction and
teach `update` about control batches (commit/abort markers); none of that exists yet.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import crc32c

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import INT32_MAX, BatchHeader

__all__ = [
    "BATCHES_RETAINED",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "BatchMetadata",
    "ProducerAppendDecision",
    "ProducerEntry",
    "ProducerStateManager",
    "fsync_directory",
    "snapshot_offsets",
    "write_atomically",
]

BATCHES_RETAINED = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
SNAPSHOT_SUFFIX = ".snapshot"

_MAGIC = b"MPSS"
_VERSION = 1
_FILE_HEADER = struct.Struct(">4sHI")
_COUNT = struct.Struct(">I")
_PRODUCER = struct.Struct(">qhqB")
_BATCH = struct.Struct(">iiqqq")


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One stored batch of a producer: its sequence and offset ranges and its (max) timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int


@dataclass(slots=True)
class ProducerEntry:
    """What the partition knows about one producer id."""

    producer_id: int
    epoch: int
    last_timestamp_ms: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


@dataclass(frozen=True, slots=True)
class ProducerAppendDecision:
    """The outcome of `check` for an acceptable batch: append it, or answer with `duplicate_of`."""

    duplicate_of: BatchMetadata | None = None

    @property
    def is_duplicate(self) -> bool:
        return self.duplicate_of is not None


_APPEND = ProducerAppendDecision()


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


def snapshot_offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    offsets = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == SNAPSHOT_SUFFIX and stem.isdigit():
            offsets.append(int(stem))
    return sorted(offsets)


class ProducerStateManager:
    """Per-partition producer state; owned by one `PartitionLog`, not thread-safe."""

    def __init__(
        self, directory: str, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerEntry] = {}

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return self._producers

    # -- validation and update -----------------------------------------------------------------------

    def check(
        self, header: BatchHeader, pending: Mapping[int, BatchHeader] | None = None
    ) -> ProducerAppendDecision:
        """Decide about a batch with a producer id; raises KafkaError for a fenced or out-of-order one.

        `pending` maps producer ids to the previous batch of the same append call, which is not in the
        state yet: a second batch must follow it.
        """
        previous = pending.get(header.producer_id) if pending else None
        if previous is not None:
            return _check_sequence(header, previous.producer_epoch, previous.last_sequence, None)
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return _APPEND
        return _check_sequence(header, entry.epoch, entry.last_seq, entry)

    def update(
        self, header: BatchHeader, first_offset: int, last_offset: int, timestamp_ms: int | None = None
    ) -> None:
        """Record a stored batch; `timestamp_ms` defaults to the header's max timestamp."""
        if not header.has_producer_id:
            return
        timestamp = header.max_timestamp if timestamp_ms is None else timestamp_ms
        entry = self._producers.get(header.producer_id)
        if entry is None or entry.epoch != header.producer_epoch:
            # A new epoch starts a fresh sequence space; the log is authoritative even on replay.
            entry = ProducerEntry(header.producer_id, header.producer_epoch, timestamp)
            self._producers[header.producer_id] = entry
        entry.last_timestamp_ms = timestamp
        if header.is_control:
            return  # transaction markers carry no sequence; their handling comes with transactions
        entry.batches.append(
            BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp)
        )

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild state from stored batches, in log order."""
        for header in headers:
            if header.producer_id >= 0:
                self.update(header, header.base_offset, header.last_offset)

    # -- housekeeping --------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for `producer_id_expiration_ms` or more; returns how many."""
        expired = [
            pid for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms
        ]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies below the log start offset."""
        gone = [pid for pid, entry in self._producers.items() if entry.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]

    def clear(self) -> None:
        self._producers.clear()

    # -- snapshots -----------------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def take_snapshot(self, offset: int) -> None:
        """Durably write the current state as the state at log offset `offset`."""
        body = bytearray(_COUNT.pack(len(self._producers)))
        for entry in self._producers.values():
            body += _PRODUCER.pack(entry.producer_id, entry.epoch, entry.last_timestamp_ms, len(entry.batches))
            for b in entry.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms)
        data = _FILE_HEADER.pack(_MAGIC, _VERSION, crc32c.crc32c(body)) + bytes(body)
        write_atomically(self.snapshot_path(offset), data)

    def load(self, log_end_offset: int, now_ms: int) -> int | None:
        """Replace the state with the newest valid snapshot at or below `log_end_offset`.

        Snapshots above it (from data lost in a crash) and unreadable ones are deleted. Returns the
        snapshot's offset, from which the caller replays the log, or None to replay everything.
        """
        self._producers.clear()
        for offset in reversed(snapshot_offsets(self.directory)):
            path = self.snapshot_path(offset)
            if offset > log_end_offset:
                _remove_quietly(path)
                continue
            producers = _read_snapshot(path)
            if producers is None:
                _remove_quietly(path)
                continue
            self._producers = producers
            self.remove_expired(now_ms)
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for snapshot in snapshot_offsets(self.directory):
            if snapshot > offset:
                _remove_quietly(self.snapshot_path(snapshot))

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshots older than the newest one at or below `offset` (which recovery needs)."""
        offsets = snapshot_offsets(self.directory)
        keep_from = max((o for o in offsets if o <= offset), default=None)
        if keep_from is None:
            return
        for snapshot in offsets:
            if snapshot < keep_from:
                _remove_quietly(self.snapshot_path(snapshot))


def _check_sequence(
    header: BatchHeader, epoch: int, last_seq: int | None, entry: ProducerEntry | None
) -> ProducerAppendDecision:
    if header.producer_epoch < epoch:
        raise KafkaError(
            ErrorCode.invalid_producer_epoch,
            f"producer {header.producer_id} epoch {header.producer_epoch} is older than {epoch}",
        )
    if header.producer_epoch > epoch:
        if header.base_sequence != 0:
            raise KafkaError(
                ErrorCode.out_of_order_sequence_number,
                f"producer {header.producer_id} epoch {header.producer_epoch} must start at sequence 0",
            )
        return _APPEND
    if entry is not None:
        duplicate = entry.find_duplicate(header.base_sequence, header.last_sequence)
        if duplicate is not None:
            return ProducerAppendDecision(duplicate)
    if last_seq is not None and header.base_sequence != next_sequence(last_seq):
        raise KafkaError(
            ErrorCode.out_of_order_sequence_number,
            f"producer {header.producer_id}: sequence {header.base_sequence} after {last_seq}",
        )
    return _APPEND


def _read_snapshot(path: str) -> dict[int, ProducerEntry] | None:
    """The producers stored in a snapshot file, or None when it is damaged."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        magic, version, crc = _FILE_HEADER.unpack_from(data, 0)
        body = memoryview(data)[_FILE_HEADER.size :]
        if magic != _MAGIC or version != _VERSION or crc32c.crc32c(body) != crc:
            return None
        return _decode_body(body)
    except (OSError, struct.error):
        return None


def _decode_body(body: memoryview) -> dict[int, ProducerEntry] | None:
    (count,) = _COUNT.unpack_from(body, 0)
    position = _COUNT.size
    producers: dict[int, ProducerEntry] = {}
    for _ in range(count):
        pid, epoch, last_ts, batch_count = _PRODUCER.unpack_from(body, position)
        position += _PRODUCER.size
        entry = ProducerEntry(pid, epoch, last_ts)
        for _ in range(batch_count):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
            position += _BATCH.size
        producers[pid] = entry
    return producers if position == len(body) else None


def write_atomically(path: str, data: bytes, durable: bool = True) -> None:
    """temp file + fsync + rename + directory fsync: readers see the old file or the whole new one.

    `durable=False` skips both fsyncs, for files that can be derived again if a crash loses them.
    """
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_directory(os.path.dirname(path))


def fsync_directory(directory: str) -> None:
    fd = os.open(directory or ".", os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
