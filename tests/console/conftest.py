"""The console's tests share one broker (with its schema registry and console) and one headless Chromium for the
whole session: both are slow to start, and tests only need their own topics and groups."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.browser import Browser, chromium_available


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
    assert not errors, f"the page logged errors: {errors}"
