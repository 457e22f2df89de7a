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

Only one cleaning runs at a time. `stop()` cancels it (the thread checks between batches), waits for the
thread and discards unapplied files. A cleaning that fails with an unexpected error marks its log
uncleanable until restart, so one bad log does not take the cleaner down.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import dataclass

from moldau.clock import Clock
from moldau.storage.compactor import (
    CompactionCancelled,
    CompactionJob,
    CompactionResult,
    SegmentSnapshot,
    compact,
)
from moldau.storage.log import PartitionLog
from moldau.storage.producer_state import write_atomically
from moldau.storage.segment import LogSegment
from moldau.storage.segment_swap import remove_cleaned, swap_in

__all__ = ["CHECKPOINT_FILE", "DEFAULT_DEDUPE_BUFFER_BYTES", "CleanableRange", "LogCleaner"]

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
DEFAULT_DEDUPE_BUFFER_BYTES = 128 * 1024 * 1024

LogsProvider = Callable[[], Mapping[tuple[str, int], PartitionLog]]


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

    def __init__(self, clock: Clock, logs: LogsProvider, *,
                 dedupe_buffer_bytes: int = DEFAULT_DEDUPE_BUFFER_BYTES, executor: Executor | None = None) -> None:
        self.dedupe_buffer_bytes = dedupe_buffer_bytes
        self._clock = clock
        self._logs = logs
        self._executor = executor
        self._owns_executor = executor is None
        self._cancelled = threading.Event()
        self._states: dict[tuple[str, int], _LogState] = {}
        self._running: _Cleaning | None = None
        self._stopped = False

    # -- driving -------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> None:
        """Apply a finished cleaning, then start the next one if a log needs it (returns immediately)."""
        running = self._running
        if running is not None:
            assert running.future is not None
            if not running.future.done():
                return
            self._running = None
            self._finish(running, running.future)
        if self._stopped:
            return
        chosen = self._dirtiest(now_ms)
        if chosen is not None:
            self._start(chosen, now_ms)

    def clean_now(self, partition_log: PartitionLog, now_ms: int, *, force: bool = False) -> CompactionResult | None:
        """Clean `partition_log` in the calling thread (tools and tests); without `force` only if it is due.
        Returns None when there was nothing to do."""
        state = self._state_of(partition_log)
        if self._running is not None and self._running.state.log is partition_log:
            return None
        cleanable = self.cleanable_range(partition_log, now_ms)
        if not force and not self._due(state, cleanable, now_ms):
            return None
        cleaning = self._prepare(state, cleanable, now_ms)
        if cleaning is None:
            return None
        result = compact(cleaning.job, self._cancelled)
        self._apply(cleaning, result)
        return result

    def stop(self) -> None:
        """Cancel a running cleaning, wait for the thread and discard what it wrote. Idempotent."""
        self._stopped = True
        self._cancelled.set()
        running, self._running = self._running, None
        if running is not None and running.future is not None and not running.future.cancel():
            wait_for([running.future])
            if running.future.exception() is None:
                _discard(running.job.directory, running.future.result())
        if self._owns_executor and self._executor is not None:
            self._executor.shutdown(wait=True)

    @property
    def busy(self) -> bool:
        return self._running is not None

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

    def _dirtiest(self, now_ms: int) -> tuple[_LogState, CleanableRange] | None:
        logs = self._logs()
        for key in [k for k in self._states if k not in logs]:
            del self._states[key]
        best: tuple[_LogState, CleanableRange] | None = None
        for partition_log in logs.values():
            if not partition_log.config.compact or partition_log.log_end_offset == partition_log.log_start_offset:
                continue  # an empty log has nothing to clean: not loading it keeps a deferred one deferred
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

    def _start(self, chosen: tuple[_LogState, CleanableRange], now_ms: int) -> None:
        cleaning = self._prepare(*chosen, now_ms)
        if cleaning is None:
            chosen[0].delete_horizon_ms = -1  # nothing below the uncleanable part: no tombstone to expire
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-cleaner")
        cleaning.future = self._executor.submit(compact, cleaning.job, self._cancelled)
        self._running = cleaning

    def _prepare(self, state: _LogState, cleanable: CleanableRange, now_ms: int) -> _Cleaning | None:
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
            config.segment_index_bytes, self.dedupe_buffer_bytes,
            {pid: tuple(ranges) for pid, ranges in aborted.items()},
            tuple(tuple(s.txn_index.entries) for s in segments),
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
