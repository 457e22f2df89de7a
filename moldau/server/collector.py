"""Python's cyclic garbage collector against the event loop: every collection pauses the whole broker.

A collection of the oldest generation traverses every object the process tracks. After start-up that is mostly
what start-up made and keeps for good (modules, kio's schema classes, configuration, the metadata image): in a
node of a 3-node cluster such a collection took 107 to 290 ms on a loaded 2-core machine (timed with
`gc.callbacks`), with no request served meanwhile: one inside a latency run is a p99 of over 100 ms.
`freeze_startup_objects` collects once, then moves what survived into the permanent generation (`gc.freeze`),
which later collections skip: they traverse only what was made since. Frozen objects are still freed by reference
counting; only a reference cycle among them would be kept.

`paused` holds collections off while one step makes many objects that stay (the partitions of a large CreateTopics):
otherwise the collections of the oldest generation that the new objects trigger mid-way traverse them again each
time, where one collection afterwards traverses them once.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Iterator

log = logging.getLogger(__name__)


def freeze_startup_objects() -> None:
    """Collect, then leave every surviving object out of all later collections (call once start-up is done)."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.info("garbage collector: %d start-up objects frozen (%.0f ms)", gc.get_freeze_count(),
             (time.perf_counter() - started) * 1000)


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No collection inside the block (collections already held off stay so after it)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
