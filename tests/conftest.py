"""Fixtures shared by every test tier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.postgres import PostgresServer


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
