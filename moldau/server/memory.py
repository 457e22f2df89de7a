"""Process resources for many connections: freed memory back to the system (glibc), and the open-file limit.

glibc's malloc serves blocks below its mmap threshold from the heap, and raises that threshold (up to 32 MiB)
whenever a large mmapped block is freed, so after the first large request, frame buffers come from the heap;
freed heap memory stays with the process unless it is at the very top. Measured with the broker: a 4 MiB
request, then 300 connections holding 300 KB partial frames (RSS 51 -> 199 MB), all closed: RSS stays at
165 MB; with malloc_trim(0) it is back to 51 MB. Fixing the mmap threshold at 64 KiB (mallopt
M_MMAP_THRESHOLD) returns the memory too, but then every large frame buffer is a fresh mmap whose pages
fault in one by one: allocating and freeing 1 MiB buffers became 30 times slower (0.5 ms each), a cost on
every produce request. So the threshold is left to glibc, and `Trimmer` calls malloc_trim(0) after many
connections closed or many buffered bytes were freed, which costs a few milliseconds at most, seldom.
No-ops where glibc is absent.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import resource

log = logging.getLogger(__name__)


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def trim() -> None:
    """Give free heap memory back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


class Trimmer:
    """Calls `trim` once many connections have closed or many buffered bytes were freed since the last time."""

    def __init__(self, closed_connections: int = 100, freed_bytes: int = 64 * 1024 * 1024) -> None:
        self._closed_connections = closed_connections
        self._freed_bytes = freed_bytes
        self._peak_connections = 0

    def observe(self, connections: int, buffered_peak: int, buffered_now: int) -> bool:
        """Note the connections open now and the bytes buffered at most since the last call and now; trims
        (and returns True) when enough was freed."""
        self._peak_connections = max(self._peak_connections, connections)
        if (self._peak_connections - connections < self._closed_connections
                and buffered_peak - buffered_now < self._freed_bytes):
            return False
        trim()
        self._peak_connections = connections
        return True


def raise_open_file_limit() -> None:
    """Lift the soft limit on open files to the hard one: every connection is a file descriptor, and the
    default soft limit (often 1024) would refuse clients long before memory is a concern."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
