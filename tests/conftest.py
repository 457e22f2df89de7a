"""Fixtures shared by every test tier."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from tests.support import parallel
from tests.support.broker_process import BrokerProcess
from tests.support.postgres import PostgresServer

LOCK_DIR = pytest.StashKey[Path]()

# Hypothesis fails an example that takes longer than 200 ms, and a test whose inputs take long to generate, by
# default: timing bounds, which a busy machine (two test workers, a slow CI host) breaks without any bug.
# Performance is measured in bench/, not in tests.
settings.register_profile("moldau", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("moldau")


@pytest.fixture
def broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    """A fresh `moldau server` process with its own data dir; stopped (and checked) after the test.

    Per-test broker configs: `@pytest.mark.broker_config({"log.segment.bytes": "1024"})`.
    """
    marker = request.node.get_closest_marker("broker_config")
    overrides = dict(marker.args[0]) if marker else {}
    proc = BrokerProcess(tmp_path, overrides)
    proc.start()
    try:
        yield proc
    except BaseException:
        raise
    finally:
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            print(f"--- broker log ---\n{proc.log_tail()}")
        alive = proc.running
        try:
            if alive:
                code = proc.stop()
                assert code == 0, f"broker exited with {code} on SIGTERM:\n{proc.log_tail()}"
        finally:
            proc.cleanup()


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for the whole run, for tests that only need their own topics (faster)."""
    proc = BrokerProcess(tmp_path_factory.mktemp("shared-broker"))
    proc.start()
    yield proc
    try:
        proc.stop()
    finally:
        proc.cleanup()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole run (`wal_level=logical`); each test makes its own database."""
    server = PostgresServer()
    server.start()
    yield server
    server.stop()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


# Running on several workers (`tests/support/parallel.py` says why each of these is needed).

def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        parallel.worker_setup(workerinput)


def pytest_unconfigure(config: pytest.Config) -> None:
    lock_dir = config.stash.get(LOCK_DIR, None)
    if lock_dir is not None:
        shutil.rmtree(lock_dir, ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """In the controller, before each worker starts: where the workers' `MachineLock` lives."""
    config: pytest.Config = node.config
    if LOCK_DIR not in config.stash:
        config.stash[LOCK_DIR] = Path(tempfile.mkdtemp(prefix="moldau-test-locks-"))
    node.workerinput[parallel.LOCK_DIR_KEY] = str(config.stash[LOCK_DIR])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> parallel.TierScheduling | None:
    return parallel.TierScheduling(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if hasattr(config, "workerinput"):
        parallel.order_for_workers(items)


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: pytest-timeout's clock starts once the lock is held
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    lock = parallel.machine_lock(item.config)
    if lock is None:
        return (yield)
    with lock.held(parallel.is_exclusive(item)):
        return (yield)
