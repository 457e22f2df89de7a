"""The log.cleaner.* settings a cleaner follows: how many logs it cleans at a time, how long it waits after finding
nothing, whether it cleans at all, how it shares its memory, and its I/O rate (`IoThrottle`)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.config import BrokerConfig
from moldau.storage.cleaner import MIN_READ_CHUNK_BYTES, CleanerSettings, LogCleaner
from moldau.storage.io_throttle import CHECK_INTERVAL_S, IoThrottle
from moldau.storage.log import PartitionLog
from moldau.storage.offset_map import ENTRY_COST_BYTES, OffsetMap
from tests.unit.storage.conftest import OpenLog
from tests.unit.storage.test_cleaner import COMPACT, HeldExecutor, append, read_all, updates


def dirty_logs(open_log: OpenLog, count: int) -> dict[tuple[str, int], PartitionLog]:
    logs = {}
    for i in range(count):
        log = open_log(name=f"t{i}-0", segment_bytes=300, **COMPACT)
        for batch in updates(keys=2, rounds=8):
            append(log, batch)
        logs[(log.topic, log.partition)] = log
    return logs


def cleaner_of(logs: dict[tuple[str, int], PartitionLog], clock: ManualClock, executor: HeldExecutor,
               settings: CleanerSettings) -> LogCleaner:
    return LogCleaner(clock, lambda: logs, lambda: settings, executor=executor)


@pytest.mark.parametrize("threads", [0, 1, 2, 3])
def test_as_many_logs_are_cleaned_at_a_time_as_there_are_threads(open_log: OpenLog, tmp_path: Path,
                                                                 clock: ManualClock, threads: int) -> None:
    logs = dirty_logs(open_log, 3)
    executor = HeldExecutor()
    cleaner = cleaner_of(logs, clock, executor, CleanerSettings(threads=threads, backoff_ms=0))
    cleaner.poll(clock.time_ms())
    assert len(executor.jobs) == threads
    assert len({job_args[0].directory for _, _, job_args in executor.jobs}) == threads, "each on its own log"
    executor.run()
    cleaner.stop()


def test_the_dedupe_and_io_buffers_are_shared_by_the_threads() -> None:
    one, four = CleanerSettings(threads=1), CleanerSettings(threads=4)
    assert one.map_memory_bytes == 4 * four.map_memory_bytes == one.dedupe_buffer_bytes
    assert one.read_chunk_bytes == 256 * 1024 and four.read_chunk_bytes == 64 * 1024
    assert CleanerSettings(io_buffer_bytes=0).read_chunk_bytes == MIN_READ_CHUNK_BYTES
    assert OffsetMap(100 * ENTRY_COST_BYTES, 0.9).capacity == 90


def test_a_disabled_cleaner_cleans_nothing(open_log: OpenLog, tmp_path: Path, clock: ManualClock) -> None:
    executor = HeldExecutor()
    cleaner = cleaner_of(dirty_logs(open_log, 1), clock, executor,
                         CleanerSettings(enabled=False, backoff_ms=0))
    cleaner.poll(clock.time_ms())
    assert executor.jobs == []


def test_after_finding_nothing_the_cleaner_waits_out_its_backoff(open_log: OpenLog, tmp_path: Path,
                                                                  clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, **COMPACT)
    executor = HeldExecutor()
    cleaner = cleaner_of({(log.topic, log.partition): log}, clock, executor, CleanerSettings(backoff_ms=15_000))
    cleaner.poll(clock.time_ms())  # an empty log: nothing to clean
    for batch in updates(keys=2, rounds=8):
        append(log, batch)
    clock.advance(14_999)
    cleaner.poll(clock.time_ms())
    assert executor.jobs == []
    clock.advance(1)
    cleaner.poll(clock.time_ms())
    assert len(executor.jobs) == 1


def test_a_finished_cleaning_looks_for_the_next_log_at_once(open_log: OpenLog, tmp_path: Path,
                                                            clock: ManualClock) -> None:
    logs = dirty_logs(open_log, 2)
    executor = HeldExecutor()
    cleaner = cleaner_of(logs, clock, executor, CleanerSettings(threads=1, backoff_ms=60_000))
    cleaner.poll(clock.time_ms())
    assert len(executor.jobs) == 1
    executor.run()
    executor.jobs.clear()
    cleaner.poll(clock.time_ms())  # applies the first, starts the second without waiting out the backoff
    assert len(executor.jobs) == 1
    executor.run()
    cleaner.stop()


def test_settings_come_from_the_broker_config() -> None:
    config = BrokerConfig.from_properties({
        "log.cleaner.enable": "false", "log.cleaner.threads": "3", "log.cleaner.dedupe.buffer.size": "3145728",
        "log.cleaner.io.buffer.load.factor": "0.5", "log.cleaner.io.buffer.size": "65536",
        "log.cleaner.io.max.bytes.per.second": "1048576", "log.cleaner.backoff.ms": "100"})
    assert CleanerSettings.from_config(config) == CleanerSettings(False, 3, 3145728, 0.5, 65536, 1048576.0, 100)
    assert CleanerSettings.from_config(BrokerConfig()) == CleanerSettings()


# -- the I/O throttle --------------------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_the_throttle_sleeps_until_the_rate_is_met() -> None:
    time = FakeTime()
    rate = [1000.0]
    throttle = IoThrottle(lambda: rate[0], monotonic=time.monotonic)
    throttle.observe(400, time.sleep)  # no check before the interval has passed
    assert time.slept == []
    time.now += CHECK_INTERVAL_S
    throttle.observe(600, time.sleep)  # 1000 bytes in 0.3 s: 0.7 s more for 1000 B/s
    assert time.slept == [pytest.approx(1.0 - CHECK_INTERVAL_S)]
    time.now += 1.0
    throttle.observe(500, time.sleep)  # 500 bytes in 1 s: under the rate
    assert len(time.slept) == 1
    rate[0] = 100.0  # a new rate applies at the next check
    time.now += 1.0
    throttle.observe(300, time.sleep)
    assert time.slept[-1] == pytest.approx(2.0)


def test_kafkas_default_rate_never_sleeps() -> None:
    time = FakeTime()
    throttle = IoThrottle(lambda: CleanerSettings().io_max_bytes_per_second, monotonic=time.monotonic)
    for _ in range(10):
        time.now += 1
        throttle.observe(1 << 40, time.sleep)
    assert time.slept == []


def test_a_stop_wakes_a_throttled_cleaning_and_leaves_no_files(open_log: OpenLog, clock: ManualClock) -> None:
    log = open_log(segment_bytes=300, **COMPACT)
    for batch in updates(keys=2, rounds=10):
        append(log, batch)
    before = read_all(log)
    ticks = threading.Semaphore(0)

    def slow_clock() -> float:
        ticks.release()
        slow_clock.now += 1.0  # type: ignore[attr-defined]
        return slow_clock.now  # type: ignore[attr-defined,no-any-return]

    slow_clock.now = 0.0  # type: ignore[attr-defined]
    cleaner = LogCleaner(clock, lambda: {(log.topic, log.partition): log},
                         CleanerSettings(backoff_ms=0, io_max_bytes_per_second=1.0), monotonic=slow_clock)
    cleaner.poll(clock.time_ms())
    assert cleaner.busy
    for _ in range(2):  # the throttle's creation, then the first read's check: a sleep of about an hour
        assert ticks.acquire(timeout=30)
    stopping = threading.Thread(target=cleaner.stop)
    stopping.start()
    stopping.join(30)
    assert not stopping.is_alive(), "stop() waited out the throttle"
    assert read_all(log) == before
    assert not [n for n in os.listdir(log.directory) if n.endswith((".cleaned", ".swap"))]
