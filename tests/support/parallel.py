"""Running the suite on several pytest-xdist workers (`./dev test` runs it on two, one per core here).

Most of the suite waits (on brokers, clusters, timeouts), so a second worker fills an idle core. Four things make
that safe, each wired up in tests/conftest.py:

- **Ports.** Every worker picks free ports from its own slice of the range (`MOLDAU_PORT_SLICE`, see
  `moldau.net.ports`), inherited by the brokers, clusters and Connect workers it starts, so two workers never
  pick the same port between probing it and binding it.
- **Shared fixtures.** Files are handed out whole (a module's fixtures are set up once), and the files that use an
  expensive session fixture of their own (Spark's JVM) go to one worker together (`TierScheduling`).
- **Order.** The slowest tiers are handed out first and the unit tests last, so that no long file starts when the
  other worker has nothing left to do.
- **Time bounds.** A test that measures a rate or asserts how long something took is marked
  `@pytest.mark.exclusive`: it runs while no other test runs (`MachineLock`), as it did in a serial run.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

from moldau.net.ports import PORT_SLICE_ENV

# Handed out in this order (a stable sort, so files keep their order within a tier): the end-to-end tiers, whose
# files take one to two minutes each, before the many short unit and simulation files that fill the end.
TIER_ORDER = ("spark", "cluster", "fault", "connect_pg", "compat", "console", "hostile", "sim", "unit")
# Files under these directories share a session fixture too costly to set up on every worker.
ONE_WORKER_TIERS = ("tests/spark/",)
LOCK_DIR_KEY = "moldau_lock_dir"


def tier_rank(item: pytest.Item) -> int:
    parts = Path(item.nodeid.split("::", 1)[0]).parts
    tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return TIER_ORDER.index(tier) if tier in TIER_ORDER else len(TIER_ORDER)


def order_for_workers(items: list[pytest.Item]) -> None:
    items.sort(key=tier_rank)


class TierScheduling(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no type information
    """`--dist loadfile`, with the tiers of `ONE_WORKER_TIERS` as one unit each and the collection's order kept.

    xdist would otherwise hand out the files with the most tests first, which here are quick unit files, leaving
    the few-test, minutes-long end-to-end files for last.
    """

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False

    def _split_scope(self, nodeid: str) -> str:
        return work_unit(nodeid)


def work_unit(nodeid: str) -> str:
    """The test's file, or its tier where that is one of `ONE_WORKER_TIERS`."""
    path = nodeid.split("::", 1)[0]
    return next((tier for tier in ONE_WORKER_TIERS if path.startswith(tier)), path)


def worker_setup(workerinput: dict[str, Any]) -> None:
    """In a worker: its slice of the port range, which the servers it starts inherit."""
    index = int(str(workerinput["workerid"]).removeprefix("gw"))
    os.environ[PORT_SLICE_ENV] = f"{index}/{int(workerinput['workercount'])}"


class MachineLock:
    """A readers-writer lock across the worker processes: every test shares it, an exclusive test holds it alone.

    Two `flock` files: `turnstile`, which a test passes through before taking `machine` (shared or exclusive), and
    which an exclusive test holds while it waits, so that the tests starting meanwhile queue behind it rather
    than keep the machine shared for ever.
    """

    def __init__(self, directory: Path) -> None:
        self.turnstile = directory / "turnstile.lock"
        self.machine = directory / "machine.lock"

    @contextlib.contextmanager
    def held(self, exclusive: bool) -> Iterator[None]:
        with open(self.turnstile, "a") as turnstile, open(self.machine, "a") as machine:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(machine, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            finally:
                fcntl.flock(turnstile, fcntl.LOCK_UN)
            try:
                yield
            finally:
                fcntl.flock(machine, fcntl.LOCK_UN)


def machine_lock(config: pytest.Config) -> MachineLock | None:
    """The run's lock in a worker; None in a serial run, where every test has the machine to itself anyway."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None or LOCK_DIR_KEY not in workerinput:
        return None
    return MachineLock(Path(workerinput[LOCK_DIR_KEY]))


def is_exclusive(item: pytest.Item) -> bool:
    return item.get_closest_marker("exclusive") is not None
