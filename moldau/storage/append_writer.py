"""Writer threads for large appends: one per log directory, so the page-cache copy of a segment write runs beside
the event loop (the GIL is released during `pwritev`) while the loop receives and checks the next requests.

Each thread takes its writes in the order they were handed in, so the appends of one log land in offset order.
The log decides what is written where and when the bytes count as stored (`PartitionLog`, "pipelined appends").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

_writers: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def submit(log_dir: str, write: Callable[[], None]) -> Future[None]:
    """Run `write` on the writer thread of `log_dir`, after every write handed in for it before."""
    key = os.path.normpath(log_dir)
    with _lock:
        writer = _writers.get(key)
        if writer is None:
            writer = _writers[key] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="log-writer")
    return writer.submit(write)
