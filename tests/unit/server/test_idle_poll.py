"""Idle polling keeps the loop polling only while arrivals come closer together than the window, never runs two
polling chains at once, yields the CPU each turn, and stops one window after the last arrival."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytest import approx

from moldau.clock import ManualClock
from moldau.config import BrokerConfig, ConfigError
from moldau.server.idle_poll import IdlePoller, idle_poller

WINDOW_MS = 0.2


class Loop:
    """The ready queue of an event loop: `turn` runs what was ready at its start, as a loop's iteration does."""

    def __init__(self) -> None:
        self.ready: list[Callable[[], None]] = []

    def call_soon(self, callback: Callable[[], None]) -> object:
        self.ready.append(callback)
        return None

    def turn(self) -> None:
        ready, self.ready = self.ready, []
        for callback in ready:
            callback()


class Setup:
    def __init__(self) -> None:
        self.loop = Loop()
        self.clock = ManualClock(0)
        self.yields = 0
        self.poller = IdlePoller(WINDOW_MS, self.loop.call_soon, self.clock.monotonic_ms, self._yield)

    def _yield(self) -> None:
        self.yields += 1

    def turns(self, count: int, step_ms: float) -> None:
        for _ in range(count):
            self.clock.advance(step_ms)
            self.loop.turn()


def test_a_first_arrival_does_not_poll() -> None:
    s = Setup()
    s.poller.activity()
    assert not s.poller.polling and not s.loop.ready


def test_arrivals_sparser_than_the_window_never_poll() -> None:
    s = Setup()
    for _ in range(5):
        s.poller.activity()
        s.clock.advance(WINDOW_MS * 1.5)
        s.loop.turn()
    assert not s.poller.polling and s.yields == 0


def test_close_arrivals_poll_until_a_window_passes_without_one() -> None:
    s = Setup()
    s.poller.activity()
    s.clock.advance(WINDOW_MS / 2)
    s.poller.activity()
    assert s.poller.polling and len(s.loop.ready) == 1
    s.turns(3, WINDOW_MS / 10)  # 0.06 ms after the last arrival: still polling, yielding each turn
    assert s.poller.polling and s.yields == 3
    s.poller.activity()  # another arrival extends the window
    s.turns(9, WINDOW_MS / 10)
    assert s.poller.polling
    s.turns(1, WINDOW_MS / 10)
    assert not s.poller.polling and not s.loop.ready  # one window after the last arrival: the loop may sleep


def test_one_polling_chain_however_many_arrivals() -> None:
    s = Setup()
    for _ in range(10):
        s.poller.activity()
        s.clock.advance(WINDOW_MS / 20)
    assert len(s.loop.ready) == 1
    s.turns(1, 0)
    assert len(s.loop.ready) == 1


def test_polling_starts_again_after_it_stopped() -> None:
    s = Setup()
    s.poller.activity()
    s.poller.activity()
    s.turns(2, WINDOW_MS)
    assert not s.poller.polling
    s.poller.activity()  # a window after the last one: the traffic is sparse now
    assert not s.poller.polling
    s.clock.advance(WINDOW_MS / 4)
    s.poller.activity()
    assert s.poller.polling


def test_zero_turns_it_off() -> None:
    assert idle_poller(0, Loop().call_soon, ManualClock(0).monotonic_ms) is None
    made = idle_poller(200, Loop().call_soon, ManualClock(0).monotonic_ms)
    assert made is not None


def test_the_time_polled_is_counted_while_polling_and_after() -> None:
    s = Setup()
    s.poller.activity()
    s.clock.advance(WINDOW_MS / 2)
    assert s.poller.polled_ms() == 0
    s.poller.activity()  # polling from here
    s.turns(1, WINDOW_MS / 2)
    assert s.poller.polled_ms() == approx(WINDOW_MS / 2)  # the polling under way counts
    s.turns(2, WINDOW_MS / 2)  # a window without arrivals: polling stopped at the second turn
    assert not s.poller.polling and s.poller.polled_ms() == approx(WINDOW_MS)
    s.clock.advance(10 * WINDOW_MS)
    assert s.poller.polled_ms() == approx(WINDOW_MS)  # sleeping does not count


def test_the_setting_refuses_what_is_not_a_window() -> None:
    assert BrokerConfig({}).network_idle_poll_us == 500
    assert BrokerConfig({"network.idle.poll.us": "0"}).network_idle_poll_us == 0
    for value in ("-1", "100001", "99999999999999999999", "half", "", "0.5"):
        with pytest.raises(ConfigError, match=r"network\.idle\.poll\.us"):
            BrokerConfig.from_properties({"network.idle.poll.us": value})
