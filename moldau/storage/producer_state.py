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

Transactions (KIP-98). A transactional batch of a producer without an ongoing transaction on this partition
starts one at its first offset; the transaction ends with a marker (a control batch, `control_batch`) that
`update` is given parsed. Ongoing transactions are kept in first-offset order, and completed ones whose
marker the high watermark has not passed yet in marker order, so the first unstable offset (which bounds
the last stable offset) is found without a scan. Batches with base sequence -1 (NO_SEQUENCE) are accepted
from a producer id only when transactional (the group coordinator's transactional offset commits): they
are fenced by epoch but do not touch the sequence bookkeeping. Verification guards (KIP-890) are kept per
producer in memory: `verification_guard` hands one out, a transactional batch, a marker or a newer epoch of
that producer drops it.

State is rebuilt after a restart from the newest snapshot at or below the log end offset, plus a scan
of the batch headers after it. Snapshots are `<offset, 20 digits>.snapshot` files written atomically;
their format (big-endian) is: magic "MPSS", version u16, CRC-32C u32 of the body, then the body:
producer count u32, and per producer: id i64, epoch i16, last timestamp i64, then (version 2 only)
coordinator epoch i32, first offset of the ongoing transaction i64 (-1: none) and last offset i64, then
batch count u8, then per batch: first seq i32, last seq i32, first offset i64, last offset i64, timestamp i64.
Version 1 files (written before transactions) are still read, as producers without transactions.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import crc32c

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import INT32_MAX, BatchHeader
from moldau.storage.control_batch import TransactionMarker
from moldau.text import ascii_digits

__all__ = [
    "BATCHES_RETAINED",
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "NO_SEQUENCE",
    "BatchMetadata",
    "CompletedTxn",
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

NO_SEQUENCE = -1

_MAGIC = b"MPSS"
_VERSION = 2
_FILE_HEADER = struct.Struct(">4sHI")
_COUNT = struct.Struct(">I")
_PRODUCER_V1 = struct.Struct(">qhqB")
_PRODUCER = struct.Struct(">qhqiqqB")
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
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None  # first offset of the ongoing transaction here
    last_offset: int = -1  # of the producer's last batch of any kind (data, NO_SEQUENCE, marker)

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    @property
    def last_data_offset(self) -> int:
        """The last offset of its last batch with sequence numbers (else of any batch)."""
        return self.batches[-1].last_offset if self.batches else self.last_offset

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


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker: its first offset on this partition and the marker's offset."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


def snapshot_offsets(directory: str) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending."""
    offsets = []
    for name in os.listdir(directory):
        stem, dot, suffix = name.partition(".")
        if dot and "." + suffix == SNAPSHOT_SUFFIX and ascii_digits(stem):
            offsets.append(int(stem))
    return sorted(offsets)


class ProducerStateManager:
    """Per-partition producer state; owned by one `PartitionLog`, not thread-safe (see `delete_snapshots_before`)."""

    def __init__(
        self, directory: str, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS
    ) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self._producers: dict[int, ProducerEntry] = {}
        # first offset -> producer id of every ongoing transaction; inserted in log order, so ascending.
        self._ongoing: dict[int, int] = {}
        # (marker offset, first offset) of completed transactions the high watermark may not have passed.
        self._unreplicated: deque[tuple[int, int]] = deque()
        self._guards: dict[int, object] = {}

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return self._producers

    # -- validation ----------------------------------------------------------------------------------

    def check(
        self, header: BatchHeader, pending: Mapping[int, BatchHeader] | None = None
    ) -> ProducerAppendDecision:
        """Decide about a batch with a producer id; raises KafkaError for a fenced or out-of-order one.

        `pending` maps producer ids to the previous batch of the same append call, which is not in the
        state yet: a second batch must follow it.
        """
        if header.base_sequence == NO_SEQUENCE:
            self._check_unsequenced(header, pending)
            return _APPEND
        previous = pending.get(header.producer_id) if pending else None
        if previous is not None and previous.base_sequence != NO_SEQUENCE:
            return _check_sequence(header, previous.producer_epoch, previous.last_sequence, None)
        entry = self._producers.get(header.producer_id)
        if entry is None:
            return _APPEND
        return _check_sequence(header, entry.epoch, entry.last_seq, entry)

    def _check_unsequenced(self, header: BatchHeader, pending: Mapping[int, BatchHeader] | None) -> None:
        """A batch without sequence numbers: only transactional ones (coordinator writes), fenced by epoch."""
        if not header.is_transactional:
            raise KafkaError(ErrorCode.invalid_record,
                             f"producer {header.producer_id}: a non-transactional batch needs a base sequence")
        previous = pending.get(header.producer_id) if pending else None
        entry = self._producers.get(header.producer_id)
        epoch = max(previous.producer_epoch if previous is not None else -1, entry.epoch if entry is not None else -1)
        if header.producer_epoch < epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"producer {header.producer_id} epoch {header.producer_epoch} is older than {epoch}")

    def starts_transaction(self, header: BatchHeader, pending: Mapping[int, BatchHeader] | None = None) -> bool:
        """Whether a transactional data batch would open a transaction here (none ongoing under its epoch);
        an earlier transactional batch of the same append (`pending`) opens it instead."""
        if not header.is_transactional or header.is_control:
            return False
        previous = pending.get(header.producer_id) if pending else None
        if previous is not None and previous.is_transactional:
            return False
        return self.would_open_transaction(header.producer_id, header.producer_epoch)

    def would_open_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether a transactional write of the producer at that epoch would open a transaction here."""
        entry = self._producers.get(producer_id)
        return entry is None or entry.current_txn_first_offset is None or producer_epoch > entry.epoch

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Fencing of a transaction marker: an older producer epoch (INVALID_PRODUCER_EPOCH, Kafka's
        ProducerFenced) or an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED) is refused."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(ErrorCode.invalid_producer_epoch,
                             f"marker epoch {producer_epoch} of producer {producer_id} is older than {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.transaction_coordinator_fenced,
                             f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                             f"older than {entry.coordinator_epoch}")

    # -- verification guards (KIP-890) ---------------------------------------------------------------

    def verification_guard(self, producer_id: int) -> object:
        """The producer's current guard, created when it has none."""
        guard = self._guards.get(producer_id)
        if guard is None:
            guard = self._guards[producer_id] = object()
        return guard

    def current_guard(self, producer_id: int) -> object | None:
        return self._guards.get(producer_id)

    # -- update --------------------------------------------------------------------------------------

    def update(
        self, header: BatchHeader, first_offset: int, last_offset: int, timestamp_ms: int | None = None,
        marker: TransactionMarker | None = None,
    ) -> CompletedTxn | None:
        """Record a stored batch; `timestamp_ms` defaults to the header's max timestamp. `marker` is what a
        control batch says; the transaction it ends is returned (None when there was none)."""
        if not header.has_producer_id:
            return None
        timestamp = header.max_timestamp if timestamp_ms is None else timestamp_ms
        entry = self._entry_for(header, timestamp)
        entry.last_timestamp_ms = timestamp
        entry.last_offset = max(entry.last_offset, last_offset)
        if header.is_transactional:
            self._guards.pop(header.producer_id, None)  # its verification has been used (or ended)
        if header.is_control:
            return None if marker is None else self._end_transaction(entry, marker, last_offset)
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self._ongoing[first_offset] = header.producer_id
        if header.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(header.base_sequence, header.last_sequence, first_offset, last_offset, timestamp)
            )
        return None

    def _entry_for(self, header: BatchHeader, timestamp_ms: int) -> ProducerEntry:
        entry = self._producers.get(header.producer_id)
        if entry is None:
            entry = ProducerEntry(header.producer_id, header.producer_epoch, timestamp_ms)
            self._producers[header.producer_id] = entry
        elif header.producer_epoch != entry.epoch and not (header.is_control and header.producer_epoch < entry.epoch):
            # A new epoch starts a fresh sequence space; the log is authoritative even on replay. An ongoing
            # transaction stays until a marker ends it: it still holds back the last stable offset.
            entry.epoch = header.producer_epoch
            entry.batches.clear()
            self._guards.pop(header.producer_id, None)
        return entry

    def _end_transaction(self, entry: ProducerEntry, marker: TransactionMarker,
                         marker_offset: int) -> CompletedTxn | None:
        entry.coordinator_epoch = max(entry.coordinator_epoch, marker.coordinator_epoch)
        first = entry.current_txn_first_offset
        if first is None:
            return None  # a marker for no transaction here (a retry, or another partition's): harmless
        entry.current_txn_first_offset = None
        self._ongoing.pop(first, None)
        self._unreplicated.append((marker_offset, first))
        return CompletedTxn(entry.producer_id, first, marker_offset, not marker.commit)

    def replay(self, headers: Iterable[BatchHeader]) -> None:
        """Rebuild state from stored batches, in log order (without marker contents: see `update`)."""
        for header in headers:
            if header.producer_id >= 0:
                self.update(header, header.base_offset, header.last_offset)

    # -- transactions --------------------------------------------------------------------------------

    def stable_offset_after(self, completed: CompletedTxn) -> int:
        """The partition's stable offset right after `completed` ended, replication aside: the first offset of
        the oldest transaction still ongoing, else the marker's offset + 1 (a `.txnindex` entry's field)."""
        return next(iter(self._ongoing), completed.last_offset + 1)

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of the oldest transaction that is ongoing, or completed with its marker at or above
        `high_watermark`; None when there is none. Completed ones the high watermark passed are forgotten."""
        unreplicated = self._unreplicated
        while unreplicated and unreplicated[0][0] < high_watermark:
            unreplicated.popleft()
        first = next(iter(self._ongoing), None)
        for _, txn_first in unreplicated:  # few: completed within one replication round trip
            if first is None or txn_first < first:
                first = txn_first
        return first

    def ongoing_transactions(self) -> Iterator[tuple[int, int]]:
        """(producer id, first offset) of every ongoing transaction, oldest first."""
        for first, producer_id in self._ongoing.items():
            yield producer_id, first

    # -- housekeeping --------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for `producer_id_expiration_ms` or more, except those in a transaction;
        returns how many."""
        expired = [
            pid for pid, entry in self._producers.items()
            if now_ms - entry.last_timestamp_ms >= self.producer_id_expiration_ms
            and entry.current_txn_first_offset is None
        ]
        for pid in expired:
            del self._producers[pid]
            self._guards.pop(pid, None)
        return len(expired)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies below the log start offset."""
        gone = [pid for pid, entry in self._producers.items() if entry.last_offset < log_start_offset]
        for pid in gone:
            first = self._producers.pop(pid).current_txn_first_offset
            if first is not None:
                self._ongoing.pop(first, None)

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
        self._guards.clear()

    def _install(self, producers: dict[int, ProducerEntry]) -> None:
        self.clear()
        self._producers = producers
        ongoing = sorted((e.current_txn_first_offset, pid) for pid, e in producers.items()
                         if e.current_txn_first_offset is not None)
        self._ongoing = {first: pid for first, pid in ongoing}

    # -- snapshots -----------------------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def take_snapshot(self, offset: int, durable: bool = True) -> None:
        """Write the current state as the state at log offset `offset`; durably unless the caller syncs later."""
        body = bytearray(_COUNT.pack(len(self._producers)))
        for entry in self._producers.values():
            txn_first = -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
            body += _PRODUCER.pack(entry.producer_id, entry.epoch, entry.last_timestamp_ms, entry.coordinator_epoch,
                                   txn_first, entry.last_offset, len(entry.batches))
            for b in entry.batches:
                body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp_ms)
        data = _FILE_HEADER.pack(_MAGIC, _VERSION, crc32c.crc32c(body)) + bytes(body)
        write_atomically(self.snapshot_path(offset), data, durable)

    def sync_snapshot(self, offset: int) -> None:
        """fsync the snapshot at `offset` taken with `durable=False`, unless it was deleted since (a truncation).
        Its directory entry is made durable by the caller's next directory fsync."""
        with contextlib.suppress(FileNotFoundError):
            fsync_path(self.snapshot_path(offset))

    def load(self, log_end_offset: int, now_ms: int, at_or_below: int | None = None) -> int | None:
        """Replace the state with the newest valid snapshot at or below `log_end_offset` (and `at_or_below`,
        when given: recovery replays from before the segments it rebuilds).

        Snapshots above the log end (from data lost in a crash) and unreadable ones are deleted. Returns the
        snapshot's offset, from which the caller replays the log, or None to replay everything.
        """
        self.clear()
        limit = log_end_offset if at_or_below is None else min(at_or_below, log_end_offset)
        for offset in reversed(snapshot_offsets(self.directory)):
            path = self.snapshot_path(offset)
            if offset > log_end_offset:
                _remove_quietly(path)
                continue
            if offset > limit:
                continue
            producers = _read_snapshot(path)
            if producers is None:
                _remove_quietly(path)
                continue
            self._install(producers)
            self.remove_expired(now_ms)
            return offset
        return None

    def delete_snapshots_after(self, offset: int) -> None:
        for snapshot in snapshot_offsets(self.directory):
            if snapshot > offset:
                _remove_quietly(self.snapshot_path(snapshot))

    def delete_snapshots_through(self, offset: int) -> None:
        """Delete the snapshots at or below `offset`, durably; a later load replays from an older offset instead
        (the log start when none is left)."""
        doomed = [o for o in snapshot_offsets(self.directory) if o <= offset]
        for snapshot in doomed:
            _remove_quietly(self.snapshot_path(snapshot))
        if doomed:
            fsync_directory(self.directory)

    def delete_snapshots_before(self, offset: int) -> None:
        """Delete snapshots older than the newest one at or below `offset` (which recovery needs). Touches files
        only, so the storage worker may run it (`CheckpointWriter`): a load that meets a snapshot deleted under it
        takes it for unreadable and replays from an older one."""
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
        if magic != _MAGIC or version not in (1, _VERSION) or crc32c.crc32c(body) != crc:
            return None
        return _decode_body(body, version)
    except (OSError, struct.error):
        return None


def _decode_body(body: memoryview, version: int) -> dict[int, ProducerEntry] | None:
    (count,) = _COUNT.unpack_from(body, 0)
    position = _COUNT.size
    producers: dict[int, ProducerEntry] = {}
    for _ in range(count):
        entry, batch_count, position = _decode_producer(body, position, version)
        for _ in range(batch_count):
            entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, position)))
            position += _BATCH.size
        if version == 1:
            entry.last_offset = entry.batches[-1].last_offset if entry.batches else -1
        producers[entry.producer_id] = entry
    return producers if position == len(body) else None


def _decode_producer(body: memoryview, position: int, version: int) -> tuple[ProducerEntry, int, int]:
    """(entry without batches, its batch count, position after the fixed part)."""
    if version == 1:
        pid, epoch, last_ts, batch_count = _PRODUCER_V1.unpack_from(body, position)
        return ProducerEntry(pid, epoch, last_ts), batch_count, position + _PRODUCER_V1.size
    pid, epoch, last_ts, coordinator_epoch, txn_first, last_offset, batch_count = \
        _PRODUCER.unpack_from(body, position)
    entry = ProducerEntry(pid, epoch, last_ts, coordinator_epoch=coordinator_epoch,
                          current_txn_first_offset=None if txn_first < 0 else txn_first, last_offset=last_offset)
    return entry, batch_count, position + _PRODUCER.size


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


def sync_file_system(path: str) -> None:
    """Make durable everything written so far on the file system holding `path`: one `syncfs` for many files
    written with `durable=False`, where an fsync each would cost a disk flush each (`os.sync` where the C
    library has no `syncfs`)."""
    if _syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if _syncfs(fd) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error), path)
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return function


_syncfs = _load_syncfs()


def fsync_directory(directory: str) -> None:
    fsync_path(directory or ".")


def fsync_path(path: str) -> None:
    """fsync a file or directory by its path (opened read-only: Linux fsyncs through any descriptor)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
