"""The worker's error handler: retries of RetriableException with Kafka's backoff on an injected clock, then
the policy's decision (skip, dead letter, or fail the task)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from moldau.connect.error_policy import DeadLetter, ErrorPolicy, Stage
from moldau.connect.errors import RetriableException
from moldau.connect.worker.error_handler import Consumed, ErrorHandler, ToleranceExceeded


class Clock:
    """A clock that only moves when the handler sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> bool:
        self.sleeps.append(seconds)
        self.now += seconds
        return False


def failing(times: int, error: Exception) -> Callable[[], str]:
    calls = {"n": 0}

    def operation() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise error
        return "done"
    return operation


def test_retriable_errors_are_retried_with_doubling_backoff() -> None:
    clock = Clock()
    policy = ErrorPolicy({"errors.retry.timeout": "10000", "errors.retry.delay.max.ms": "1000"}, sink=True)
    handler = ErrorHandler(policy, "c", 0, clock, clock.sleep)
    assert handler.execute(Stage.TRANSFORMATION, failing(4, RetriableException("busy"))) == (True, "done")
    assert clock.sleeps == [0.3, 0.6, 1.0, 1.0]


def test_retries_stop_at_the_timeout_then_the_policy_decides() -> None:
    clock = Clock()
    letters: list[DeadLetter] = []
    policy = ErrorPolicy({"errors.retry.timeout": "1000", "errors.tolerance": "all",
                          "errors.deadletterqueue.topic.name": "dlq"}, sink=True)
    handler = ErrorHandler(policy, "c", 0, clock, clock.sleep, letters.append)
    consumed = Consumed("t", 0, 7, b"k", b"v", [("h", b"1")])
    assert handler.execute(Stage.VALUE_CONVERTER, failing(100, RetriableException("busy")), consumed) == \
        (False, None)
    assert sum(clock.sleeps) == pytest.approx(1.0)
    assert [(d.topic, d.key, d.value, d.headers) for d in letters] == [("dlq", b"k", b"v", [("h", b"1")])]
    assert handler.skipped == 1


def test_other_errors_are_not_retried_and_fail_the_task_by_default() -> None:
    clock = Clock()
    handler = ErrorHandler(ErrorPolicy({"errors.retry.timeout": "-1"}, sink=False), "c", 0, clock, clock.sleep)
    with pytest.raises(ToleranceExceeded, match="Tolerance exceeded in error handler"):
        handler.execute(Stage.TRANSFORMATION, failing(1, ValueError("bad")))
    assert clock.sleeps == []


def test_a_stopping_task_interrupts_retries() -> None:
    clock = Clock()
    handler = ErrorHandler(ErrorPolicy({"errors.retry.timeout": "-1"}, sink=True), "c", 0, clock,
                           lambda seconds: True)
    with pytest.raises(ToleranceExceeded):
        handler.execute(Stage.KEY_CONVERTER, failing(1, RetriableException("busy")))
