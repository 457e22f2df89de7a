"""Drop-behind: appended log bytes leave the page cache soon after they are written back.

Off by default (`log.drop.behind.bytes` = -1): a log keeps what it wrote in the page cache, as Kafka does, so
consumers that fall behind read from memory. With `log.drop.behind.bytes` = N >= 0, every
`WRITEBACK_STEP_BYTES` appended to a partition's active segment start the write-back of those bytes
(`sync_file_range`, which does not wait), and the bytes more than N behind the segment's end whose write-back
began at an earlier step are dropped from the page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`, which leaves
pages still being written).

Why: on a host that takes back the memory its guest frees (a balloon with free page reporting, as on the
machines the benchmarks run on), the kernel's copy of each append into the page cache goes into memory the host
must back again, and that copy is most of what an append costs (`docs/benchmarks.md`, produce ingest): a log
that keeps its pages writes at a third or a quarter of the rate of one whose pages are reused. Dropping what is
written back lets the next appends reuse those pages while they are still backed. The cost: a consumer or a
follower reading more than N bytes behind a segment's end reads from the disk.

`sync_file_range` is called through ctypes: the standard library has `posix_fadvise` but not it. Where either is
missing (not Linux) or fails (a file system without it), drop-behind switches itself off with one warning;
appends are never affected.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable

log = logging.getLogger(__name__)

# Write-back is started, and the cache dropped, once per this many bytes appended to a segment: a few system
# calls per step rather than per append.
WRITEBACK_STEP_BYTES = 4 * 1024 * 1024
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_SYNC_FILE_RANGE_WRITE = 2  # start write-back of the range's dirty pages, without waiting

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
    return function  # type: ignore[no-any-return]


_sync_file_range = _load_sync_file_range()
_warned = False


def available() -> bool:
    """Whether this platform can drop written bytes from the page cache."""
    return _sync_file_range is not None


class DropBehind:
    """The drop-behind state of one partition log: how far its active segment's write-back was started and its
    cache dropped. A new active segment (a roll) starts over."""

    __slots__ = ("_dropped", "_enabled", "_segment_fd", "_started")

    def __init__(self) -> None:
        self._segment_fd = -1
        self._started = 0  # write-back was started for the bytes before this position
        self._dropped = 0  # the cache was dropped before this position
        self._enabled = _sync_file_range is not None

    def after_append(self, fd: int, size_bytes: int, keep_bytes: int) -> None:
        """Called after each append to the active segment open as `fd`, now `size_bytes` long."""
        if not self._enabled:
            return
        if fd != self._segment_fd:
            self._segment_fd, self._started, self._dropped = fd, 0, 0
        # A truncation (a follower cutting a diverged suffix) may have moved the end back.
        started = min(self._started, size_bytes)
        dropped = min(self._dropped, started)
        if size_bytes - started < WRITEBACK_STEP_BYTES:
            self._started, self._dropped = started, dropped
            return
        drop_to = min(started, size_bytes - keep_bytes) // _PAGE_BYTES * _PAGE_BYTES
        # The last step's range is advised once more: pages still being written then were left in the cache.
        drop_from = max(0, dropped - WRITEBACK_STEP_BYTES)
        try:
            assert _sync_file_range is not None
            if _sync_file_range(fd, started, size_bytes - started, _SYNC_FILE_RANGE_WRITE) != 0:
                error = ctypes.get_errno()
                raise OSError(error, os.strerror(error))
            if drop_to > drop_from:
                os.posix_fadvise(fd, drop_from, drop_to - drop_from, os.POSIX_FADV_DONTNEED)
        except OSError as exc:
            self._switch_off(exc)
            return
        self._started = size_bytes
        self._dropped = max(drop_to, dropped)

    def _switch_off(self, error: OSError) -> None:
        global _warned
        self._enabled = False
        if not _warned:
            _warned = True
            log.warning("log.drop.behind.bytes: cannot drop written log bytes from the page cache here (%s); "
                        "appended bytes stay cached", error)
