"""Process resources for many connections: freed memory back to the system (glibc), and the open-file limit.

glibc's malloc serves blocks below its mmap threshold from the heap, and raises that threshold whenever a large
mmapped block is freed; freed heap memory stays with the process. After thousands of connections with partial
frames close, RSS would stay at its peak. Two measures, both no-ops where glibc is absent:
- a fixed mmap threshold at the large-frame buffer size (64 KiB): those buffers are then always mmapped and
  go back to the system the moment they are freed (a fixed threshold also stops glibc's dynamic raising);
- `trim()`, glibc's malloc_trim(0), which the broker calls after many connections have closed, for the
  smaller blocks that remain in the heap.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import resource

from moldau.protocol.framing import LARGE_FRAME_BYTES

log = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


_LIBC = _libc()


def tune_allocator() -> None:
    """Fix glibc's mmap threshold at the large-frame buffer size (see the module docstring)."""
    if _LIBC is not None and not _LIBC.mallopt(_M_MMAP_THRESHOLD, LARGE_FRAME_BYTES):
        log.debug("mallopt(M_MMAP_THRESHOLD) was refused")


def trim() -> None:
    """Give free heap memory back to the system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def raise_open_file_limit() -> None:
    """Lift the soft limit on open files to the hard one: every connection is a file descriptor, and the
    default soft limit (often 1024) would refuse clients long before memory is a concern."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
