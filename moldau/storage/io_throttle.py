"""A byte-rate limit shared by threads, as Kafka's `Throttler` holds its log cleaner to
`log.cleaner.io.max.bytes.per.second`.

Each thread reports the bytes it read or wrote. Every `CHECK_INTERVAL_S` the throttle compares what all of them
did since the last check with what the rate allows for that time; when they did more, the thread that noticed
sleeps until the rate is met, holding the lock, so every thread of the group waits with it. The clock and the
sleep are injected: the cleaner's sleep is its cancel event's `wait`, so a stopping broker does not sit out a
throttle's sleep.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["CHECK_INTERVAL_S", "IoThrottle"]

CHECK_INTERVAL_S = 0.3


class IoThrottle:
    def __init__(self, max_bytes_per_second: Callable[[], float], *,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        """`max_bytes_per_second` is asked at every check, so a new value applies within one interval."""
        self._rate = max_bytes_per_second
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0

    def observe(self, nbytes: int, sleep: Callable[[float], object] = time.sleep) -> None:
        """Count `nbytes` of I/O; sleep with `sleep(seconds)` when the group went over the rate."""
        with self._lock:
            self._observed += nbytes
            now = self._monotonic()
            elapsed = now - self._period_start
            if elapsed < CHECK_INTERVAL_S:
                return
            rate = self._rate()
            if math.isfinite(rate) and rate > 0:
                owed = self._observed / rate - elapsed
                if owed > 0:
                    sleep(owed)
            self._period_start = self._monotonic()
            self._observed = 0
