"""The counters' windowed statistics (Kafka's -avg and -max over two 30 s windows), the request queue count
and the quota throttle statistics, driven by an explicit clock."""

from __future__ import annotations

from moldau.metrics.counters import QUOTA_SENSOR_EXPIRY_MS, WINDOW_MS, BrokerCounters, WindowedStat


def test_average_and_maximum_cover_the_current_and_previous_window() -> None:
    stat = WindowedStat()
    stat.record(10, 0)
    stat.record(30, 1000)
    assert (stat.avg(1000), stat.max(1000)) == (20, 30)
    stat.record(2, WINDOW_MS + 1)  # a new window: the previous one still counts
    assert (stat.avg(WINDOW_MS + 1), stat.max(WINDOW_MS + 1)) == (14, 30)
    assert (stat.avg(2 * WINDOW_MS + 2), stat.max(2 * WINDOW_MS + 2)) == (2, 2)  # the first window has gone
    assert (stat.avg(10 * WINDOW_MS), stat.max(10 * WINDOW_MS)) == (0, 0)  # both gone after a long silence
    assert (stat.count, stat.sum) == (3, 42)


def test_requests_in_progress_and_throttled_clients() -> None:
    counters = BrokerCounters()
    counters.request_started()
    counters.request_started()
    counters.request_served("Produce", 11, 1.5)
    assert counters.in_flight == 1 and counters.requests == {("Produce", 11): 1}
    counters.quota_checked("Produce", "alice", "app", 0, 0)
    counters.quota_checked("Produce", "alice", "app", 100, 10)
    assert counters.throttle[("Produce", "alice", "app")].avg(10) == 50
    counters.forget_idle_clients(10 + QUOTA_SENSOR_EXPIRY_MS)
    assert ("Produce", "alice", "app") in counters.throttle
    counters.forget_idle_clients(11 + QUOTA_SENSOR_EXPIRY_MS)
    assert not counters.throttle
