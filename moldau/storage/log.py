"""The log of one partition: a directory `<topic>-<partition>` of segments, after Apache Kafka's log.

Directory contents: `<base offset>.log/.index/.timeindex` segments with, when a transaction was aborted in
them, a `.txnindex`, `<offset>.snapshot` producer-state snapshots, `partition.metadata` (topic id, Kafka's
text format), `leader-epoch-checkpoint` (the leader epoch cache, `moldau.storage.leader_epoch_cache`,
Kafka's text format), and three checkpoints written atomically at every flush and at close:
`recovery-point` (every byte below it was fsynced), `log-start-offset` and `high-watermark`. `close()`
leaves a `.clean-shutdown` marker that `open()` consumes.

Invariants:

* Offsets are consecutive across appends; segments are sorted by base offset; only the last segment
  (the active one) takes appends.
* log_start_offset <= high_watermark <= log_end_offset. While `high_watermark_follows_log_end` is True (the
  default: a partition without followers) the high watermark is the log end offset. When it is False the
  replica manager moves it through the setter, and a reopened log starts from the `high-watermark`
  checkpoint (capped at the log end; the log end offset when there is no checkpoint yet).
* Two append paths: `append` (a leader: validates, assigns offsets and the leader epoch) and
  `append_as_follower` (batches replicated from the leader, stored byte for byte at their own offsets,
  which may leave gaps). Both keep producer state and the leader epoch cache up to date.
* An append is all-or-nothing: every batch is validated before any byte is written, and a failed write
  (OSError, e.g. a full disk) leaves the log as it was and surfaces as KAFKA_STORAGE_ERROR.
* Start-up re-validates only segments at or after the recovery point, and none after a clean shutdown;
  other segments are trusted and their indexes are read lazily.
* Segments are rolled synchronously; fsyncing rolled segments (which advances the recovery point) is
  left to `flush_if_due`/`flush`, so a roll never waits for the disk on the produce path.
* Transactions (KIP-98): producer state knows every ongoing transaction's first offset; the last stable
  offset (what read_committed consumers see) is the first offset of the oldest transaction that is ongoing
  or whose marker the high watermark has not passed, capped at the high watermark. Markers are written by
  `append_marker` (or replicated); an abort adds an entry to the `.txnindex` of the segment holding its
  marker. Recovery replays producer state from a snapshot at or before the first re-validated segment, so
  those segments' transaction indexes are rebuilt; the newest snapshot at or below the base of the segment
  holding the recovery point is kept for that.
* Compaction (`moldau.storage.cleaner`) may leave offset gaps between and inside batches and replaces
  non-active segments through `replace_segments`; a swap it left half done is completed on open.

Not thread-safe: one owner (the server's event loop) drives it.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import shutil
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader, InvalidBatch, assign_offsets, parse_header
from moldau.protocol.record_validation import validate_batch_records
from moldau.storage.control_batch import TransactionMarker, build_marker_batch, parse_marker
from moldau.storage.leader_epoch_cache import LeaderEpochCache
from moldau.storage.log_config import LogConfig, TimestampType
from moldau.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    BatchMetadata,
    CompletedTxn,
    ProducerStateManager,
    fsync_directory,
    write_atomically,
)
from moldau.storage.record_checks import check_batch_records
from moldau.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    AppendedBatch,
    DeferredCloser,
    FileSlice,
    LogSegment,
)
from moldau.storage.segment_swap import complete_interrupted_swaps
from moldau.storage.transaction_index import AbortedTxn, collect_aborted

log = logging.getLogger(__name__)

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "ActiveProducer",
    "AppendResult",
    "PartitionLog",
    "ReadResult",
    "parse_partition_dir_name",
]

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
RECOVERY_POINT_FILE = "recovery-point"
LOG_START_OFFSET_FILE = "log-start-offset"
HIGH_WATERMARK_FILE = "high-watermark"
PARTITION_METADATA_FILE = "partition.metadata"
# Leftovers of interrupted operations: never part of a consistent log.
_STRAY_SUFFIXES = (".tmp", ".deleted", ".swap", ".cleaned")
# DeleteRecords' "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class AppendResult:
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
    if not dash or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


class PartitionLog:
    """One partition's log; construct with `PartitionLog.open`."""

    def __init__(
        self, directory: str, config: LogConfig, clock: Clock, topic_id: uuid.UUID | None,
        producers: ProducerStateManager, closer: DeferredCloser,
    ) -> None:
        self.directory = directory
        self.topic_id = topic_id
        parsed = parse_partition_dir_name(os.path.basename(os.path.normpath(directory)))
        self.topic, self.partition = parsed if parsed is not None else ("", -1)
        self.producer_state = producers
        self.leader_epochs = LeaderEpochCache(directory)
        self.high_watermark_follows_log_end = True
        # KIP-890: a transactional batch that starts a transaction must bring the producer's verification
        # guard (`transaction.partition.verification.enable`).
        self.transaction_verification = True
        self._config = config
        self._clock = clock
        self._closer = closer
        self._owns_closer = False
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()
        self._closed = False

    # -- opening -------------------------------------------------------------------------------------

    @classmethod
    def open(
        cls, directory: str, config: LogConfig, clock: Clock, topic_id: uuid.UUID | None = None, *,
        clean_shutdown: bool | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        closer: DeferredCloser | None = None,
        recover_all: bool = False,
    ) -> PartitionLog:
        """Open (or create) the log in `directory`.

        The previous close counts as clean when this partition's marker is present, unless the caller
        knows better (`clean_shutdown=False`, e.g. its log directory's marker was missing). After an
        unclean one, segments from the recovery point on are re-validated and torn tails cut. `recover_all`
        re-validates every segment, down to each record (a log written before records were validated).
        """
        os.makedirs(directory, exist_ok=True)
        topic_id = _reconcile_topic_id(directory, topic_id)
        marker = os.path.join(directory, CLEAN_SHUTDOWN_FILE)
        had_marker = os.path.exists(marker)
        log = cls(
            directory, config, clock, topic_id,
            ProducerStateManager(directory, producer_id_expiration_ms),
            closer if closer is not None else DeferredCloser(config.file_delete_delay_ms),
        )
        log._owns_closer = closer is None
        log._load(clean=had_marker and clean_shutdown is not False and not recover_all, recover_all=recover_all)
        if had_marker:
            # From now on a crash must count as unclean.
            os.unlink(marker)
            fsync_directory(directory)
        return log

    def _load(self, clean: bool, recover_all: bool = False) -> None:
        now = self._clock.time_ms()
        swapped = complete_interrupted_swaps(self.directory)
        bases = self._scan_directory()
        checkpointed_start = _read_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_FILE))
        recovery_point = 0 if recover_all else _read_checkpoint(os.path.join(self.directory, RECOVERY_POINT_FILE)) or 0
        for base in bases:
            segment = LogSegment.open(self.directory, base, self._config.segment_index_bytes, now)
            if base in swapped:
                segment.recover()  # its index files went with the interrupted swap
            self._add_segment(segment)
        # A directory without segments (a new partition) has nothing to recover or fsync.
        clean = clean or not bases
        rebuilt_from = None if clean else self._recover_from(recovery_point)
        if not self._segments:
            self._add_segment(self._new_segment(checkpointed_start or 0, now))
        self._log_end_offset = self._segments[-1].next_offset
        first_base = self._segments[0].base_offset
        self._log_start_offset = min(max(checkpointed_start or first_base, first_base), self._log_end_offset)
        self._drop_segments_below_start(now)
        checkpointed_hw = _read_checkpoint(os.path.join(self.directory, HIGH_WATERMARK_FILE))
        self._high_watermark = self._log_end_offset if checkpointed_hw is None else \
            min(max(checkpointed_hw, self._log_start_offset), self._log_end_offset)
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._load_leader_epochs()
        # After recovery, producer state is replayed from before the rebuilt segments, which also writes their
        # aborted-transaction indexes again.
        self._load_producer_state(now, rebuilt_from)
        if not clean:
            # Recovered data may exist only in the page cache; make it durable once, then start clean.
            try:
                self.flush()
            except KafkaError as exc:
                # A full (or failing) disk must not keep the broker down: the log opens for reads, its recovery
                # point stays where it was (so the next start recovers again), and appends fail until it heals.
                log.warning("%s-%d: not flushed after recovery: %s", self.topic, self.partition, exc.message)

    def _scan_directory(self) -> list[int]:
        """Base offsets of the segments; removes leftovers and indexes without a log file."""
        bases, index_files = [], []
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            if name.endswith(_STRAY_SUFFIXES):
                _remove_quietly(path)
                continue
            stem, _, suffix = name.partition(".")
            if not stem.isdigit():
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.append(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                index_files.append((int(stem), path))
        known = set(bases)
        for base, path in index_files:
            if base not in known:
                _remove_quietly(path)
        return sorted(bases)

    def _recover_from(self, recovery_point: int) -> int | None:
        """Re-validate segments from the one holding the recovery point; after a torn segment, later
        segments cannot be trusted (they were written after the tear) and are deleted. Their transaction
        indexes are emptied, for the producer-state replay to rebuild; returns the first such segment's
        base offset (None without segments)."""
        if not self._segments:
            return None
        start = max(bisect_right(self._bases, recovery_point) - 1, 0)
        rebuilt_from = self._bases[start]
        for i in range(start, len(self._segments)):
            self._segments[i].txn_index.reset()
            truncated = self._segments[i].recover()
            if truncated:
                log.warning("%s: recovery cut %d bytes of torn or corrupt tail from segment %d",
                            os.path.basename(self.directory), truncated, self._segments[i].base_offset)
            if i < len(self._segments) - 1:
                self._segments[i].seal()
            if truncated:
                corrupt = self._segments[i].corruption is not None
                for segment in self._segments[i + 1 :]:
                    # After a torn tail (a crash) later segments are stale; after a corrupt batch they may hold
                    # the only copy of later records, so they are set aside, not deleted.
                    if corrupt:
                        segment.quarantine()
                    else:
                        segment.delete()
                del self._segments[i + 1 :]
                del self._bases[i + 1 :]
                return rebuilt_from
        return rebuilt_from

    def _drop_segments_below_start(self, now_ms: int) -> None:
        count = 0
        while count + 1 < len(self._segments) and self._segments[count + 1].base_offset <= self._log_start_offset:
            count += 1
        if count:
            self._delete_first_segments(count, now_ms)

    def _load_leader_epochs(self) -> None:
        """The checkpointed cache, cut to the log's offsets; rebuilt from the batch headers when the file
        is missing or unreadable (logs written before it existed)."""
        cache = LeaderEpochCache.load(self.directory)
        self.leader_epochs = cache
        if not cache.loaded_from_file and self._log_end_offset > self._log_start_offset:
            cache.assign_all((h.partition_leader_epoch, h.base_offset)
                             for h in self._headers_from(self._log_start_offset))
            if not cache.loaded_from_file:
                cache.write()  # no batch has an epoch: an empty file spares the next start the scan
            log.info("%s: rebuilt the leader epoch cache: %s", os.path.basename(self.directory),
                     list(cache.entries))
        cache.truncate_from_end(self._log_end_offset)
        cache.truncate_from_start(self._log_start_offset)

    def _load_producer_state(self, now_ms: int, at_or_below: int | None = None) -> None:
        """Newest snapshot at or below the log end (and `at_or_below`), then the batches after it."""
        producers = self.producer_state
        snapshot = producers.load(self._log_end_offset, now_ms, at_or_below)
        replay_from = max(snapshot if snapshot is not None else 0, self._log_start_offset)
        if replay_from < self._log_end_offset:
            self._replay_producers(replay_from)
            # Spare the next start this scan: an optimisation, so a full disk only costs the next start a scan.
            try:
                producers.take_snapshot(self._log_end_offset)
            except OSError as exc:
                log.warning("%s-%d: producer snapshot not written: %s", self.topic, self.partition, exc)
        producers.truncate_head(self._log_start_offset)

    def _replay_producers(self, offset: int) -> None:
        """Apply the batches from `offset` on to producer state, as appends did: ongoing transactions come
        back, and aborts are indexed again (a no-op for entries the indexes already hold)."""
        producers = self.producer_state
        for segment in self._segments[self._segment_index(offset) :]:
            start = segment.position_of(offset) if segment.base_offset < offset else 0
            for position, header in segment.iter_headers(start, segment.size_bytes):
                if header.producer_id < 0:
                    continue
                marker = self._stored_marker(segment, position, header)
                completed = producers.update(header, header.base_offset, header.last_offset, marker=marker)
                if completed is not None and completed.aborted:
                    segment.txn_index.append(self._aborted_entry(completed))

    @staticmethod
    def _stored_marker(segment: LogSegment, position: int, header: BatchHeader) -> TransactionMarker | None:
        if not header.is_control:
            return None
        try:
            return parse_marker(segment.read_bytes(position, header.total_size))
        except InvalidBatch as e:
            log.warning("%s: unreadable control batch at offset %d: %s", segment.directory, header.base_offset, e)
            return None

    def _aborted_entry(self, completed: CompletedTxn) -> AbortedTxn:
        return AbortedTxn(completed.producer_id, completed.first_offset, completed.last_offset,
                          self.producer_state.stable_offset_after(completed))

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        for segment in self._segments[self._segment_index(offset) :]:
            start = segment.position_of(offset) if segment.base_offset < offset else 0
            for _, header in segment.iter_headers(start, segment.size_bytes):
                yield header

    # -- properties ----------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        """The log end offset while `high_watermark_follows_log_end`; else the value last set (or loaded)."""
        return self._log_end_offset if self.high_watermark_follows_log_end else self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
        self.producer_state.first_unstable_offset(self._high_watermark)  # forgets transactions now stable

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; see `LeaderEpochCache.end_offset_for`."""
        return self.leader_epochs.end_offset_for(epoch, self._log_end_offset)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    # -- transactions --------------------------------------------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is ongoing, or complete with its marker not yet
        below the high watermark; None when there is none."""
        return self.producer_state.first_unstable_offset(self.high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (exclusive): the first unstable offset, capped at the
        high watermark, never below the log start offset (retention may have passed an old transaction)."""
        high_watermark = self.high_watermark
        first = self.producer_state.first_unstable_offset(high_watermark)
        if first is None or first >= high_watermark:
            return high_watermark
        return max(first, self._log_start_offset)

    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions overlapping [start_offset, upper_offset),
        from the `.txnindex` of the segment holding `start_offset` and the later ones."""
        # An interrupted compaction swap may leave an entry in two indexes; report it once.
        return list(dict.fromkeys((e.producer_id, e.first_offset)
                                  for e in self.aborted_transaction_entries(start_offset, upper_offset)))

    def aborted_transaction_entries(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """The index entries behind `aborted_transactions` (the cleaner needs their last offsets too)."""
        found: list[AbortedTxn] = []
        try:
            for segment in self._segments[self._segment_index(start_offset) :]:
                if collect_aborted(segment.txn_index.entries, start_offset, upper_offset, found):
                    break
        except OSError as e:
            raise _storage_error(e) from e
        return found

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of every transaction ongoing on this partition, oldest first."""
        return list(self.producer_state.ongoing_transactions())

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this partition remembers, for DescribeProducers."""
        out = []
        for entry in self.producer_state.producers.values():
            last_seq = entry.last_seq
            txn_first = entry.current_txn_first_offset
            out.append(ActiveProducer(entry.producer_id, entry.epoch, -1 if last_seq is None else last_seq,
                                      entry.last_timestamp_ms, entry.coordinator_epoch,
                                      -1 if txn_first is None else txn_first))
        return out

    def needs_verification(self, header: BatchHeader) -> bool:
        """Whether a transactional batch would start a transaction here (KIP-890): its producer has none
        ongoing on this partition under its epoch, so the coordinator must confirm the partition is part of
        the producer's transaction before the batch is appended (with the guard). Never, with
        `transaction_verification` off."""
        return self.transaction_verification and header.has_producer_id and \
            self.producer_state.starts_transaction(header)

    def producer_needs_verification(self, producer_id: int, producer_epoch: int) -> bool:
        """`needs_verification` of a transactional batch the broker builds itself (TxnOffsetCommit's)."""
        return self.transaction_verification and self.producer_state.would_open_transaction(producer_id,
                                                                                             producer_epoch)

    def verification_guard(self, producer_id: int) -> object:
        """The producer's verification guard (created if needed). A marker for the producer, or a newer
        epoch, drops it, so an append that was verified before such an event is refused."""
        return self.producer_state.verification_guard(producer_id)

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    # -- append --------------------------------------------------------------------------------------

    def append(self, batches: list[tuple[BatchHeader, memoryview]], leader_epoch: int,
               verification_guard: object | None = None) -> AppendResult:
        """Validate all `batches` (already split and CRC-checked), then store them at consecutive offsets.

        A transactional batch that starts a transaction here must come with the producer's current
        `verification_guard` (see `needs_verification`) unless `transaction_verification` is off.

        Raises KafkaError: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP, INVALID_RECORD
        (control batches from clients, transactional batches without a producer id), INVALID_TXN_STATE (a
        transaction start not verified), producer errors, KAFKA_STORAGE_ERROR.
        """
        if not batches:
            raise KafkaError(ErrorCode.corrupt_message, "no record batches")
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, "the log is closed")
        now = self._clock.time_ms()
        config = self._config
        append_time = now if config.message_timestamp_type is TimestampType.LOG_APPEND_TIME else None
        total_bytes, _, duplicate = self._validate(batches, now, append_time is None, verification_guard)
        if duplicate is not None:
            return self._duplicate_result(duplicate, append_time is not None)
        first_offset = self._log_end_offset
        pieces: list[bytes | memoryview] = []
        stored: list[AppendedBatch] = []
        offset = first_offset
        for header, view in batches:
            pieces += assign_offsets(view, offset, leader_epoch, append_time)
            next_offset = offset + header.last_offset_delta + 1
            max_ts = header.max_timestamp if append_time is None else append_time
            stored.append(AppendedBatch(offset, next_offset, max_ts, header.total_size))
            offset = next_offset
        self._write(pieces, stored, total_bytes, ((leader_epoch, first_offset),), now)
        self._after_append(batches, stored, now, leader=True)
        return AppendResult(first_offset, offset - 1, -1 if append_time is None else append_time,
                            self._log_start_offset)

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                      leader_epoch: int) -> AppendResult:
        """Write a transaction marker (commit or abort) for `producer_id` at the log end, as the leader.

        The producer's ongoing transaction here, if any, ends; an abort is added to the `.txnindex`. A marker
        for a producer without one is written too (harmless, as in Kafka). Raises KafkaError:
        INVALID_PRODUCER_EPOCH (an epoch older than the producer's), TRANSACTION_COORDINATOR_FENCED (a
        coordinator epoch older than the last marker's), KAFKA_STORAGE_ERROR.
        """
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, "the log is closed")
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        now = self._clock.time_ms()
        view = memoryview(build_marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, now))
        header = parse_header(view)
        offset = self._log_end_offset
        stored = [AppendedBatch(offset, offset + 1, now, header.total_size)]
        self._write(assign_offsets(view, offset, leader_epoch, None), stored, header.total_size,
                    ((leader_epoch, offset),), now)
        self._after_append([(header, view)], stored, now, leader=True,
                           markers=[TransactionMarker(commit, coordinator_epoch)])
        log_append_time = now if self._config.message_timestamp_type is TimestampType.LOG_APPEND_TIME else -1
        return AppendResult(offset, offset, log_append_time, self._log_start_offset)

    def append_as_follower(self, batches: list[tuple[BatchHeader, memoryview]]) -> AppendResult:
        """Store batches replicated from the leader byte for byte, at the offsets they carry.

        The batches (split and CRC-checked by the caller) already hold their final base offsets, partition
        leader epochs and timestamps; nothing is rewritten and no idempotent-producer check rejects them
        (the leader did that). The first base offset must be >= the log end offset and offsets must
        increase from batch to batch; gaps are legal (the leader's log may be compacted). Producer state
        and the leader epoch cache follow the batches; the log end offset moves past the last one; the
        high watermark is left to the caller. All or nothing, as `append`.

        Raises KafkaError: UNKNOWN_SERVER_ERROR (no batches, or offsets that overlap the log or go
        backwards), RECORD_LIST_TOO_LARGE (more bytes than a segment holds), KAFKA_STORAGE_ERROR.
        """
        if not batches:
            raise KafkaError(ErrorCode.unknown_server_error, "no record batches to append as follower")
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, "the log is closed")
        now = self._clock.time_ms()
        expected = self._log_end_offset
        total_bytes = 0
        stored: list[AppendedBatch] = []
        markers: list[TransactionMarker | None] = []
        for header, view in batches:
            if header.base_offset < expected:
                raise KafkaError(
                    ErrorCode.unknown_server_error,
                    f"{self.topic}-{self.partition}: follower append of a batch at offset {header.base_offset} "
                    f"below the expected offset {expected} (log end offset {self._log_end_offset})",
                )
            if len(view) != header.total_size:
                raise KafkaError(ErrorCode.corrupt_message,
                                 f"batch at offset {header.base_offset} is not {header.total_size} bytes long")
            # A leader's batch is walked too (compaction may have left gaps in its offsets): a corrupt one is
            # never stored here, whatever the leader holds.
            validate_batch_records(view, header, from_client=False)
            stored.append(AppendedBatch(header.base_offset, header.next_offset, header.max_timestamp,
                                        header.total_size))
            # Parsed before anything is written: a marker the leader stored must have the same effects here.
            markers.append(parse_marker(view) if header.is_control and header.has_producer_id else None)
            total_bytes += header.total_size
            expected = header.next_offset
        if total_bytes > self._config.segment_bytes:
            raise KafkaError(ErrorCode.record_list_too_large,
                             f"{total_bytes} bytes exceed segment.bytes {self._config.segment_bytes}")
        pieces: list[bytes | memoryview] = [view for _, view in batches]
        epochs = [(header.partition_leader_epoch, header.base_offset) for header, _ in batches]
        self._write(pieces, stored, total_bytes, epochs, now)
        self._after_append(batches, stored, now, leader=False, markers=markers)
        return AppendResult(stored[0].base_offset, stored[-1].next_offset - 1, -1, self._log_start_offset)

    def _validate(
        self, batches: list[tuple[BatchHeader, memoryview]], now_ms: int, check_create_time: bool,
        verification_guard: object | None = None,
    ) -> tuple[int, int, BatchMetadata | None]:
        """(total bytes, offsets needed, duplicate batch or None); raises KafkaError on rejection."""
        config = self._config
        total_bytes = offset_count = 0
        pending: dict[int, BatchHeader] | None = None
        for header, view in batches:
            size = header.total_size
            if size > config.max_message_bytes:
                raise KafkaError(ErrorCode.message_too_large,
                                 f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
            if header.is_control:
                raise KafkaError(ErrorCode.invalid_record, "control batches are not accepted from clients")
            if header.is_transactional and not header.has_producer_id:
                raise KafkaError(ErrorCode.invalid_record, "a transactional batch needs a producer id")
            if check_create_time:
                self._check_timestamps(header, now_ms)
            # Every record, as Kafka's LogValidator: structure, count, offsets, sizes, keys, timestamps.
            check_batch_records(header, view, config, now_ms if check_create_time else None,
                                f"{self.topic}-{self.partition}")
            total_bytes += size
            offset_count += header.last_offset_delta + 1
            if header.producer_id >= 0:
                decision = self.producer_state.check(header, pending)
                if decision.duplicate_of is not None:
                    return total_bytes, offset_count, decision.duplicate_of
                self._check_verified(header, pending, verification_guard)
                if pending is None:
                    pending = {}
                pending[header.producer_id] = header
        if total_bytes > config.segment_bytes:
            raise KafkaError(ErrorCode.record_list_too_large,
                             f"{total_bytes} bytes exceed segment.bytes {config.segment_bytes}")
        return total_bytes, offset_count, None

    def _check_verified(self, header: BatchHeader, pending: dict[int, BatchHeader] | None,
                        guard: object | None) -> None:
        """A batch starting a transaction needs the producer's current guard: without one, or with one a marker
        or a newer epoch dropped since, the coordinator's answer may be stale (KIP-890)."""
        if not self.transaction_verification or not self.producer_state.starts_transaction(header, pending):
            return
        if guard is None or guard is not self.producer_state.current_guard(header.producer_id):
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"producer {header.producer_id}: the transaction on {self.topic}-{self.partition} "
                             "was not verified or the verification expired")

    def _check_timestamps(self, header: BatchHeader, now_ms: int) -> None:
        # Without decoding records, the header's first and max timestamps stand for the batch.
        config = self._config
        lowest = now_ms - config.message_timestamp_before_max_ms
        highest = now_ms + config.message_timestamp_after_max_ms
        for ts in (header.base_timestamp, header.max_timestamp):
            if ts != -1 and not lowest <= ts <= highest:
                raise KafkaError(ErrorCode.invalid_timestamp,
                                 f"timestamp {ts} is outside [{lowest}, {highest}]")

    def _duplicate_result(self, duplicate: BatchMetadata, log_append_time: bool) -> AppendResult:
        return AppendResult(duplicate.first_offset, duplicate.last_offset,
                            duplicate.timestamp_ms if log_append_time else -1, self._log_start_offset,
                            duplicate=True)

    def _after_append(self, batches: list[tuple[BatchHeader, memoryview]], stored: list[AppendedBatch],
                      now_ms: int, *, leader: bool, markers: Sequence[TransactionMarker | None] = ()) -> None:
        records = 0
        aborted: list[AbortedTxn] = []
        for i, ((header, _), batch) in enumerate(zip(batches, stored, strict=True)):
            records += header.records_count
            if header.producer_id >= 0:
                completed = self.producer_state.update(header, batch.base_offset, batch.next_offset - 1,
                                                       batch.max_timestamp, markers[i] if markers else None)
                if completed is not None and completed.aborted:
                    aborted.append(self._aborted_entry(completed))
        self._log_end_offset = stored[-1].next_offset
        if leader and self.high_watermark_follows_log_end:
            self._high_watermark = self._log_end_offset
        self._unflushed_messages += records
        if markers:
            self.producer_state.first_unstable_offset(self.high_watermark)  # forgets transactions now stable
        if aborted:
            self._index_aborted(aborted)
        config = self._config
        if self._unflushed_messages >= config.flush_messages or now_ms - self._last_flush_ms >= config.flush_ms:
            self.flush()

    def _index_aborted(self, entries: list[AbortedTxn]) -> None:
        """Add aborts to the index of the segment holding their marker (all of one append share a segment).
        Should this fail, the marker is stored but not indexed until recovery rebuilds the index."""
        try:
            for entry in entries:
                self._segments[self._segment_index(entry.last_offset)].txn_index.append(entry)
        except OSError as e:
            raise _storage_error(e) from e

    def _write(self, pieces: list[bytes | memoryview], stored: list[AppendedBatch], total_bytes: int,
               epochs: Sequence[tuple[int, int]], now_ms: int) -> None:
        """Write one append's bytes to the active segment (rolled first if due). The leader epoch cache is
        updated before the bytes are written, as in Kafka, so that a crash in between is repaired by
        recovery cutting the cache at the log end; a failed write takes the new entries back."""
        first_offset = stored[0].base_offset
        epochs_changed = False
        try:
            epochs_changed = self.leader_epochs.assign_all(epochs)
            segment = self._segment_for_append(total_bytes, first_offset, stored[-1].next_offset - 1, now_ms)
            segment.append(pieces, stored, total_bytes)
        except OSError as e:
            if epochs_changed:
                with contextlib.suppress(OSError):
                    self.leader_epochs.truncate_from_end(self._log_end_offset)
            raise _storage_error(e) from e

    def _segment_for_append(self, total_bytes: int, first_offset: int, last_offset: int,
                            now_ms: int) -> LogSegment:
        """The segment to take an append of `total_bytes` for offsets first_offset..last_offset. A new
        segment starts at `first_offset`, which only a follower's append (after a gap) puts above the log
        end offset."""
        config = self._config
        active = self._segments[-1]
        if active.must_roll_before(total_bytes, last_offset, now_ms, config.segment_bytes, config.max_segment_ms):
            self._roll(now_ms, first_offset)
        elif not active.can_hold_offset(last_offset):
            # An empty active segment, and a follower's batch beyond a gap too wide for its index entries.
            replacement = self._new_segment(first_offset, now_ms)
            active.delete(lambda fd: self._closer.close_later(fd, now_ms))
            self._segments[-1], self._bases[-1] = replacement, first_offset
            replacement.index_interval_bytes = self._config.index_interval_bytes
        return self._segments[-1]

    # -- rolling -------------------------------------------------------------------------------------

    def _roll(self, now_ms: int, base_offset: int | None = None) -> None:
        """Start a new active segment at the log end offset, or at `base_offset` when that is higher (a
        follower's append after a gap); a no-op if the active one is empty."""
        active = self._segments[-1]
        if active.size_bytes == 0:
            return
        active.seal()
        self.producer_state.take_snapshot(self._log_end_offset)
        start = self._log_end_offset if base_offset is None else max(base_offset, self._log_end_offset)
        self._add_segment(self._new_segment(start, now_ms))

    def roll_if_due(self, now_ms: int) -> bool:
        """Roll a non-empty active segment older than segment_ms (see `LogConfig.max_segment_ms`); returns
        whether it rolled."""
        active = self._segments[-1]
        if active.size_bytes == 0 or now_ms - active.rolling_base_ms <= self._config.max_segment_ms:
            return False
        try:
            self._roll(now_ms)
        except OSError as e:
            raise _storage_error(e) from e
        return True

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        segment = LogSegment.create(self.directory, base_offset, self._config.segment_index_bytes, now_ms)
        return segment

    def _add_segment(self, segment: LogSegment) -> None:
        segment.index_interval_bytes = self._config.index_interval_bytes
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    # -- read ----------------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
             max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `fetch_offset`, from a single segment.

        Stops before `max_offset` (exclusive; default: the high watermark, capped at the log end) and
        after `max_bytes`, except that `min_one_batch` returns a larger first batch whole.
        Raises KafkaError(OFFSET_OUT_OF_RANGE) outside [log_start_offset, log_end_offset].
        """
        if fetch_offset < self._log_start_offset or fetch_offset > self._log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {fetch_offset} is outside [{self._log_start_offset}, {self._log_end_offset}]",
            )
        high_watermark = self.high_watermark
        upper = min(high_watermark if max_offset is None else max_offset, self._log_end_offset)
        try:
            found = self._read_slice(fetch_offset, max_bytes, min_one_batch, upper)
        except OSError as e:
            raise _storage_error(e) from e
        return ReadResult(() if found is None or found.size == 0 else (found,), high_watermark,
                          self._log_start_offset, self._log_end_offset)

    def _read_slice(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
                    upper: int) -> FileSlice | None:
        if fetch_offset >= upper:
            return None
        first = self._segment_index(fetch_offset)
        last = len(self._segments) - 1
        for i in range(first, last + 1):
            segment = self._segments[i]
            if segment.base_offset >= upper:
                return None
            if (i < last and self._bases[i + 1] <= upper) or (i == last and upper >= self._log_end_offset):
                max_position = segment.size_bytes
            else:
                max_position = segment.position_of(upper)
            found = segment.read(fetch_offset, max_bytes, max_position, min_one_batch)
            if found is not None:
                return found
        return None

    def _segment_index(self, offset: int) -> int:
        return max(bisect_right(self._bases, offset) - 1, 0)

    # -- timestamps ----------------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with timestamp >= the
        target; None when there is none (ListOffsets then answers with the log end offset)."""
        try:
            for i, segment in enumerate(self._segments):
                if i + 1 < len(self._segments) and self._bases[i + 1] <= self._log_start_offset:
                    continue
                if segment.largest_timestamp < timestamp_ms:
                    continue
                found = segment.find_offset_by_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        except OSError as e:
            raise _storage_error(e) from e
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp; None if empty."""
        try:
            best: LogSegment | None = None
            for segment in self._segments:
                if segment.largest_timestamp >= 0 and (
                    best is None or segment.largest_timestamp > best.largest_timestamp
                ):
                    best = segment
            return None if best is None else best.max_timestamp_offset()
        except OSError as e:
            raise _storage_error(e) from e

    # -- deletion and retention ----------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset` (-1: the high watermark) and delete the
        segments wholly below it. Returns the new log start offset (the low watermark)."""
        high_watermark = self.high_watermark
        if offset == DELETE_TO_HIGH_WATERMARK:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise KafkaError(ErrorCode.offset_out_of_range,
                             f"offset {offset} is beyond the high watermark {high_watermark}")
        if offset <= self._log_start_offset:
            return self._log_start_offset
        try:
            self._log_start_offset = offset
            self._write_log_start_checkpoint()
            self._drop_segments_below_start(self._clock.time_ms())
            self.producer_state.truncate_head(offset)
            self.leader_epochs.truncate_from_start(offset)
        except OSError as e:
            raise _storage_error(e) from e
        return self._log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete whole segments past retention_ms (by largest timestamp) or beyond retention_bytes, as
        Kafka does: oldest first, never at or above the high watermark, rolling the active segment first
        when it must go too. Returns the number of segments deleted."""
        config = self._config
        try:
            deleted = 0
            if "delete" in config.cleanup_policy:
                if config.retention_ms >= 0:
                    deleted += self._delete_oldest_while(
                        lambda s: now_ms - s.retention_timestamp_ms > config.retention_ms, now_ms)
                if config.retention_bytes >= 0:
                    deleted += self._delete_oldest_while(self._size_predicate(config.retention_bytes), now_ms)
            self._closer.run(now_ms)
            return deleted
        except OSError as e:
            raise _storage_error(e) from e

    def _size_predicate(self, retention_bytes: int) -> Callable[[LogSegment], bool]:
        excess = self.size_bytes - retention_bytes

        def deletable(segment: LogSegment) -> bool:
            nonlocal excess
            if excess - segment.size_bytes < 0:
                return False
            excess -= segment.size_bytes
            return True

        return deletable

    def _delete_oldest_while(self, predicate: Callable[[LogSegment], bool], now_ms: int) -> int:
        count = 0
        for i, segment in enumerate(self._segments):
            is_last = i == len(self._segments) - 1
            if is_last and segment.size_bytes == 0:
                break
            upper = self._log_end_offset if is_last else self._bases[i + 1]
            if self.high_watermark < upper or not predicate(segment):
                break
            count += 1
        if count == 0:
            return 0
        if count == len(self._segments):
            self._roll(now_ms)  # a log always keeps one (active) segment
        self._delete_first_segments(count, now_ms)
        return count

    def _delete_first_segments(self, count: int, now_ms: int) -> None:
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        if self._segments[0].base_offset > self._log_start_offset:
            self._log_start_offset = self._segments[0].base_offset
            self._write_log_start_checkpoint()
        self.producer_state.truncate_head(self._log_start_offset)
        self.leader_epochs.truncate_from_start(self._log_start_offset)
        for segment in doomed:
            segment.delete(lambda fd: self._closer.close_later(fd, now_ms))

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put `new` in the place of `old`, consecutive non-active segments whose files the cleaner has
        already swapped on disk. Their fds close after file_delete_delay_ms, so fetches in flight finish."""
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), -1)
        end = first + len(old)
        if first < 0 or end >= len(self._segments) or \
                any(a is not b for a, b in zip(self._segments[first:end], old, strict=True)):
            raise ValueError("segments to replace are not consecutive non-active segments of this log")
        new.index_interval_bytes = self._config.index_interval_bytes
        self._segments[first:end] = [new]
        self._bases[first:end] = [new.base_offset]
        now = self._clock.time_ms()
        for segment in old:
            self._closer.close_later(segment.fd, now)
        for segment in old[1:]:
            # `merge_transaction_indexes` copied their entries into the first one's, now `new`'s, file.
            segment.txn_index.delete()

    def merge_transaction_indexes(self, old: Sequence[LogSegment]) -> None:
        """Before compaction replaces `old` by one segment with the first one's base offset: copy the later
        segments' aborted-transaction entries into the first one's `.txnindex`, which the new segment keeps.
        Should the swap not happen, the copies are only duplicates (reported once). Raises OSError."""
        for segment in old[1:]:
            for entry in segment.txn_index.entries:
                old[0].txn_index.append(entry)
        old[0].txn_index.flush()

    def expire_producers(self, now_ms: int) -> int:
        return self.producer_state.remove_expired(now_ms)

    # -- durability ----------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything not yet durable and advance the recovery point to the log end offset."""
        try:
            self._flush_segments(len(self._segments))
            self._recovery_point = self._log_end_offset
            self._write_checkpoints()
            self._delete_old_snapshots()
        except OSError as e:
            raise _storage_error(e) from e
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock.time_ms()

    def flush_if_due(self, now_ms: int) -> None:
        """Periodic durability: fsync rolled segments (moving the recovery point to the active segment's
        base offset) and everything once flush_ms has passed with unflushed messages."""
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
            return
        active_base = self._bases[-1]
        if self._recovery_point >= active_base:
            return
        try:
            self._flush_segments(len(self._segments) - 1)
            self._recovery_point = active_base
            self._write_checkpoints()
            self._delete_old_snapshots()
        except OSError as e:
            raise _storage_error(e) from e

    def _delete_old_snapshots(self) -> None:
        """Keep the newest snapshot at or below the base of the segment holding the recovery point: recovery
        replays producer state from there to rebuild that segment's transaction index."""
        self.producer_state.delete_snapshots_before(self._bases[self._segment_index(self._recovery_point)])

    def _flush_segments(self, end_index: int) -> None:
        for segment in self._segments[self._segment_index(self._recovery_point) : end_index]:
            segment.flush()

    def _write_checkpoints(self) -> None:
        _write_checkpoint(os.path.join(self.directory, RECOVERY_POINT_FILE), self._recovery_point)
        self._write_log_start_checkpoint()
        # The stored value, not the property: after an unclean start, a log that follows its end still holds
        # the checkpointed high watermark until it is moved, and rewriting the log end would lose it.
        _write_checkpoint(os.path.join(self.directory, HIGH_WATERMARK_FILE), self._high_watermark)

    def _write_log_start_checkpoint(self) -> None:
        _write_checkpoint(os.path.join(self.directory, LOG_START_OFFSET_FILE), self._log_start_offset)

    def close(self) -> None:
        """Flush, snapshot producer state, close files and leave the clean-shutdown marker."""
        if self._closed:
            return
        try:
            self._segments[-1].seal()
            self.flush()
            self.producer_state.take_snapshot(self._log_end_offset)
            for segment in self._segments:
                segment.close()
            self._closed = True
            write_atomically(os.path.join(self.directory, CLEAN_SHUTDOWN_FILE), b"")
        except OSError as e:
            raise _storage_error(e) from e
        finally:
            if self._owns_closer:
                self._closer.close_all()

    def delete(self) -> None:
        """Remove the whole partition directory. With a shared closer, slices handed out stay readable
        for file_delete_delay_ms; a log that owns its closer has no later chance, so it closes now."""
        now = self._clock.time_ms()
        for segment in self._segments:
            segment.delete(lambda fd: self._closer.close_later(fd, now))
        self._segments, self._bases = [], []
        self._closed = True
        if self._owns_closer:
            self._closer.close_all()
        shutil.rmtree(self.directory, ignore_errors=True)

    def rename_directory(self, directory: str) -> None:
        """Follow a rename of the partition directory (LogManager's delete); open fds stay valid."""
        os.replace(self.directory, directory)
        self.directory = directory
        for segment in self._segments:
            segment.directory = directory
        self.producer_state.directory = directory
        self.leader_epochs.directory = directory

    # -- truncation (replication) --------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that holds an offset >= `offset`. A batch straddling `offset` goes whole,
        so the log end may end below `offset`; below the log start the log restarts empty at `offset`.
        Producer state is rebuilt to match the new log end and the leader epoch cache is cut there.

        At or past the log end no record goes, but an epoch starting at the log end still does: a broker
        that led an epoch without writing in it keeps that entry, which a new leader never had. A follower
        would then fetch with it as its last epoch forever, told each time to truncate where it already
        ends (Kafka cuts its epoch cache here for the same reason)."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self._log_end_offset:
            try:
                self.leader_epochs.truncate_from_end(self._log_end_offset)
            except OSError as e:
                raise _storage_error(e) from e
            return
        now = self._clock.time_ms()
        try:
            if offset < self._log_start_offset or offset <= self._bases[0]:
                self._truncate_fully(offset, now)
            else:
                keep = self._segment_index(offset)
                if self._bases[keep] == offset:
                    keep -= 1
                for segment in self._segments[keep + 1 :]:
                    segment.delete(lambda fd: self._closer.close_later(fd, now))
                del self._segments[keep + 1 :]
                del self._bases[keep + 1 :]
                self._segments[-1].truncate_to(offset)
                self._log_end_offset = self._segments[-1].next_offset
                # Cutting a whole batch may go below a log start that lay inside it.
                self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self.leader_epochs.truncate_from_end(self._log_end_offset)
            self._write_checkpoints()
            self.producer_state.delete_snapshots_after(self._log_end_offset)
            self._load_producer_state(now)
        except OSError as e:
            raise _storage_error(e) from e

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and restart the log empty at `offset`: log start, log end, high watermark
        and recovery point all become `offset`; producer state and the leader epoch cache are cleared. A
        follower whose fetch offset fell below its leader's log start offset does this."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        now = self._clock.time_ms()
        try:
            self._truncate_fully(offset, now)
            self._high_watermark = self._recovery_point = offset
            self._write_checkpoints()
        except OSError as e:
            raise _storage_error(e) from e

    def _truncate_fully(self, offset: int, now_ms: int) -> None:
        for segment in self._segments:
            segment.delete(lambda fd: self._closer.close_later(fd, now_ms))
        self._segments, self._bases = [], []
        self._add_segment(self._new_segment(offset, now_ms))
        self._log_start_offset = self._log_end_offset = offset
        self.producer_state.clear()
        self.producer_state.delete_snapshots_after(-1)
        self.leader_epochs.clear()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, segments={len(self._segments)})")


def _storage_error(error: OSError) -> KafkaError:
    return KafkaError(ErrorCode.kafka_storage_error, f"storage error: {error}")


def _read_checkpoint(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def _write_checkpoint(path: str, value: int) -> None:
    write_atomically(path, f"{value}\n".encode("ascii"))


def _reconcile_topic_id(directory: str, topic_id: uuid.UUID | None) -> uuid.UUID | None:
    """The topic id of `partition.metadata`, written when absent; a different id is an error."""
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    stored = _read_partition_metadata(path)
    if stored is None:
        if topic_id is not None:
            text = f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}\n"
            # Not fsynced: the metadata log holds the topic id durably, and a file lost or torn by a crash
            # reads as absent and is written again on the next open. Two fsyncs per new partition made
            # creating a 1,000-partition topic take seconds.
            write_atomically(path, text.encode("ascii"), durable=False)
        return topic_id
    if topic_id is not None and stored != topic_id:
        raise KafkaError(ErrorCode.inconsistent_topic_id,
                         f"{directory} belongs to topic id {kafka_uuid_string(stored)}")
    return stored


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's textual Uuid: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _read_partition_metadata(path: str) -> uuid.UUID | None:
    try:
        with open(path, encoding="ascii") as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        return uuid.UUID(bytes=base64.urlsafe_b64decode(fields["topic_id"].strip() + "=="))
    except (OSError, KeyError, ValueError):
        return None


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
