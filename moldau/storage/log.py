"""The log of one partition: a directory `<topic>-<partition>` of segments, after Apache Kafka's log.

Directory contents: `<base offset>.log/.index/.timeindex` segments with, when a transaction was aborted in
them, a `.txnindex`, `<offset>.snapshot` producer-state snapshots, `leader-epoch-checkpoint` (the leader
epoch cache, `moldau.storage.leader_epoch_cache`), and the files of `moldau.storage.checkpoints`:
`partition.metadata`, and `recovery-point`, `log-start-offset` and `high-watermark`, written atomically at
every flush and at close. `close()` leaves a `.clean-shutdown` marker that `open()` consumes, unless the owner
keeps one for the whole log directory (`LogManager`). `open_deferred` makes a log of offsets its owner
checkpointed, which reads its directory on first use; `create_deferred` a new, empty log whose directory is made
on first use.

`PartitionLog` owns the log's offsets (log start, log end, high watermark, recovery point) and carries out
every change to them; the rules it follows live beside it: `log_loading` (opening and recovery),
`retention` (what retention and DeleteRecords may delete), `checkpoints` (the files above),
`follower_append` and `truncation` (what a follower stores or cuts), `append_validation` (a leader's
checks), `log_reads` (lookups), `segment_list` (the segments as a set) and `log_common` (the results).
docs/storage.md describes the whole package.

Why this file is longer than the others (~750 lines): the offsets move together (an append moves the log
end and, without followers, the high watermark; retention the log start; truncation all four) and the
invariants below hold between them, so the code that moves them stays in one class where they can be
checked together. Splitting it further would mean helpers writing another object's private offsets.

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
* The active segment rolls once older than `max_segment_ms` less its roll jitter: a random share of
  `segment.jitter.ms` drawn once per segment (Kafka's rollJitterMs), so that partitions created or loaded
  together do not all roll at once. The randomness is `random_below`, replaced by tests.
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

import contextlib
import errno
import logging
import os
import random
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from moldau.clock import Clock
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader, assign_offsets, parse_header
from moldau.protocol.record_validation import RecordsCheck
from moldau.storage import checkpoints, log_loading, log_reads, retention
from moldau.storage.append_validation import LeaderAppendChecks, check_own_sizes
from moldau.storage.checkpoint_writer import CheckpointWriter, Offsets
from moldau.storage.checkpoints import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_OFFSET_FILE,
    PARTITION_METADATA_FILE,
    RECOVERY_POINT_FILE,
    kafka_uuid_string,
)
from moldau.storage.control_batch import TransactionMarker, build_marker_batch
from moldau.storage.drop_behind import DropBehind, SyncTicket, sync_later
from moldau.storage.follower_append import no_batches_error, plan_follower_append
from moldau.storage.leader_epoch_cache import UNDEFINED_EPOCH, LeaderEpochCache
from moldau.storage.log_common import (
    ActiveProducer,
    AppendResult,
    ReadResult,
    aborted_entry,
    parse_partition_dir_name,
    storage_error,
)
from moldau.storage.log_config import LogConfig, TimestampType
from moldau.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS, BatchMetadata, ProducerStateManager
from moldau.storage.retention import DELETE_TO_HIGH_WATERMARK
from moldau.storage.segment import AppendedBatch, DeferredCloser, LogSegment, segment_log_base
from moldau.storage.segment_list import SegmentList
from moldau.storage.transaction_index import AbortedTxn, collect_aborted
from moldau.storage.truncation import TruncationKind, plan_truncation

log = logging.getLogger(__name__)

# How long the periodic pass leaves a rolled segment's fsync to the worker thread before doing it on the event
# loop (a worker stuck behind a slow disk must not hold the recovery point back for long).
ROLLED_SYNC_WAIT_MS = 10_000

# The names other packages import from here, wherever they are defined now.
__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "DELETE_TO_HIGH_WATERMARK",
    "HIGH_WATERMARK_FILE",
    "LOG_START_OFFSET_FILE",
    "PARTITION_METADATA_FILE",
    "RECOVERY_POINT_FILE",
    "ActiveProducer",
    "AppendResult",
    "PartitionLog",
    "ReadResult",
    "kafka_uuid_string",
    "parse_partition_dir_name",
]


@dataclass(slots=True)
class _Deferred:
    """What a log opened with `open_deferred` knows before it reads its directory."""

    log_start_offset: int
    log_end_offset: int
    epoch_starts: list[tuple[int, int]] = field(default_factory=list)
    topic_id_read: bool = False
    # (segments, bytes) of the directory's segment files, read once on demand: a deferred log is not written.
    footprint: tuple[int, int] | None = None
    # False for a new log whose directory is not made yet (`create_deferred`): loading it makes the directory.
    on_disk: bool = True


@dataclass(frozen=True, slots=True)
class _RolledSync:
    """fsyncs of a rolled segment handed to the worker: `segment` (None when they do not cover its indexes) is
    durable as it was at `changes` once `ticket` is done without error."""

    ticket: SyncTicket
    segment: LogSegment | None
    changes: int


def _open_for_sync(path: str, create: bool = False) -> int | None:
    """A read-only descriptor of `path` (made empty if missing and `create`) for the worker to fsync; None if it
    cannot be opened (no descriptor left, no such file), and the caller's own fsyncs cover it."""
    try:
        return os.open(path, os.O_RDONLY | (os.O_CREAT if create else 0), 0o644)
    except OSError:
        return None


class PartitionLog:
    """One partition's log; construct with `PartitionLog.open` (or `open_deferred`)."""

    def __init__(
        self, directory: str, config: LogConfig, clock: Clock, topic_id: uuid.UUID | None,
        producers: ProducerStateManager, closer: DeferredCloser,
    ) -> None:
        self.directory = directory
        self._topic_id = topic_id
        parsed = parse_partition_dir_name(os.path.basename(os.path.normpath(directory)))
        self.topic, self.partition = parsed if parsed is not None else ("", -1)
        self._producer_state = producers
        self._leader_epochs = LeaderEpochCache(directory)
        self.high_watermark_follows_log_end = True
        # KIP-890: a transactional batch that starts a transaction must bring the producer's verification
        # guard (`transaction.partition.verification.enable`).
        self.transaction_verification = True
        self._config = config
        self._drop_behind = DropBehind()  # early write-back, and drop-behind if set
        self._rolled_syncs: list[_RolledSync] = []  # fsyncs of rolled segments started on the worker thread
        # Producer snapshots taken at rolls, not known to be durable yet: (offset, the worker's ticket for them).
        self._unsynced_snapshots: list[tuple[int, SyncTicket | None]] = []
        self._clock = clock
        self._closer = closer
        self._owns_closer = False
        self._segment_list = SegmentList(directory, config, closer)
        # Set while the directory has not been read (`open_deferred`): the offsets are known, the rest is loaded
        # by the first use of the segments, producer state or leader epoch cache.
        self._deferred: _Deferred | None = None
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._high_watermark = 0
        self._recovery_point = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock.time_ms()
        self._closed = False
        # The roll jitter of the active segment (`_roll_age_ms`), drawn once per segment with `random_below`.
        self.random_below: Callable[[int], int] = random.randrange
        self._jittered_segment: LogSegment | None = None
        self._roll_jitter_ms = 0
        # Set by the log manager: its directory failed (KIP-112), so every read and write is refused.
        self.offline = False
        # Told of a failed file operation other than a full disk, so the whole log directory can be taken offline.
        self.on_io_error: Callable[[PartitionLog, OSError], None] | None = None
        # The offset checkpoint files, written on the worker thread by the periodic pass and retention. They
        # remember what they hold: a flush with nothing new writes no file (closing thousands of idle logs must
        # not cost fsyncs each).
        self._checkpoints = CheckpointWriter(directory, self._offsets_to_checkpoint,
                                             producers.delete_snapshots_before)
        # False when the owner keeps a marker for the whole log directory, removed durably before this log opens
        # and written after it closes and the owner synced the file system: then this log's own marker, and the
        # checkpoints and snapshot written at close, need no fsyncs each.
        self._durable_close = True
        # Told after every write that may bring maintenance forward (an append, a truncation): the owner's schedule
        # of `maintenance_due_ms` (LogManager), so that its periodic pass visits only logs with something due.
        self.on_write: Callable[[PartitionLog], None] | None = None

    # -- opening (the steps themselves are in log_loading) --------------------------------------------

    @classmethod
    def open(
        cls, directory: str, config: LogConfig, clock: Clock, topic_id: uuid.UUID | None = None, *,
        clean_shutdown: bool | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        closer: DeferredCloser | None = None,
        recover_all: bool = False,
        log_dir_marker: bool = False,
    ) -> PartitionLog:
        """Open (or create) the log in `directory`.

        The previous close counts as clean when this partition's marker is present, unless the caller
        knows better (`clean_shutdown`, e.g. from its log directory's marker). After an unclean one, segments
        from the recovery point on are re-validated and torn tails cut. `recover_all` re-validates every segment,
        down to each record (a log written before records were validated).
        `log_dir_marker`: the owner keeps a clean-shutdown marker for the whole log directory, removed durably
        before this open, and written after every close once it synced the file system (`sync_file_system`):
        then `close` leaves no marker of this log's own, and what it writes beside the segments needs no fsyncs.
        """
        os.makedirs(directory, exist_ok=True)
        topic_id = checkpoints.reconcile_topic_id(directory, topic_id)
        had_marker = checkpoints.has_clean_shutdown_marker(directory)
        log = cls(
            directory, config, clock, topic_id,
            ProducerStateManager(directory, producer_id_expiration_ms),
            closer if closer is not None else DeferredCloser(config.file_delete_delay_ms),
        )
        log._owns_closer = closer is None
        log._durable_close = not log_dir_marker
        clean = had_marker if clean_shutdown is None else clean_shutdown
        log._load(clean=clean and not recover_all, recover_all=recover_all)
        if had_marker:
            checkpoints.remove_clean_shutdown_marker(directory, durable=log._durable_close)
        return log

    @classmethod
    def open_deferred(
        cls, directory: str, config: LogConfig, clock: Clock, *, log_start_offset: int, log_end_offset: int,
        high_watermark: int, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        closer: DeferredCloser,
    ) -> PartitionLog:
        """A log closed cleanly, known by the offsets its owner checkpointed for it (`log_dir_checkpoints`),
        whose directory is not read until first needed: the first use of its segments, producer state or leader
        epoch cache loads it as `open` would after a clean shutdown. Until then it holds no file open; its
        offsets, topic id (read alone, from `partition.metadata`), high watermark changes and leader epoch
        starts are answered or kept in memory, and closing it writes nothing. The owner keeps the log directory's
        clean-shutdown marker (`log_dir_marker` of `open`)."""
        log = cls(directory, config, clock, None, ProducerStateManager(directory, producer_id_expiration_ms),
                  closer)
        log._durable_close = False
        log._topic_id = None
        log._deferred = _Deferred(log_start_offset, log_end_offset)
        log._log_start_offset = log_start_offset
        log._log_end_offset = log._recovery_point = log_end_offset
        log._high_watermark = min(max(high_watermark, log_start_offset), log_end_offset)
        return log

    @classmethod
    def create_deferred(
        cls, directory: str, config: LogConfig, clock: Clock, topic_id: uuid.UUID | None, *,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS, closer: DeferredCloser,
    ) -> PartitionLog:
        """A new, empty log whose directory (which must not exist) is made on first use, as `open_deferred`
        loads on first use: creating thousands of partitions at once then costs no file operation each on the
        event loop, where making a directory, its first segment and `partition.metadata` takes about half a
        millisecond a log. Loading it (`load`) makes them as `open` would; until then it is empty, holds no file,
        and closing or deleting it touches nothing on disk. The owner keeps the log directory's clean-shutdown
        marker (`log_dir_marker` of `open`)."""
        log = cls(directory, config, clock, topic_id, ProducerStateManager(directory, producer_id_expiration_ms),
                  closer)
        log._durable_close = False
        log._deferred = _Deferred(0, 0, topic_id_read=True, footprint=(1, 0), on_disk=False)  # as when it is made
        return log

    @property
    def loaded(self) -> bool:
        """False while an `open_deferred` log has not read its directory yet (or a `create_deferred` one has not
        made it)."""
        return self._deferred is None

    @property
    def on_disk(self) -> bool:
        """False while a `create_deferred` log has not made its directory."""
        return self._deferred is None or self._deferred.on_disk

    def load(self) -> None:
        """Read the directory of a deferred log now (a no-op for one loaded already). Raises KafkaError
        KAFKA_STORAGE_ERROR if it cannot be read."""
        deferred, self._deferred = self._deferred, None
        if deferred is None:
            return
        high_watermark = self._high_watermark
        try:
            if not deferred.on_disk:
                with contextlib.suppress(FileExistsError):  # not makedirs: the log directory must still be there
                    os.mkdir(self.directory)
                self._topic_id = checkpoints.reconcile_topic_id(self.directory, self._topic_id)
            elif self._topic_id is None:
                self._topic_id = checkpoints.reconcile_topic_id(self.directory, None)
            self._load(clean=True)
            # A marker left by a version that kept one per partition: the log directory's is the one that counts.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.directory, CLEAN_SHUTDOWN_FILE))
        except OSError as e:
            raise self._storage_error(e) from e
        if (self._log_start_offset, self._log_end_offset) != (deferred.log_start_offset, deferred.log_end_offset):
            log.warning("%s: the log directory's checkpoints said offsets %d-%d, its segments hold %d-%d", self._name,
                        deferred.log_start_offset, deferred.log_end_offset, self._log_start_offset,
                        self._log_end_offset)
        # What the owner did while the log was deferred stands: the high watermark it moved, the epochs it began.
        self._high_watermark = min(max(high_watermark, self._log_start_offset), self._log_end_offset)
        for epoch, offset in deferred.epoch_starts:
            self._leader_epochs.assign(epoch, min(offset, self._log_end_offset), write=False)
        self._producer_state.first_unstable_offset(self._high_watermark)

    @property
    def _segments(self) -> SegmentList:
        if self._deferred is not None:
            self.load()
        return self._segment_list

    @property
    def producer_state(self) -> ProducerStateManager:
        if self._deferred is not None:
            self.load()
        return self._producer_state

    @property
    def leader_epochs(self) -> LeaderEpochCache:
        if self._deferred is not None:
            self.load()
        return self._leader_epochs

    @property
    def topic_id(self) -> uuid.UUID | None:
        if self._topic_id is None and self._deferred is not None and not self._deferred.topic_id_read:
            self._deferred.topic_id_read = True
            self._topic_id = checkpoints.read_topic_id(self.directory)
        return self._topic_id

    @topic_id.setter
    def topic_id(self, topic_id: uuid.UUID | None) -> None:
        self._topic_id = topic_id

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch (`LeaderEpochCache.latest_epoch`), what a follower's fetch names as its last. A
        new log whose directory is not made yet answers from memory: a follower of thousands of new partitions must
        not make them all to build one Fetch request."""
        if self._deferred is not None and not self._deferred.on_disk:
            return self._deferred.epoch_starts[-1][0] if self._deferred.epoch_starts else UNDEFINED_EPOCH
        return self.leader_epochs.latest_epoch

    def begin_leader_epoch(self, epoch: int) -> None:
        """Record that `epoch` starts at the log end offset (a new leadership), in memory: the first append in the
        epoch writes the file. A deferred log keeps it until it is loaded."""
        if self._deferred is not None:
            self._deferred.epoch_starts.append((epoch, self._log_end_offset))
        else:
            self._leader_epochs.assign(epoch, self._log_end_offset, write=False)

    def _load(self, clean: bool, recover_all: bool = False) -> None:
        now = self._clock.time_ms()
        for segment in log_loading.open_segments(self.directory, self._config.segment_index_bytes, now):
            self._segments.add(segment)
        checkpointed_start = checkpoints.read_offset_checkpoint(self.directory, LOG_START_OFFSET_FILE)
        checkpointed_recovery = checkpoints.read_offset_checkpoint(self.directory, RECOVERY_POINT_FILE)
        recovery_point = 0 if recover_all else checkpointed_recovery or 0
        # A directory without segments (a new partition) has nothing to recover or fsync.
        clean = clean or not self._segments
        rebuilt_from = None if clean else self._recover_from(recovery_point)
        created = not self._segments
        if created:
            self._segments.create(checkpointed_start or 0, now)
        self._log_end_offset = self._segments.active.next_offset
        checkpointed_hw = checkpoints.read_offset_checkpoint(self.directory, HIGH_WATERMARK_FILE)
        found: Offsets = checkpointed_recovery, checkpointed_start, checkpointed_hw
        if found == (None, None, None) and self._segments.bases == [0] and self._log_end_offset == 0:
            # What the next load makes of an empty log without checkpoint files: nothing to write until it moves.
            found = 0, 0, 0
        self._checkpoints.assume_written(found)
        self._log_start_offset, self._high_watermark = log_loading.loaded_offsets(
            self._segments.bases[0], self._log_end_offset, checkpointed_start, checkpointed_hw)
        self._drop_segments_below_start(now)  # cannot move the log start: the segment holding it stays
        self._recovery_point = min(recovery_point, self._log_end_offset)
        # Read only when the cache must be rebuilt.
        headers = partial(log_loading.headers_from, self._segments.items, self._segments.bases,
                          self._log_start_offset)
        self._leader_epochs = log_loading.load_leader_epochs(self.directory, headers, self._log_start_offset,
                                                            self._log_end_offset)
        # After recovery, producer state is replayed from before the rebuilt segments, which also writes their
        # aborted-transaction indexes again.
        self._load_producer_state(now, rebuilt_from)
        if not clean:
            # Recovered data may exist only in the page cache; make it durable once, then start clean.
            try:
                self.flush(after_recovery=True)
            except KafkaError as exc:
                # A full (or failing) disk must not keep the broker down: the log opens for reads, its recovery
                # point stays where it was (so the next start recovers again), and appends fail until it heals.
                log.warning("%s: not flushed after recovery: %s", self._name, exc.message)

    def _recover_from(self, recovery_point: int) -> int | None:
        """Recover from the segment holding the recovery point (see `recover_segments`) and forget the
        segments it set aside; returns the base offset of the first re-validated segment."""
        rebuilt_from, kept = log_loading.recover_segments(self._segments.items, self._segments.bases,
                                                          recovery_point, os.path.basename(self.directory))
        self._segments.forget_after(kept)
        return rebuilt_from

    def _load_producer_state(self, now_ms: int, at_or_below: int | None = None) -> None:
        log_loading.load_producer_state(self.producer_state, self._segments.items, self._segments.bases,
                                        self._log_start_offset, self._log_end_offset, now_ms, at_or_below,
                                        self._name)

    @property
    def _name(self) -> str:
        """`<topic>-<partition>`, for messages."""
        return f"{self.topic}-{self.partition}"

    # -- properties ----------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config
        self._segment_list.set_config(config)

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
        if self._deferred is None:  # a deferred log does this when it loads
            self._producer_state.first_unstable_offset(self._high_watermark)  # forgets transactions now stable

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
        if self._deferred is not None and self._log_end_offset == self._log_start_offset:
            return high_watermark  # no records, so no transaction: no need to load the log to know
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
            for segment in self._segments.from_offset(start_offset):
                if collect_aborted(segment.txn_index.entries, start_offset, upper_offset, found):
                    break
        except OSError as e:
            raise self._storage_error(e) from e
        return found

    def ongoing_transactions(self) -> list[tuple[int, int]]:
        """(producer id, first offset) of every transaction ongoing on this partition, oldest first."""
        return list(self.producer_state.ongoing_transactions())

    def active_producers(self) -> list[ActiveProducer]:
        """Every producer this partition remembers, for DescribeProducers."""
        return [ActiveProducer(entry.producer_id, entry.epoch, -1 if entry.last_seq is None else entry.last_seq,
                               entry.last_timestamp_ms, entry.coordinator_epoch,
                               -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset)
                for entry in self.producer_state.producers.values()]

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
        if self._deferred is not None:
            return self._deferred_footprint()[1]
        return self._segments.size_bytes

    @property
    def segment_count(self) -> int:
        if self._deferred is not None:
            return self._deferred_footprint()[0]
        return len(self._segment_list)

    def _deferred_footprint(self) -> tuple[int, int]:
        """Segments and bytes of a deferred log from its directory listing. A metrics scrape or DescribeLogDirs
        asks this of every log: loading them all for it would stall the broker right after a restart."""
        assert self._deferred is not None
        if self._deferred.footprint is None:
            try:
                with os.scandir(self.directory) as entries:
                    sizes = [entry.stat().st_size for entry in entries if segment_log_base(entry.name) is not None]
            except OSError as e:
                raise self._storage_error(e) from e
            self._deferred.footprint = (len(sizes), sum(sizes))
        return self._deferred.footprint

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    # -- append --------------------------------------------------------------------------------------

    def append(self, batches: list[tuple[BatchHeader, memoryview]], leader_epoch: int,
               verification_guard: object | None = None, records_check: RecordsCheck | None = None, *,
               own: bool = False) -> AppendResult:
        """Validate all `batches` (already split and CRC-checked), then store them at consecutive offsets.
        `records_check` is a further check of each batch's records (the topic's schema validation).

        `own`: batches the broker built itself without a producer id (a coordinator's records, see
        `coordinator.internal_topic.own_batch`), whose records and CRC are right by construction: only their sizes
        are checked against the log's limits, as Kafka's coordinators append without the client checks.

        A transactional batch that starts a transaction here must come with the producer's current
        `verification_guard` (see `needs_verification`) unless `transaction_verification` is off.

        Raises KafkaError: MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_TIMESTAMP, INVALID_RECORD
        (control batches from clients, transactional batches without a producer id), INVALID_TXN_STATE (a
        transaction start not verified), producer errors, KAFKA_STORAGE_ERROR.
        """
        if not batches:
            raise KafkaError(ErrorCode.corrupt_message, "no record batches")
        self._check_open()
        now = self._clock.time_ms()
        append_time = now if self._config.message_timestamp_type is TimestampType.LOG_APPEND_TIME else None
        if own:
            total_bytes = check_own_sizes(batches, self._config)
        else:
            checks = LeaderAppendChecks(self._config, self.producer_state, self.transaction_verification, self._name,
                                        records_check)
            total_bytes, duplicate = checks.validate(batches, now, append_time is None, verification_guard)
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
        self._check_open()
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

        `plan_follower_append` (follower_append.py) decides whether they are accepted; this stores them. No
        idempotent-producer check rejects them (the leader did that). Producer state and the leader epoch
        cache follow the batches; the log end offset moves past the last one; the high watermark is left to
        the caller. All or nothing, as `append`.

        Raises KafkaError: UNKNOWN_SERVER_ERROR (no batches, or offsets that overlap the log or go
        backwards), RECORD_LIST_TOO_LARGE (more bytes than a segment holds), KAFKA_STORAGE_ERROR.
        """
        if not batches:
            raise no_batches_error()
        self._check_open()
        now = self._clock.time_ms()
        plan = plan_follower_append(batches, self._log_end_offset, self._config.segment_bytes, self._name)
        stored = list(plan.stored)
        self._write([view for _, view in batches], stored, plan.total_bytes, plan.epochs, now)
        self._after_append(batches, stored, now, leader=False, markers=plan.markers)
        return AppendResult(stored[0].base_offset, stored[-1].next_offset - 1, -1, self._log_start_offset)

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaError(ErrorCode.kafka_storage_error, "the log is closed")
        self._check_online()

    def _check_online(self) -> None:
        if self.offline:
            raise KafkaError(ErrorCode.kafka_storage_error, f"the log directory of {self._name} is offline")

    def _storage_error(self, error: OSError) -> KafkaError:
        """A failed file operation as clients see it (KAFKA_STORAGE_ERROR). A full disk is passing (space can be
        freed); any other failure is the directory's, and the owner hears of it."""
        if error.errno != errno.ENOSPC and self.on_io_error is not None:
            self.on_io_error(self, error)
        return storage_error(error)

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
                    aborted.append(aborted_entry(self.producer_state, completed))
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
        if self.on_write is not None:
            self.on_write(self)

    def _index_aborted(self, entries: list[AbortedTxn]) -> None:
        """Add aborts to the index of the segment holding their marker (all of one append share a segment).
        Should this fail, the marker is stored but not indexed until recovery rebuilds the index."""
        try:
            for entry in entries:
                self._segments.holding(entry.last_offset).txn_index.append(entry)
        except OSError as e:
            raise self._storage_error(e) from e

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
            step = self._config.writeback_step_bytes
            if step > 0:
                self._drop_behind.after_append(segment.fd, segment.size_bytes, step, self._config.drop_behind_bytes)
        except OSError as e:
            if epochs_changed:
                with contextlib.suppress(OSError):
                    self.leader_epochs.truncate_from_end(self._log_end_offset)
            raise self._storage_error(e) from e

    def _segment_for_append(self, total_bytes: int, first_offset: int, last_offset: int,
                            now_ms: int) -> LogSegment:
        """The segment to take an append of `total_bytes` for offsets first_offset..last_offset. A new
        segment starts at `first_offset`, which only a follower's append (after a gap) puts above the log
        end offset."""
        config = self._config
        active = self._segments.active
        if active.must_roll_before(total_bytes, last_offset, now_ms, config.segment_bytes, self._roll_age_ms(active)):
            self._roll(now_ms, first_offset)
        elif not active.can_hold_offset(last_offset):
            # An empty active segment, and a follower's batch beyond a gap too wide for its index entries.
            self._segments.replace_active(first_offset, now_ms)
        return self._segments.active

    # -- rolling -------------------------------------------------------------------------------------

    def _roll_age_ms(self, active: LogSegment) -> int:
        """The age past which the active segment rolls: `max_segment_ms` less the segment's jitter, drawn the
        first time it is asked of a segment, below `segment.jitter.ms` (and below `max_segment_ms`, where Kafka
        bounds it by `segment.ms` alone and a compacted log's shorter `max.compaction.lag.ms` could then make
        every append roll). A config changed later applies to the next segment's draw, as in Kafka."""
        config = self._config
        if active is not self._jittered_segment:
            self._jittered_segment = active
            bound = min(config.segment_jitter_ms, config.max_segment_ms)
            self._roll_jitter_ms = self.random_below(bound) if bound > 0 else 0
        return max(0, config.max_segment_ms - self._roll_jitter_ms)

    def _roll(self, now_ms: int, base_offset: int | None = None) -> None:
        """Start a new active segment at the log end offset, or at `base_offset` when that is higher (a
        follower's append after a gap); a no-op if the active one is empty."""
        active = self._segments.active
        if active.size_bytes == 0:
            return
        active.seal()
        # The snapshot lets recovery start at the new segment. Its fsync goes to the worker with the segment's:
        # on the loop it held every client for 5-11 ms per roll (docs/benchmarks.md), as in Kafka before
        # KAFKA-9693. The recovery point passes it only once it is durable (`_sync_rolled_snapshots`).
        self.producer_state.take_snapshot(self._log_end_offset, durable=False)
        self._sync_rolled_later(active, self._log_end_offset, now_ms)
        step = self._config.writeback_step_bytes
        if step > 0:  # after the fsync on the same worker, so that its pages are clean when they are dropped
            self._drop_behind.rolled(active, step, self._config.drop_behind_bytes)
        start = self._log_end_offset if base_offset is None else max(base_offset, self._log_end_offset)
        self._segments.create(start, now_ms)
        if self.on_write is not None:  # the rolled segment awaits its fsync
            self.on_write(self)

    def _sync_rolled_later(self, segment: LogSegment, snapshot_offset: int, now_ms: int) -> None:
        """Hand the fsyncs of the snapshot at `snapshot_offset`, of the rolled `segment` and of its offset and time
        indexes to the worker. Once done, the periodic pass that moves the recovery point past the segment has no
        fsync of it left to do on the event loop (`LogSegment.mark_durable`): under heavy I/O (retention unlinking
        gigabytes) an index's fsync there took 183 ms (docs/benchmarks.md)."""
        snapshot_fd = _open_for_sync(self.producer_state.snapshot_path(snapshot_offset))
        indexes = (segment.offset_index, segment.time_index)
        # An index without entries has no file yet: made here, so that every rolled segment has its indexes, as in
        # Kafka's layout (the pass's own flush used to make them).
        index_fds = [_open_for_sync(index.path, create=True) for index in indexes]
        # Without a descriptor (none left), an index without entries needs no fsync: a missing file reads as empty.
        covers = all(fd is not None or (index.loaded and index.entries == 0) for fd, index in zip(index_fds, indexes,
                                                                                                strict=True))
        try:
            fds = [fd for fd in (snapshot_fd, segment.fd, *index_fds) if fd is not None]
            ticket = sync_later(fds, now_ms)
        finally:
            for fd in (snapshot_fd, *index_fds):
                if fd is not None:
                    os.close(fd)
        if ticket is not None:
            # Not covering an index (no descriptor left), the pass fsyncs the segment and its indexes itself.
            self._rolled_syncs.append(_RolledSync(ticket, segment if covers else None, segment.changes))
        # Without a descriptor for the snapshot, the periodic pass fsyncs it itself.
        self._unsynced_snapshots.append((snapshot_offset, ticket if snapshot_fd is not None else None))

    def maintenance_due_ms(self) -> int | None:
        """The earliest time at which `roll_if_due` or `flush_if_due` may have work (0: now); None while neither
        can before the next write: the active segment is empty, nothing is unflushed and the recovery point has
        reached the active segment. A deferred log has nothing due until it is loaded (see `LogManager`)."""
        if self._deferred is not None:
            return None
        active = self._segments.active
        if self._recovery_point < active.base_offset:
            return 0
        due = []
        if self._unflushed_messages:
            due.append(self._last_flush_ms + self._config.flush_ms)
        if active.size_bytes:
            due.append(active.rolling_base_ms + self._roll_age_ms(active) + 1)
        return min(due) if due else None

    def roll_if_due(self, now_ms: int) -> bool:
        """Roll a non-empty active segment older than segment_ms (see `LogConfig.max_segment_ms`, less the
        segment's roll jitter); returns whether it rolled."""
        if self._deferred is not None:
            return False
        active = self._segments.active
        if active.size_bytes == 0 or now_ms - active.rolling_base_ms <= self._roll_age_ms(active):
            return False
        try:
            self._roll(now_ms)
        except OSError as e:
            raise self._storage_error(e) from e
        return True

    # -- read (the lookups are in log_reads) ----------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
             max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `fetch_offset`, from a single segment.

        Stops before `max_offset` (exclusive; default: the high watermark, capped at the log end) and
        after `max_bytes`, except that `min_one_batch` returns a larger first batch whole.
        Raises KafkaError(OFFSET_OUT_OF_RANGE) outside [log_start_offset, log_end_offset].
        """
        self._check_online()
        if fetch_offset < self._log_start_offset or fetch_offset > self._log_end_offset:
            raise KafkaError(
                ErrorCode.offset_out_of_range,
                f"offset {fetch_offset} is outside [{self._log_start_offset}, {self._log_end_offset}]",
            )
        high_watermark = self.high_watermark
        if self._deferred is not None and fetch_offset == self._log_end_offset:
            # Nothing to read: a follower or consumer waiting at the end of thousands of deferred logs (new, or not
            # used since a restart) must not load them all in one Fetch.
            return ReadResult((), high_watermark, self._log_start_offset, self._log_end_offset)
        upper = min(high_watermark if max_offset is None else max_offset, self._log_end_offset)
        try:
            found = log_reads.read_slice(self._segments.items, self._segments.bases, self._log_end_offset,
                                         fetch_offset, max_bytes, min_one_batch, upper)
        except OSError as e:
            raise self._storage_error(e) from e
        return ReadResult(() if found is None or found.size == 0 else (found,), high_watermark,
                          self._log_start_offset, self._log_end_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after the log start with timestamp >= the
        target; None when there is none (ListOffsets then answers with the log end offset)."""
        self._check_online()
        try:
            return log_reads.offset_for_timestamp(self._segments.items, self._segments.bases,
                                                  self._log_start_offset, timestamp_ms)
        except OSError as e:
            raise self._storage_error(e) from e

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp; None if empty."""
        try:
            return log_reads.max_timestamp_offset(self._segments.items)
        except OSError as e:
            raise self._storage_error(e) from e

    # -- deletion and retention (the rules are in retention) -------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset to `offset` (-1: the high watermark) and delete the
        segments wholly below it. Returns the new log start offset (the low watermark)."""
        new_start = retention.new_start_for_delete_records(offset, self.high_watermark, self._log_start_offset)
        if new_start is None:
            return self._log_start_offset
        try:
            self._log_start_offset = new_start
            self._checkpoints.write_log_start_now()
            self._drop_segments_below_start(self._clock.time_ms())
            self.producer_state.truncate_head(new_start)
            self.leader_epochs.truncate_from_start(new_start)
        except OSError as e:
            raise self._storage_error(e) from e
        return self._log_start_offset

    def apply_retention(self, now_ms: int, max_segments: int | None = None) -> int:
        """Delete whole segments past retention_ms (by largest timestamp) or beyond retention_bytes, as
        Kafka does: oldest first, never at or above the high watermark, rolling the active segment first
        when it must go too. At most `max_segments` (all when None); returns the number deleted."""
        if self._deferred is not None and self._log_end_offset == self._log_start_offset:
            return 0  # nothing to delete: no need to read the directory
        config = self._config
        budget = len(self._segments) if max_segments is None else max_segments
        try:
            deleted = 0
            if "delete" in config.cleanup_policy:
                if config.retention_ms >= 0:
                    by_time = retention.past_retention_time(now_ms, config.retention_ms)
                    deleted += self._delete_oldest_while(by_time, now_ms, budget)
                if config.retention_bytes >= 0 and deleted < budget:
                    # Sized after the deletions by time.
                    by_size = retention.beyond_retention_size(self.size_bytes, config.retention_bytes)
                    deleted += self._delete_oldest_while(by_size, now_ms, budget - deleted)
            self._closer.run(now_ms)
            return deleted
        except OSError as e:
            raise self._storage_error(e) from e

    def _delete_oldest_while(self, rule: retention.SegmentRule, now_ms: int, at_most: int) -> int:
        count = retention.deletable_prefix(self._segments.items, self._segments.bases, self._log_end_offset,
                                           self.high_watermark, rule)
        if count == 0 or at_most <= 0:
            return 0
        if count == len(self._segments) and count <= at_most:
            self._roll(now_ms)  # a log always keeps one (active) segment; with fewer allowed, a later call rolls it
        count = min(count, at_most)
        self._delete_first_segments(count, now_ms)
        return count

    def _drop_segments_below_start(self, now_ms: int) -> None:
        count = retention.segments_below_start(self._segments.bases, self._log_start_offset)
        if count:
            self._delete_first_segments(count, now_ms)

    def _delete_first_segments(self, count: int, now_ms: int) -> None:
        doomed = self._segments.take_first(count)
        # Neither checkpoint is written on the loop: the log start goes to the worker thread, the leader epochs'
        # cut waits for their next write. With whole segments gone, the first one left says where the log starts,
        # and loading cuts the epochs to it, so a file that lags says nothing wrong. An fsync or rename here waited
        # for the file system's journal, behind a rolled segment's write-back or deleted blocks being freed, holding
        # every client for tens of milliseconds (docs/benchmarks.md, retention in slices); Kafka took these fsyncs
        # off its log lock (KAFKA-15046).
        if self._segments.bases[0] > self._log_start_offset:
            self._log_start_offset = self._segments.bases[0]
            self._checkpoints.write_later()
        self.producer_state.truncate_head(self._log_start_offset)
        self.leader_epochs.truncate_from_start(self._log_start_offset, write=False)
        self._segments.delete_files(doomed, now_ms)

    def replace_segments(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put `new` in the place of `old`, consecutive non-active segments whose files the cleaner has
        already swapped on disk. Their fds close after file_delete_delay_ms, so fetches in flight finish."""
        self._segments.replace(old, new, self._clock.time_ms())
        for segment in old[1:]:
            # `new` has a transaction index of its own, under the first one's name.
            segment.txn_index.delete()

    def expire_producers(self, now_ms: int) -> int:
        if self._deferred is not None:
            return 0  # its producers are not in memory yet; loading them drops the expired ones
        return self.producer_state.remove_expired(now_ms)

    # -- durability (the checkpoint files are in checkpoints) ------------------------------------------

    def flush(self, *, after_recovery: bool = False) -> None:
        """fsync everything not yet durable and advance the recovery point to the log end offset. Nothing is
        fsynced when the recovery point is there already, except `after_recovery`, when recovery cut files."""
        if self._deferred is not None:
            return  # closed cleanly and not written since: everything is durable
        self._settle_rolled_syncs()  # fsynced below in any case
        self._advance_recovery_point(self._log_end_offset, len(self._segments), after_recovery)
        self._unflushed_messages = 0
        self._last_flush_ms = self._clock.time_ms()

    def flush_if_due(self, now_ms: int) -> None:
        """Periodic durability: fsync rolled segments (moving the recovery point to the active segment's
        base offset) and everything once flush_ms has passed with unflushed messages."""
        if self._deferred is not None:
            return
        try:
            self._checkpoints.raise_failure()  # of the worker's last write of the checkpoints
        except OSError as e:
            raise self._storage_error(e) from e
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self.flush()
        elif self._recovery_point < self._segments.active.base_offset and not self._awaiting_rolled_syncs(now_ms):
            self._advance_recovery_point(self._segments.active.base_offset, len(self._segments) - 1,
                                         checkpoints_later=True)

    def _awaiting_rolled_syncs(self, now_ms: int) -> bool:
        """Whether the worker thread is still fsyncing rolled segments, and this pass should leave them to it
        (the next pass fsyncs them, quickly then). After ROLLED_SYNC_WAIT_MS the pass fsyncs them itself."""
        pending = self._settle_rolled_syncs()
        return bool(pending) and now_ms - pending[0].ticket.queued_ms < ROLLED_SYNC_WAIT_MS

    def _settle_rolled_syncs(self) -> list[_RolledSync]:
        """Forget the worker's finished fsyncs, raising the error of one that failed; returns those still running.
        The kernel reports a failed write-back to one fsync only: if the worker's saw it, the log's own would not,
        so the worker's error counts as the log's. One still running is kept for the error it may yet report.
        A segment whose fsyncs succeeded is marked durable as it was when they were handed over."""
        pending = [sync for sync in self._rolled_syncs if not sync.ticket.done]
        # Read after `done`: the worker sets a ticket's error before marking it done.
        failed = next((sync.ticket.error for sync in self._rolled_syncs if sync.ticket.error is not None), None)
        if failed is None:
            for sync in self._rolled_syncs:
                if sync.ticket.done and sync.segment is not None:
                    sync.segment.mark_durable(sync.changes)
        self._rolled_syncs = pending
        if failed is not None:
            raise self._storage_error(failed)
        return pending

    def _advance_recovery_point(self, offset: int, end_index: int, force: bool = False,
                                durable: bool = True, checkpoints_later: bool = False) -> None:
        """fsync the segments from the one holding the recovery point to `end_index` (exclusive), then move
        the recovery point to `offset` and write the checkpoints (`checkpoints_later`: on the worker thread)."""
        try:
            if force or offset > self._recovery_point:  # below the recovery point everything is durable already
                self._sync_rolled_snapshots(offset, durable)
                for segment in self._segments.from_offset(self._recovery_point, end_index):
                    segment.flush()
            self._recovery_point = offset
            # Keep the newest snapshot at or below the base of the segment holding the recovery point: recovery
            # replays producer state from there to rebuild that segment's transaction index. Older ones go once the
            # checkpoint file holds this recovery point.
            keep_from = self._segments.holding(offset).base_offset
            if checkpoints_later:
                self._checkpoints.write_later(snapshots_before=(offset, keep_from))
            else:
                self._write_checkpoints(durable)
                self.producer_state.delete_snapshots_before(keep_from)
        except OSError as e:
            raise self._storage_error(e) from e

    def _sync_rolled_snapshots(self, offset: int, durable: bool) -> None:
        """fsync the snapshots taken at rolls up to `offset` that the worker has not fsynced (yet): recovery
        starts from the newest one at or below the recovery point, and older ones go once it passes them.
        Not `durable`: the caller syncs the file system afterwards (a broker's shutdown)."""
        left = []
        for snapshot_offset, ticket in self._unsynced_snapshots:
            if snapshot_offset > offset:
                left.append((snapshot_offset, ticket))
            elif durable and (ticket is None or not ticket.done or ticket.error is not None):
                self.producer_state.sync_snapshot(snapshot_offset)
        self._unsynced_snapshots = left

    def _offsets_to_checkpoint(self) -> tuple[int, int, int]:
        """What the checkpoint files are to hold; read on the worker thread too (`CheckpointWriter`)."""
        # The stored high watermark, not the property: after an unclean start, a log that follows its end still
        # holds the checkpointed high watermark until it is moved, and rewriting the log end would lose it.
        return self._recovery_point, self._log_start_offset, self._high_watermark

    def _write_checkpoints(self, durable: bool = True) -> None:
        self._checkpoints.write_now(durable)

    def checkpoint_offsets(self) -> tuple[int, int, int]:
        """(log start offset, recovery point, stored high watermark) as a clean close leaves them: what the log
        directory's checkpoints (`log_dir_checkpoints`) keep for `open_deferred`."""
        return self._log_start_offset, self._recovery_point, self._high_watermark

    def close(self) -> None:
        """Flush, snapshot producer state, close files and leave the clean-shutdown marker."""
        if self._closed:
            return
        self._drop_behind.forget()
        self._checkpoints.retire()  # a job still queued writes nothing after the last write below
        if self._deferred is not None:
            # Nothing was read or written: the files are as the last clean close left them.
            self._closed = True
            if self._owns_closer:
                self._closer.close_all()
            return
        try:
            self._segments.active.seal()
            # The segments are fsynced here all the same: a checkpoint must never be durable before the data.
            self._advance_recovery_point(self._log_end_offset, len(self._segments), durable=self._durable_close)
            # Producer state follows from the log, so a snapshot already taken at the log end still holds, and an
            # empty log without producers loads the same without one.
            empty = self._log_end_offset == self._log_start_offset and not self.producer_state.producers
            if not empty and not os.path.exists(self.producer_state.snapshot_path(self._log_end_offset)):
                self.producer_state.take_snapshot(self._log_end_offset, durable=self._durable_close)
            for segment in self._segments:
                segment.close()
            self._closed = True
            if self._durable_close:  # else the log directory's marker says it (see `open`)
                checkpoints.write_clean_shutdown_marker(self.directory)
        except OSError as e:
            raise self._storage_error(e) from e
        finally:
            if self._owns_closer:
                self._closer.close_all()

    def delete(self) -> None:
        """Remove the whole partition directory. With a shared closer, slices handed out stay readable
        for file_delete_delay_ms; a log that owns its closer has no later chance, so it closes now."""
        self._deferred = None  # nothing of a deferred log is open
        self._drop_behind.forget()
        self._checkpoints.retire()
        self._segment_list.delete_all(self._clock.time_ms())
        self._closed = True
        if self._owns_closer:
            self._closer.close_all()
        shutil.rmtree(self.directory, ignore_errors=True)

    def rename_directory(self, directory: str) -> None:
        """Follow a rename of the partition directory (LogManager's delete); open fds stay valid. A log whose
        directory is not made yet (`create_deferred`) only takes the new name."""
        # With no checkpoint written, nor snapshot deleted, on the worker thread in between.
        self._checkpoints.move(directory, partial(self._rename_directory, directory))

    def _rename_directory(self, directory: str) -> None:
        if self.on_disk:
            os.replace(self.directory, directory)
        self.directory = directory
        self._segment_list.rename(directory)  # a deferred log stays deferred: it loads from the new place
        self._producer_state.directory = directory
        self._leader_epochs.directory = directory

    # -- truncation (the decisions are in truncation) ----------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Remove every batch that holds an offset >= `offset`, as `plan_truncation` decides: the log may end
        below `offset` (a batch straddling it goes whole), or restart empty at `offset` (below the log start).
        Producer state is rebuilt to match the new log end and the leader epoch cache is cut there, also
        when no record goes (see truncation.py for why)."""
        plan = plan_truncation(offset, self._log_start_offset, self._log_end_offset, self._segments.bases)
        try:
            if plan.kind is TruncationKind.KEEP_RECORDS:
                self.leader_epochs.truncate_from_end(self._log_end_offset)
                return
            now = self._clock.time_ms()
            if plan.kind is TruncationKind.START_OVER:
                self._truncate_fully(offset, now)
            else:
                self._cut_segments(plan.keep_segments, offset, now)
            self._high_watermark = min(self._high_watermark, self._log_end_offset)
            self._recovery_point = min(self._recovery_point, self._log_end_offset)
            self.leader_epochs.truncate_from_end(self._log_end_offset)
            self._write_checkpoints()
            self.producer_state.delete_snapshots_after(self._log_end_offset)
            self._unsynced_snapshots = [e for e in self._unsynced_snapshots if e[0] <= self._log_end_offset]
            self._load_producer_state(now)
        except OSError as e:
            raise self._storage_error(e) from e
        finally:
            if self.on_write is not None:
                self.on_write(self)

    def _cut_segments(self, keep: int, offset: int, now_ms: int) -> None:
        """Delete all but the first `keep` segments and cut the last kept one at `offset`."""
        self._segments.keep_first(keep, now_ms)
        self._segments.active.truncate_to(offset)
        self._log_end_offset = self._segments.active.next_offset
        # Cutting a whole batch may go below a log start that lay inside it.
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)

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
            raise self._storage_error(e) from e
        finally:
            if self.on_write is not None:
                self.on_write(self)

    def _truncate_fully(self, offset: int, now_ms: int) -> None:
        self._segments.delete_all(now_ms)
        self._segments.create(offset, now_ms)
        self._log_start_offset = self._log_end_offset = offset
        self.producer_state.clear()
        self.producer_state.delete_snapshots_after(-1)
        self._unsynced_snapshots.clear()
        self.leader_epochs.clear()

    def __repr__(self) -> str:
        return (f"PartitionLog({self.directory!r}, start={self._log_start_offset}, "
                f"end={self._log_end_offset}, segments={len(self._segments)})")
