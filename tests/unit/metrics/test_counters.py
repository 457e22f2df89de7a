"""The counters' windowed statistics (Kafka's -avg and -max over two 30 s windows), the request queue count
and the quota throttle statistics, driven by an explicit clock."""

from __future__ import annotations

from moldau.metrics.counters import (
    LATENCY_BUCKETS_MS,
    QUOTA_SENSOR_EXPIRY_MS,
    WINDOW_MS,
    BrokerCounters,
    LatencyHistogram,
    WindowedStat,
)


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


def test_latency_quantiles_are_interpolated_within_buckets_of_recent_requests() -> None:
    histogram = LatencyHistogram()
    for elapsed in (0.2, 0.3, 0.4, 0.45, 7.0):  # four in (0, 0.5], one in (5, 10]
        histogram.observe(elapsed)
    assert histogram.recent_quantiles((0.5, 0.8, 1.0), 0) == [0.3125, 0.5, 10.0]
    histogram.observe(100_000)  # beyond the last bound: reported as the last bound
    assert histogram.recent_quantiles((1.0,), 1)[0] == LATENCY_BUCKETS_MS[-1]
    # A new window: the requests before the previous window began (the first five) no longer count.
    assert histogram.recent_quantiles((0.5,), WINDOW_MS) == [LATENCY_BUCKETS_MS[-1]]
    assert histogram.recent_quantiles((0.5, 0.99), 2 * WINDOW_MS + 1) == [0.0, 0.0]  # nothing recent
    assert histogram.count == 6
