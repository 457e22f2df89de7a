"""The console's tests share one broker (with its schema registry and console) and one headless Chromium for the
whole session: both are slow to start, and tests only need their own topics and groups. The tests of a secured
console share a second broker, started on first use: its console's listener wants SASL, it has an authorizer and
no schema registry, and its users (tests/support/console_auth.py) each serve one test module's ACLs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.net.ports import free_port
from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser, chromium_available
from tests.support.console_auth import SecuredBroker, start_secured_broker


@pytest.fixture(scope="session")
def console_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("console-broker"))
    proc.start()
    yield proc
    try:
        code = proc.stop()  # the console's librdkafka clients must not keep the broker from stopping cleanly
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{proc.log_tail()}"
    finally:
        proc.cleanup()


@pytest.fixture(scope="session")
def connect_port() -> int:
    """Where the secured console expects a Kafka Connect worker (console.connect.urls)."""
    return free_port()


@pytest.fixture(scope="session")
def secured_broker(tmp_path_factory: pytest.TempPathFactory, connect_port: int) -> Iterator[SecuredBroker]:
    broker = start_secured_broker(tmp_path_factory.mktemp("console-secured"),
                                  {"console.connect.urls": f"http://127.0.0.1:{connect_port}",
                                   "schema.registry.listeners": "",
                                   "delegation.token.secret.key": "console-token-secret"})
    yield broker
    assert broker.stop() == 0, broker.proc.log_tail()


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    if not chromium_available():
        pytest.fail("chromium and chromium-driver are needed for the console tests (./dev test installs them)")
    browser = Browser()
    yield browser
    browser.close()


@pytest.fixture
def browser(chromium: Browser, console_broker: BrokerProcess) -> Iterator[Browser]:
    """The session's browser pointed at the console broker, its console log drained before and checked after."""
    chromium.base_url = console_broker.console_url
    chromium.driver.get("about:blank")  # no page of another test (or broker) left polling in the background
    chromium.console_errors()
    yield chromium
    errors = chromium.console_errors()
    # Leave no page polling (htmx, charts) for the rest of the session: the browser and its broker live on until
    # the session ends, and other tests share the two cores with them.
    chromium.driver.get("about:blank")
    assert not errors, f"the page logged errors: {errors}"
