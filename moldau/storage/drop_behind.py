"""Early write-back and drop-behind: appended log bytes go to the disk soon after they are written, and may then
leave the page cache.

Early write-back, on by default (`log.writeback.interval.bytes`, 16 MiB): every that many bytes appended to a
partition's active segment start the write-back of those bytes (`sync_file_range`, which does not wait). Left to
itself, the kernel lets dirty pages pile up until its background threshold, then throttles the writer while it
catches up; a log that starts write-back as it goes appended 1.2 times as fast at the median on the benchmark
machines, and keeps every page cached all the same (`docs/benchmarks.md`, early write-back by default). RocksDB's
`bytes_per_sync` does the same for the same reason. -1 (or 0) leaves write-back to the kernel.

Drop-behind, on by default (`log.drop.behind.bytes`, 256 MiB): a log keeps the newest N bytes it wrote in the
page cache, so consumers and followers near its end read from memory, and drops what lies further behind once its
write-back has begun (`posix_fadvise(POSIX_FADV_DONTNEED)`, which leaves pages still being written). "Behind" is
counted from the log's end, across segments: at each write-back step of the active segment the bytes of that
segment more than N behind the end are dropped, and a rolled segment's bytes not dropped yet (`rolled`) go once
enough has been written after them. -1 keeps every page until the kernel needs the memory, as Kafka does.
Drop-behind needs the steps: with early write-back off it steps every `WRITEBACK_STEP_BYTES`.

Why drop: on a host that takes back the memory its guest frees (a balloon with free page reporting, as on the
machines the benchmarks run on), the kernel's copy of each append into the page cache goes into memory the host
must back again, and that copy is most of what an append costs (`docs/benchmarks.md`, produce ingest): a log
that keeps its pages writes at a third or a quarter of the rate of one whose pages are reused. Dropping what is
written back lets the next appends reuse those pages while they are still backed. The cost: a consumer or a
follower reading more than N bytes behind the log's end reads from the disk (sequentially, with the kernel's
read-ahead).

A rolled segment's fsync starts on the same worker at the roll (`sync_later`), whatever the settings: the
periodic pass that makes rolled segments durable (`PartitionLog.flush_if_due`) waits for it rather than making
the event loop wait for the disk, as Kafka flushes a rolled segment on a scheduler thread, not its request
threads. At 200 MB/s into 128 MiB segments, that fsync on the loop paused every client's requests for up to
1.5 s (`docs/benchmarks.md`, rolled segments' fsync off the event loop). The same ticket fsyncs the segment's
indexes, and the pass counts the segment durable once it is done (durability is what it was: the recovery point
still moves only past fsynced files); a failure of the worker's fsync, which the kernel reports to one caller
only, is handed to the pass. The producer snapshot taken at the roll is fsynced by the same worker just before
the segment (Kafka's KAFKA-9693): written with an fsync on the loop, it paused every client for 5-11 ms at each
roll, longer with the disk busy. The pass then writes the log's offset checkpoints on the same worker too
(`call_later`; `checkpoint_writer`).

All these calls run on one worker thread per process, not on the event loop: starting write-back makes the kernel
allocate the file system's blocks and build the I/O in the caller's context, and dropping pages frees them there
too, together a fifth of the event loop's time in 1 MiB appends (`docs/benchmarks.md`, drop-behind on a worker
thread). Both release the GIL, so on a host with a second core that work runs beside the loop. The loop hands
the worker a duplicate of the segment's descriptor, so a segment closed (rolled, deleted) meanwhile is never
confused with a file that reused its number. If the worker falls `MAX_PENDING_STEPS` behind (a device that makes
`sync_file_range` wait), steps are skipped: the next step covers their bytes.

`sync_file_range` is called through ctypes: the standard library has `posix_fadvise` but not it. Where either is
missing (not Linux) or fails (a file system without it), both switch themselves off with one warning; appends are
never affected.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# The page cache holds file data in folios of up to a huge page (2 MiB with 4 KiB pages), and drops a folio only
# when a range covers all of it: a drop that ends inside one is repeated from this far back.
_LARGEST_FOLIO_BYTES = 512 * _PAGE_BYTES
_SYNC_FILE_RANGE_WRITE = 2  # start write-back of the range's dirty pages, without waiting
_SYNC_FILE_RANGE_SETTLE = 1 | 2 | 4  # wait for write-back under way, start the rest, wait for it
# Steps handed to the worker and not yet done, beyond which new steps are skipped rather than queued.
MAX_PENDING_STEPS = 64
# Rolled segments a log keeps cached bytes of; with segments much smaller than `log.drop.behind.bytes`, older ones
# are dropped early rather than held (a tail holds its segment's objects until it goes).
MAX_ROLLED_TAILS = 16

SyncFileRange = Callable[[int, int, int, int], int]


def _load_sync_file_range() -> SyncFileRange | None:
    if not sys.platform.startswith("linux") or not hasattr(os, "posix_fadvise"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _load_sync_file_range()


class SyncTicket:
    """A rolled segment's fsyncs handed to the worker: `done` once they ran, with `error` if one failed."""

    __slots__ = ("done", "error", "queued_ms")

    def __init__(self, queued_ms: int) -> None:
        self.queued_ms = queued_ms
        self.done = False  # set by the worker thread; a bool's assignment is atomic under the GIL
        self.error: OSError | None = None


@dataclass(frozen=True, slots=True)
class _Sync:
    """fsyncs for the worker, in order."""

    fds: tuple[int, ...]  # duplicates the worker closes
    ticket: SyncTicket


@dataclass(frozen=True, slots=True)
class _Call:
    """A function for the worker to run, in order with the other steps."""

    fn: Callable[[], None]


@dataclass(frozen=True, slots=True)
class _Step:
    """One step for the worker: start write-back of [write_from, write_to), drop [drop_from, drop_to)."""

    fd: int  # a duplicate the worker closes
    write_from: int
    write_to: int
    drop_from: int
    drop_to: int


class _Worker:
    """The one thread per process that makes drop-behind's system calls."""

    def __init__(self) -> None:
        self._steps: queue.SimpleQueue[_Step | _Sync | _Call | threading.Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.failed = False  # a call failed: drop-behind is off in this process

    def submit(self, fd: int, write_from: int, write_to: int, drop_from: int, drop_to: int) -> bool:
        """Hand one step to the worker; False if it is too far behind (the caller keeps the step's bytes)."""
        if self._steps.qsize() >= MAX_PENDING_STEPS:
            return False
        self._ensure_started()
        self._steps.put(_Step(os.dup(fd), write_from, write_to, drop_from, drop_to))
        return True

    def submit_sync(self, fds: Sequence[int], now_ms: int) -> SyncTicket | None:
        """Hand fsyncs of `fds` to the worker, done in that order; None if it is too far behind (the caller
        fsyncs itself). Raises OSError when no descriptor is left to duplicate them."""
        if self._steps.qsize() >= MAX_PENDING_STEPS:
            return None
        self._ensure_started()
        duplicates: list[int] = []
        try:
            for fd in fds:
                duplicates.append(os.dup(fd))
        except OSError:
            for fd in duplicates:
                os.close(fd)
            raise
        ticket = SyncTicket(now_ms)
        self._steps.put(_Sync(tuple(duplicates), ticket))
        return ticket

    def submit_call(self, fn: Callable[[], None]) -> bool:
        """Hand `fn` to the worker, run after the steps handed over before; False if it is too far behind (the
        caller runs it itself)."""
        if self._steps.qsize() >= MAX_PENDING_STEPS:
            return False
        self._ensure_started()
        self._steps.put(_Call(fn))
        return True

    def drain(self, timeout: float = 10.0) -> bool:
        """Wait until every step handed over before now is done (for tests)."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._steps.put(done)
        return done.wait(timeout)

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name="moldau-drop-behind", daemon=True)
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        while True:
            step = self._steps.get()
            if isinstance(step, threading.Event):
                step.set()
                continue
            if isinstance(step, _Sync):
                _run_sync(step)
                continue
            if isinstance(step, _Call):
                try:
                    step.fn()
                except Exception:  # the worker must outlive any one call; the callable reports its own errors
                    log.exception("storage worker call failed")
                continue
            try:
                if not self.failed:
                    _run_step(step)
            except OSError as exc:
                self.failed = True
                log.warning("cannot start the write-back of appended log bytes or drop them from the page cache "
                            "here (%s): log.writeback.interval.bytes and log.drop.behind.bytes are off in this "
                            "process", exc)
            finally:
                with contextlib.suppress(OSError):
                    os.close(step.fd)


def _run_sync(step: _Sync) -> None:
    try:
        for fd in step.fds:
            os.fsync(fd)
    except OSError as exc:
        step.ticket.error = exc
    finally:
        for fd in step.fds:
            with contextlib.suppress(OSError):  # the worker must outlive any one call
                os.close(fd)
        step.ticket.done = True


def _run_step(step: _Step) -> None:
    if step.write_to > step.write_from:
        _call_sync_file_range(step.fd, step.write_from, step.write_to - step.write_from, _SYNC_FILE_RANGE_WRITE)
    elif step.drop_to > step.drop_from:
        # A rolled segment's bytes (`DropBehind.rolled`): written back by its fsync on this thread before, unless
        # that was skipped (a worker behind, the pass fsyncing instead). The kernel keeps dirty pages when told
        # to drop them, so what is not written yet is written now, on this thread, and waited for.
        _call_sync_file_range(step.fd, step.drop_from, step.drop_to - step.drop_from, _SYNC_FILE_RANGE_SETTLE)
    if step.drop_to > step.drop_from:
        os.posix_fadvise(step.fd, step.drop_from, step.drop_to - step.drop_from, os.POSIX_FADV_DONTNEED)


def _call_sync_file_range(fd: int, offset: int, length: int, flags: int) -> None:
    assert _sync_file_range is not None
    if _sync_file_range(fd, offset, length, flags) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


_worker = _Worker()


def available() -> bool:
    """Whether this platform can drop written bytes from the page cache."""
    return _sync_file_range is not None


def sync_later(fds: Sequence[int], now_ms: int) -> SyncTicket | None:
    """Start fsyncs of `fds` (a rolled segment's producer snapshot, then the segment) on the worker thread, in
    that order; None when the worker is too far behind, or no descriptor is left to hand it, and the caller's own
    fsyncs do it all."""
    try:
        return _worker.submit_sync(fds, now_ms)
    except OSError:
        return None


def call_later(fn: Callable[[], None]) -> bool:
    """Run `fn` on the worker thread after what was handed to it before; False when the worker is too far behind,
    and the caller runs it itself."""
    return _worker.submit_call(fn)


def drain(timeout: float = 10.0) -> bool:
    """Wait until the worker has done every step handed to it so far; False on timeout."""
    return _worker.drain(timeout)


class RolledSegment(Protocol):
    """What drop-behind needs of a rolled segment (a `LogSegment`)."""

    @property
    def fd(self) -> int: ...

    @property
    def size_bytes(self) -> int: ...

    @property
    def retired(self) -> bool:
        """Closed, deleted or replaced: its descriptor may no longer be its own."""
        ...


@dataclass(slots=True)
class _RolledTail:
    """The bytes [start, end) of a rolled segment that may still be cached; `end_position` is where they end in
    the log's running count of bytes written (`DropBehind._position`). [start, dropped_to) was advised already."""

    segment: RolledSegment
    start: int
    end: int
    end_position: int
    dropped_to: int


class DropBehind:
    """The early write-back and drop-behind state of one partition log: how far its active segment's write-back
    was started and its cache dropped, and the rolled segments' bytes still cached. A new active segment (a roll)
    starts over."""

    __slots__ = ("_dropped", "_position", "_segment_fd", "_started", "_tails")

    def __init__(self) -> None:
        self._segment_fd = -1
        self._started = 0  # write-back was started for the bytes before this position
        self._dropped = 0  # the cache was dropped before this position
        # Bytes of the segments rolled before the active one, as counted here: where the active segment starts
        # in a running count of what this log wrote (only distances in it matter).
        self._position = 0
        self._tails: deque[_RolledTail] = deque()

    def after_append(self, fd: int, size_bytes: int, step_bytes: int, keep_bytes: int) -> None:
        """Called after each append to the active segment open as `fd`, now `size_bytes` long: start write-back
        every `step_bytes`, and drop what lies more than `keep_bytes` behind the log's end (-1: drop nothing)."""
        if _sync_file_range is None or _worker.failed:
            return
        if fd != self._segment_fd:
            self._segment_fd, self._started, self._dropped = fd, 0, 0
        # A truncation (a follower cutting a diverged suffix) may have moved the end back.
        started = min(self._started, size_bytes)
        dropped = min(self._dropped, started)
        if size_bytes - started < step_bytes:
            self._started, self._dropped = started, dropped
            return
        drop_from = drop_to = 0
        if keep_bytes >= 0:
            drop_to = min(started, size_bytes - keep_bytes) // _PAGE_BYTES * _PAGE_BYTES
            # The last step's range is advised once more: pages still being written then were left in the cache.
            drop_from = max(0, dropped - step_bytes)
        try:
            handed = _worker.submit(fd, started, size_bytes, drop_from, drop_to)
        except OSError:  # no descriptor left to duplicate: skip this step, appends are never affected
            handed = False
        if handed:
            self._started = size_bytes
            self._dropped = max(drop_to, dropped)
        else:
            self._started, self._dropped = started, dropped
        if self._tails:
            self._drop_tails(self._position + size_bytes, keep_bytes)

    def rolled(self, segment: RolledSegment, step_bytes: int, keep_bytes: int) -> None:
        """`segment`, the active segment until now, was rolled (sealed, its fsync started). With drop-behind on,
        its bytes not dropped yet stay cached until `keep_bytes` more have been written after them."""
        size_bytes = segment.size_bytes
        if keep_bytes >= 0 and _sync_file_range is not None and not _worker.failed:
            dropped = min(self._dropped, size_bytes) if segment.fd == self._segment_fd else 0
            # As in a step, the last range dropped is advised again: some of its pages were still being written.
            start = max(0, dropped - step_bytes)
            if start < size_bytes:
                self._tails.append(_RolledTail(segment, start, size_bytes, self._position + size_bytes, start))
        else:
            self._tails.clear()
        self._position += size_bytes
        self._segment_fd, self._started, self._dropped = -1, 0, 0
        if self._tails:
            self._drop_tails(self._position, keep_bytes, MAX_ROLLED_TAILS)

    def forget(self) -> None:
        """The log is closed or deleted: let go of its rolled segments."""
        self._tails.clear()

    def _drop_tails(self, end_position: int, keep_bytes: int, at_most: int | None = None) -> None:
        """Drop the rolled segments' bytes that now lie more than `keep_bytes` behind `end_position` (the log's
        end), oldest first; beyond `at_most` tails, the oldest go whole."""
        tails = self._tails
        while tails:
            tail = tails[0]
            if tail.segment.retired:
                tails.popleft()
                continue
            keep_in_tail = keep_bytes - (end_position - tail.end_position)
            whole = keep_in_tail <= 0 or (at_most is not None and len(tails) > at_most)
            # The kernel drops only the folios a range covers whole, and a file's last page only with a range
            # past the end of the file.
            drop_to = _round_up(tail.end, _LARGEST_FOLIO_BYTES) if whole else \
                (tail.end - keep_in_tail) // _PAGE_BYTES * _PAGE_BYTES
            if not whole and drop_to <= tail.dropped_to:
                return  # the newer tails are closer to the end still
            try:
                handed = _worker.submit(tail.segment.fd, 0, 0, tail.start, drop_to)
            except OSError:
                handed = False
            if not handed:
                return  # the worker is behind: the next step or roll tries again
            if whole:
                tails.popleft()
                continue
            # A large folio across `drop_to` stayed: the next drop covers it again.
            tail.start, tail.dropped_to = max(tail.start, drop_to - _LARGEST_FOLIO_BYTES), drop_to
            return


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit
