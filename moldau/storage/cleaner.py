"""The log cleaner: compaction of every log whose cleanup.policy includes `compact`, off the event loop.

A log is split at two offsets. Below the *first dirty offset* (checkpointed per partition in
`cleaner-offset-checkpoint`) lies the part already cleaned; from there to the *first uncleanable offset*
lies the dirty part the next cleaning maps. The first uncleanable offset is the base of the first segment
that is the active one, reaches past the last stable offset (so every transaction in the cleaned part is
decided, and aborted records can be left out of the offset map), or holds a record younger than
min.compaction.lag.ms, so the active segment, open transactions and young records are never cleaned. A log
is picked when its dirty bytes / (clean + dirty bytes) >= min.cleanable.dirty.ratio, when a dirty segment is
older than max.compaction.lag.ms, or when a tombstone's delete horizon has passed; among those, the
dirtiest first.

Threading. The event loop owns every `PartitionLog`; appends, fetches, rolls and retention go on while
a log is being cleaned. A cleaning runs in three steps:

1. *prepare* (loop thread, cheap): snapshot the non-active segments below the first uncleanable offset
   (base, end, size, file identity, aborted-transaction entries), the producers' last offsets and the
   settings into an immutable `CompactionJob`;
2. *compact* (cleaner thread, heavy): read those files, build the offset map, write and fsync `.cleaned`
   segments with their indexes (`moldau.storage.compactor`). It shares no mutable object with the loop;
   it opens the segment files itself and checks their identity, so a segment deleted meanwhile cancels
   the job instead of being read half-gone;
3. *apply* (loop thread, short): `poll` finds the job done and, per cleaned group, checks that the
   segments it replaces are still in the log, unchanged and not active (retention, DeleteRecords or a
   truncation may have removed them); then deletes the producer-state snapshots a removed transaction
   marker invalidates, renames the files into place (`segment_swap`) and swaps the segment objects
   (`PartitionLog.replace_segments`). Groups whose segments changed are discarded; the
   old segments' fds stay open for file_delete_delay_ms, so a fetch reading them keeps working.

Settings are Kafka's (`CleanerSettings`, read again at every `poll`, so dynamic changes apply at once):
`log.cleaner.threads` cleanings run at a time, each on its own log and thread, and share
`log.cleaner.dedupe.buffer.size` for their maps and `log.cleaner.io.buffer.size` for their reads (half of each
share, the other half being Kafka's write buffer); all of their reads and writes together are held to
`log.cleaner.io.max.bytes.per.second`. When a search finds no log to clean, the next waits
`log.cleaner.backoff.ms` (a finished cleaning searches again at once). `log.cleaner.enable=false` turns cleaning
off. Threads take the GIL for decoding records, so more than one mostly helps when cleanings wait on the disk.

`stop()` cancels the cleanings (a thread checks between batches, and a throttled one wakes), waits for the
threads and discards unapplied files. A cleaning that fails with an unexpected error marks its log
uncleanable until restart, so one bad log does not take the cleaner down.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Set
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass
from typing import TYPE_CHECKING, Self

from moldau.clock import Clock
from moldau.storage.compactor import (
    CleanerIo,
    CompactionCancelled,
    CompactionJob,
    CompactionResult,
    SegmentSnapshot,
    compact,
)
from moldau.storage.io_throttle import IoThrottle
from moldau.storage.log import PartitionLog
from moldau.storage.producer_state import write_atomically
from moldau.storage.segment import LogSegment
from moldau.storage.segment_swap import remove_cleaned, swap_in

if TYPE_CHECKING:
    from moldau.config import BrokerConfig

__all__ = ["CHECKPOINT_FILE", "DEFAULT_DEDUPE_BUFFER_BYTES", "CleanableRange", "CleanerSettings", "LogCleaner"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024
# A cleaning's reads are never smaller than this, whatever log.cleaner.io.buffer.size says (Kafka grows its
# buffer to whatever a batch needs; a tiny read size would only make every batch two reads).
MIN_READ_CHUNK_BYTES = 4096

LogsProvider = Callable[[], Mapping[tuple[str, int], PartitionLog]]


@dataclass(frozen=True, slots=True)
class CleanerSettings:
    """The log.cleaner.* broker configs that shape the cleaner (Kafka's names and defaults)."""

    enabled: bool = True
    threads: int = 1
    dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES
    dedupe_load_factor: float = 0.9
    io_buffer_bytes: int = 512 * 1024
    io_max_bytes_per_second: float = sys.float_info.max  # Kafka's Double.MAX_VALUE: no limit
    backoff_ms: int = 15_000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(config.log_cleaner_enable, config.log_cleaner_threads, config.log_cleaner_dedupe_buffer_size,
                   config.log_cleaner_io_buffer_load_factor, config.log_cleaner_io_buffer_size,
                   config.log_cleaner_io_max_bytes_per_second, config.log_cleaner_backoff_ms)

    @property
    def map_memory_bytes(self) -> int:
        """One cleaning's share of the dedupe buffer."""
        return self.dedupe_buffer_bytes // max(self.threads, 1)

    @property
    def read_chunk_bytes(self) -> int:
        """One cleaning's read size: half its share of the I/O buffers (Kafka's other half is its write buffer)."""
        return max(self.io_buffer_bytes // max(self.threads, 1) // 2, MIN_READ_CHUNK_BYTES)


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """How much of a log is clean and how much could be cleaned now."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    max_lag_exceeded: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class _LogState:
    log: PartitionLog
    first_dirty_offset: int
    delete_horizon_ms: int  # the earliest horizon of tombstones left by the last cleaning; -1 when none
    failed: bool = False


@dataclass(slots=True)
class _Cleaning:
    """A prepared cleaning: the job and the segment objects it may replace (index-aligned with the job's)."""

    state: _LogState
    segments: tuple[LogSegment, ...]
    job: CompactionJob
    future: Future[CompactionResult] | None = None


class LogCleaner:
    """Schedules and applies compaction of the logs `logs()` returns; drive it with `poll` on the loop."""

    def __init__(self, clock: Clock, logs: LogsProvider,
                 settings: CleanerSettings | Callable[[], CleanerSettings] = CleanerSettings(), *,
                 executor: Executor | None = None, monotonic: Callable[[], float] = time.monotonic) -> None:
        """`settings` may be a function, asked at every poll (dynamic broker configs); `executor` replaces the
        cleaner's own threads and `monotonic` the I/O throttle's clock (tests)."""
        self._settings = settings if callable(settings) else lambda: settings
        self._clock = clock
        self._logs = logs
        self._given_executor = executor
        self._executors: list[tuple[ThreadPoolExecutor, int]] = []  # (executor, its threads), the newest last
        self._cancelled = threading.Event()
        # The throttle runs on the cleaner threads: it reads the rate the loop noted at its last poll, not the
        # settings (which the broker computes from its metadata image, the loop's).
        self._max_io_rate = self._settings().io_max_bytes_per_second
        self._throttle = IoThrottle(lambda: self._max_io_rate, monotonic=monotonic)
        self._states: dict[tuple[str, int], _LogState] = {}
        self._running: dict[tuple[str, int], _Cleaning] = {}
        self._next_search_ms = 0
        self._stopped = False

    @property
    def settings(self) -> CleanerSettings:
        return self._settings()

    # -- driving -------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> None:
        """Apply finished cleanings, then start one on each free thread for a log that needs it (returns
        immediately). A search that finds nothing is not repeated for `log.cleaner.backoff.ms`."""
        for key, running in list(self._running.items()):
            assert running.future is not None
            if running.future.done():
                del self._running[key]
                self._finish(running, running.future)
                self._next_search_ms = 0  # as a Kafka cleaner thread looks again as soon as it is done
        settings = self._settings()
        self._max_io_rate = settings.io_max_bytes_per_second
        if self._stopped or not settings.enabled or now_ms < self._next_search_ms:
            return
        tried: set[tuple[str, int]] = set()
        while len(self._running) < settings.threads:
            chosen = self._dirtiest(now_ms, exclude=self._running.keys() | tried)
            if chosen is None:
                self._next_search_ms = now_ms + settings.backoff_ms
                return
            tried.add((chosen[0].log.topic, chosen[0].log.partition))
            self._start(chosen, now_ms, settings)

    def clean_now(self, partition_log: PartitionLog, now_ms: int, *, force: bool = False) -> CompactionResult | None:
        """Clean `partition_log` in the calling thread (tools and tests); without `force` only if it is due.
        Returns None when there was nothing to do."""
        state = self._state_of(partition_log)
        if (partition_log.topic, partition_log.partition) in self._running:
            return None
        cleanable = self.cleanable_range(partition_log, now_ms)
        if not force and not self._due(state, cleanable, now_ms):
            return None
        settings = self._settings()
        cleaning = self._prepare(state, cleanable, now_ms, settings)
        if cleaning is None:
            return None
        result = compact(cleaning.job, self._cancelled, self._io(settings))
        self._apply(cleaning, result)
        return result

    def stop(self) -> None:
        """Cancel the running cleanings, wait for their threads and discard what they wrote. Idempotent."""
        self._stopped = True
        self._cancelled.set()
        running, self._running = list(self._running.values()), {}
        for cleaning in running:
            if cleaning.future is not None and not cleaning.future.cancel():
                wait_for([cleaning.future])
                if cleaning.future.exception() is None:
                    _discard(cleaning.job.directory, cleaning.future.result())
        for executor, _ in self._executors:
            executor.shutdown(wait=True)

    @property
    def busy(self) -> bool:
        return bool(self._running)

    # -- choosing ------------------------------------------------------------------------------------

    def cleanable_range(self, partition_log: PartitionLog, now_ms: int) -> CleanableRange:
        """The clean and dirty parts of a log as the next cleaning would see them."""
        config = partition_log.config
        segments = partition_log.segments
        first_dirty = self._state_of(partition_log).first_dirty_offset
        if not partition_log.log_start_offset <= first_dirty <= partition_log.log_end_offset:
            first_dirty = partition_log.log_start_offset  # behind retention or a truncation: start over
        young = now_ms - config.min_compaction_lag_ms
        overdue = now_ms - config.max_compaction_lag_ms
        clean = dirty = 0
        uncleanable = segments[-1].base_offset
        lag_exceeded = False
        stable = partition_log.last_stable_offset
        for segment, end in zip(segments, [s.base_offset for s in segments[1:]], strict=False):
            if end <= first_dirty:
                clean += segment.size_bytes
                continue
            if end > stable or (
                    config.min_compaction_lag_ms > 0 and segment.largest_timestamp > young):
                uncleanable = segment.base_offset
                break
            dirty += segment.size_bytes
            lag_exceeded = lag_exceeded or segment.rolling_base_ms < overdue
        return CleanableRange(first_dirty, uncleanable, clean, dirty, lag_exceeded)

    def _dirtiest(self, now_ms: int, exclude: Set[tuple[str, int]]) -> tuple[_LogState, CleanableRange] | None:
        logs = self._logs()
        for key in [k for k in self._states if k not in logs]:
            del self._states[key]
        best: tuple[_LogState, CleanableRange] | None = None
        for key, partition_log in logs.items():
            if not partition_log.config.compact or partition_log.log_end_offset == partition_log.log_start_offset:
                continue  # an empty log has nothing to clean: not loading it keeps a deferred one deferred
            if key in exclude:
                continue
            state = self._state_of(partition_log)
            if state.failed:
                continue
            cleanable = self.cleanable_range(partition_log, now_ms)
            if self._due(state, cleanable, now_ms) and (best is None or cleanable.dirty_ratio > best[1].dirty_ratio):
                best = state, cleanable
        return best

    @staticmethod
    def _due(state: _LogState, cleanable: CleanableRange, now_ms: int) -> bool:
        if cleanable.dirty_bytes > 0 and (
                cleanable.dirty_ratio >= state.log.config.min_cleanable_dirty_ratio or cleanable.max_lag_exceeded):
            return True
        return 0 <= state.delete_horizon_ms <= now_ms

    def _state_of(self, partition_log: PartitionLog) -> _LogState:
        key = (partition_log.topic, partition_log.partition)
        state = self._states.get(key)
        if state is None or state.log is not partition_log:
            first_dirty, horizon = _read_checkpoint(partition_log.directory)
            state = _LogState(partition_log, first_dirty, horizon)
            self._states[key] = state
        return state

    # -- preparing and running -----------------------------------------------------------------------

    def _start(self, chosen: tuple[_LogState, CleanableRange], now_ms: int, settings: CleanerSettings) -> None:
        state = chosen[0]
        cleaning = self._prepare(*chosen, now_ms, settings)
        if cleaning is None:
            state.delete_horizon_ms = -1  # nothing below the uncleanable part: no tombstone to expire
            return
        cleaning.future = self._executor(settings.threads).submit(compact, cleaning.job, self._cancelled,
                                                                  self._io(settings))
        self._running[(state.log.topic, state.log.partition)] = cleaning

    def _executor(self, threads: int) -> Executor:
        """An executor with at least `threads` threads: a new one when the setting grew (the old one's
        cleanings finish on their threads, which then end)."""
        if self._given_executor is not None:
            return self._given_executor
        if not self._executors or self._executors[-1][1] < threads:
            if self._executors:
                self._executors[-1][0].shutdown(wait=False)
            self._executors.append((ThreadPoolExecutor(max_workers=threads, thread_name_prefix="log-cleaner"),
                                    threads))
        return self._executors[-1][0]

    def _io(self, settings: CleanerSettings) -> CleanerIo:
        # Always throttled, so that a limit set while a cleaning runs applies to it (without one, the check is
        # a lock and a sum per read).
        return CleanerIo(settings.read_chunk_bytes, self._throttle)

    def _prepare(self, state: _LogState, cleanable: CleanableRange, now_ms: int,
                 settings: CleanerSettings) -> _Cleaning | None:
        partition_log = state.log
        config = partition_log.config
        all_segments = partition_log.segments
        segments = tuple(s for s in all_segments[:-1] if s.base_offset < cleanable.first_uncleanable_offset)
        if not segments:
            return None
        snapshots = tuple(
            SegmentSnapshot(s.base_offset, all_segments[i + 1].base_offset, s.size_bytes, _file_id(s.fd))
            for i, s in enumerate(segments)
        )
        producers = {pid: entry.last_data_offset for pid, entry in partition_log.producer_state.producers.items()}
        aborted: dict[int, list[tuple[int, int]]] = {}
        for entry in partition_log.aborted_transaction_entries(segments[0].base_offset,
                                                               cleanable.first_uncleanable_offset):
            aborted.setdefault(entry.producer_id, []).append((entry.first_offset, entry.last_offset))
        job = CompactionJob(
            partition_log.directory, snapshots, cleanable.first_dirty_offset, cleanable.first_uncleanable_offset,
            now_ms, config.delete_retention_ms, producers, config.segment_bytes, config.index_interval_bytes,
            config.segment_index_bytes, settings.map_memory_bytes,
            {pid: tuple(ranges) for pid, ranges in aborted.items()},
            tuple(tuple(s.txn_index.entries) for s in segments), settings.dedupe_load_factor,
        )
        return _Cleaning(state, segments, job)

    def _finish(self, cleaning: _Cleaning, future: Future[CompactionResult]) -> None:
        name = os.path.basename(cleaning.job.directory)
        try:
            result = future.result()
        except CompactionCancelled as e:
            log.info("cleaning of %s abandoned: %s", name, e)
            return
        except Exception as e:
            if not self._is_current(cleaning.state.log, cleaning.job):
                log.info("cleaning of %s abandoned: the partition was deleted or moved (%s)", name, e)
                return
            # Whatever went wrong (a bug, a corrupt segment), it would go wrong again: stop trying this log.
            log.exception("cleaning of %s failed; it will not be cleaned again until restart", name)
            cleaning.state.failed = True
            return
        self._apply(cleaning, result)

    # -- applying ------------------------------------------------------------------------------------

    def _apply(self, cleaning: _Cleaning, result: CompactionResult) -> None:
        """The short step on the loop thread: swap in every group whose segments are still as snapshotted."""
        state, job = cleaning.state, cleaning.job
        partition_log = state.log
        if not self._is_current(partition_log, job):
            _discard(job.directory, result)
            return
        swapped = 0
        for i, group in enumerate(result.groups):
            old = cleaning.segments[group.first : group.first + group.count]
            if not _intact(partition_log, old, job.segments[group.first : group.first + group.count]):
                remove_cleaned(job.directory, group.base_offset)
                continue
            try:
                if group.last_removed_marker >= 0:
                    # Before the commit point: a crash must not leave a snapshot that reopens a transaction
                    # whose marker is gone (see `compactor`).
                    partition_log.producer_state.delete_snapshots_through(group.last_removed_marker)
                swap_in(job.directory, group.base_offset, [s.base_offset for s in old])
                new = LogSegment.open(job.directory, group.base_offset, partition_log.config.segment_index_bytes,
                                      self._clock.time_ms())
            except OSError:
                log.exception("swapping cleaned segment %d of %s failed; a restart completes it", group.base_offset,
                              os.path.basename(job.directory))
                state.failed = True
                for later in result.groups[i + 1 :]:
                    remove_cleaned(job.directory, later.base_offset)
                return
            partition_log.replace_segments(old, new)
            swapped += 1
        state.first_dirty_offset = result.clean_end_offset
        state.delete_horizon_ms = result.earliest_delete_horizon_ms
        self._write_checkpoint(state)
        log.log(logging.INFO if swapped else logging.DEBUG,
                "cleaned %s up to offset %d: %d segment(s) rewritten, %d records and %d transaction markers removed, "
                "%d bytes read, %d written", os.path.basename(job.directory), result.clean_end_offset, swapped,
                result.records_removed, result.markers_removed, result.bytes_read, result.bytes_written)

    def _is_current(self, partition_log: PartitionLog, job: CompactionJob) -> bool:
        """Still the managed log of its partition, in the directory the job wrote to."""
        current = self._logs().get((partition_log.topic, partition_log.partition))
        return current is partition_log and partition_log.directory == job.directory

    @staticmethod
    def _write_checkpoint(state: _LogState) -> None:
        path = os.path.join(state.log.directory, CHECKPOINT_FILE)
        try:
            write_atomically(path, f"{state.first_dirty_offset} {state.delete_horizon_ms}\n".encode("ascii"))
        except OSError as e:
            # Only efficiency depends on it: without it the next start treats the whole log as dirty.
            log.warning("cannot write %s: %s", path, e)


def _intact(partition_log: PartitionLog, old: tuple[LogSegment, ...], snapshots: tuple[SegmentSnapshot, ...]) -> bool:
    """`old` are still consecutive, non-active segments of the log, with the sizes the job read."""
    segments = partition_log.segments
    first = next((i for i, s in enumerate(segments) if s is old[0]), -1)
    if first < 0 or first + len(old) >= len(segments):
        return False
    return all(segments[first + i] is s and s.size_bytes == snap.size_bytes
               for i, (s, snap) in enumerate(zip(old, snapshots, strict=True)))


def _discard(directory: str, result: CompactionResult) -> None:
    for group in result.groups:
        remove_cleaned(directory, group.base_offset)


def _file_id(fd: int) -> tuple[int, int]:
    stat = os.fstat(fd)
    return stat.st_dev, stat.st_ino


def _read_checkpoint(directory: str) -> tuple[int, int]:
    """(first dirty offset, earliest delete horizon) from the checkpoint; (0, -1) when absent or unreadable."""
    try:
        with open(os.path.join(directory, CHECKPOINT_FILE), encoding="ascii") as f:
            first_dirty, horizon = (int(field) for field in f.read().split())
    except (OSError, ValueError):
        return 0, -1
    return first_dirty, horizon
