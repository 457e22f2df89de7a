"""Waiting for a condition in tests: poll with a deadline, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T | None], timeout_s: float, what: str | Callable[[], str],
               interval_s: float = 0.1, report: Callable[[], str] | None = None,
               failure: type[AssertionError] = AssertionError) -> T:
    """Call `predicate` until it returns something truthy, and return that.

    An exception from `predicate` counts as "not yet" and is shown if time runs out. On timeout, raise `failure`
    naming `what` (a string, or a function giving one), followed by `report()` when given.
    """
    deadline = time.monotonic() + timeout_s
    error: BaseException | None = None
    while True:
        try:
            result = predicate()
            if result:
                return result
        except Exception as exc:
            error = exc
        if time.monotonic() >= deadline:
            break
        time.sleep(interval_s)
    text = what() if callable(what) else what
    detail = f"\nlast error: {type(error).__name__}: {error}" if error is not None else ""
    extra = f"\n{report()}" if report is not None else ""
    raise failure(f"timed out after {timeout_s:.1f}s waiting for {text}{detail}{extra}")
