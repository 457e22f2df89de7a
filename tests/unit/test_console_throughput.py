"""The throughput charts' history: per-second rates between samples, what a topic or group appearing for the first
time counts as, counts that go down, the cluster total without internal topics, and the busiest topics. Also the
reset-offsets form's parsing."""

from __future__ import annotations

import pytest

from moldau.console.errors import ConsoleError
from moldau.console.groups import ResetTarget
from moldau.console.pages.groups import reset_target
from moldau.console.throughput import Key, Sample, ThroughputHistory


def sample(at: float, messages_in: dict[Key, int] | None = None, messages_out: dict[Key, int] | None = None,
           bytes_in: dict[Key, int] | None = None) -> Sample:
    return Sample(at, {"messages_in": messages_in or {}, "messages_out": messages_out or {},
                       "bytes_in": bytes_in or {}, "bytes_out": {}})


def test_rates_are_per_second_between_consecutive_samples() -> None:
    history = ThroughputHistory(10)
    history.add(sample(100.0, {("a", ""): 10}, bytes_in={("a", ""): 1000}))
    history.add(sample(102.0, {("a", ""): 30}, bytes_in={("a", ""): 3000}))
    history.add(sample(106.0, {("a", ""): 30}, bytes_in={("a", ""): 3400}))
    series = history.series("a")
    assert series["t"] == [102.0, 106.0]
    assert series["messages_in"] == [10.0, 0.0]
    assert series["bytes_in"] == [1000.0, 100.0]
    assert series["totals"] == {"messages_in": 30, "messages_out": 0, "bytes_in": 3400, "bytes_out": 0}


def test_a_new_topic_counts_from_zero_but_a_new_group_from_its_first_commit() -> None:
    history = ThroughputHistory(10)
    history.add(sample(0.0, {("old", ""): 5}, {("old", "g1"): 5}))
    history.add(sample(2.0, {("old", ""): 5, ("new", ""): 8}, {("old", "g1"): 5, ("old", "g2"): 1000}))
    history.add(sample(4.0, {("old", ""): 5, ("new", ""): 8}, {("old", "g1"): 5, ("old", "g2"): 1004}))
    assert history.series("new")["messages_in"] == [4.0, 0.0]  # 8 records in 2 s, all new
    assert history.series("old")["messages_out"] == [0.0, 2.0]  # g2's old commits are not traffic


def test_counts_that_go_down_are_not_negative_traffic() -> None:
    history = ThroughputHistory(10)
    history.add(sample(0.0, {("a", ""): 50}, {("a", "g"): 50}))
    history.add(sample(2.0, {("a", ""): 4}, {("a", "g"): 0}))  # re-created topic, offsets reset to earliest
    series = history.series("a")
    assert series["messages_in"] == [0.0] and series["messages_out"] == [0.0]


def test_the_cluster_total_leaves_internal_topics_out() -> None:
    history = ThroughputHistory(10)
    history.add(sample(0.0, {("a", ""): 0, ("b", ""): 0, ("__consumer_offsets", ""): 0}))
    history.add(sample(1.0, {("a", ""): 3, ("b", ""): 4, ("__consumer_offsets", ""): 100}))
    series = history.series(None)
    assert series["messages_in"] == [7.0]
    assert series["totals"]["messages_in"] == 7
    assert history.series("__consumer_offsets")["messages_in"] == [100.0]


def test_the_history_keeps_only_its_capacity() -> None:
    history = ThroughputHistory(3)
    for i in range(10):
        history.add(sample(float(i), {("a", ""): i * 2}))
    series = history.series("a")
    assert series["t"] == [7.0, 8.0, 9.0]
    assert series["messages_in"] == [2.0, 2.0, 2.0]


def test_busiest_topics_rank_messages_in_and_out_over_the_window() -> None:
    history = ThroughputHistory(10)
    assert history.busiest(5) == []
    history.add(sample(0.0, {("a", ""): 0, ("b", ""): 0, ("idle", ""): 7, ("__x", ""): 0}, {("b", "g"): 0}))
    history.add(sample(2.0, {("a", ""): 10, ("b", ""): 6, ("idle", ""): 7, ("__x", ""): 900}, {("b", "g"): 6}))
    assert history.busiest(5) == ["b", "a"]  # b: 6 in + 6 out, a: 10 in; idle and internal topics left out
    assert history.busiest(1) == ["b"]


def test_the_reset_form_is_parsed_into_a_target() -> None:
    assert reset_target({"to": "earliest", "topic": ""}) == (None, ResetTarget("earliest"))
    assert reset_target({"to": "offset", "topic": "t", "offset": " 42 "}) == ("t", ResetTarget("offset", offset=42))
    assert reset_target({"to": "timestamp", "topic": "t", "timestamp": "1970-01-01T00:00:01"}) == (
        "t", ResetTarget("timestamp", timestamp_ms=1000))
    assert reset_target({"to": "timestamp", "timestamp": "1000"})[1].timestamp_ms == 1000


@pytest.mark.parametrize("form, message", [
    ({"to": "sideways"}, "choose where to reset to"),
    ({"to": "offset", "offset": "-1"}, "the offset must be a number"),
    ({"to": "offset", "offset": ""}, "the offset must be a number"),
    ({"to": "timestamp", "timestamp": "yesterday"}, "the time must be ISO 8601"),
])
def test_bad_reset_input_is_a_400(form: dict[str, str], message: str) -> None:
    with pytest.raises(ConsoleError) as caught:
        reset_target(form)
    assert caught.value.status == 400 and message in caught.value.message


def test_recent_rates_average_each_topic_over_the_newest_samples() -> None:
    history = ThroughputHistory(10)
    assert history.recent_rates("messages_in", 10.0) == {}
    history.add(sample(0.0, {("a", ""): 0, ("b", ""): 100}))
    history.add(sample(2.0, {("a", ""): 40, ("b", ""): 100}))
    assert history.recent_rates("messages_in", 10.0) == {"a": 20.0, "b": 0.0}
    for at, a in ((4.0, 40), (6.0, 40), (8.0, 40), (10.0, 40), (12.0, 60)):
        history.add(sample(at, {("a", ""): a, ("b", ""): 100}))
    # The window reaches back 10 s, to the sample at 2.0: 20 messages over 10 s; a topic that is new counts from 0.
    assert history.recent_rates("messages_in", 10.0) == {"a": 2.0, "b": 0.0}
    history.add(sample(14.0, {("a", ""): 60, ("b", ""): 100, ("c", ""): 4}))
    assert history.recent_rates("messages_in", 1.0) == {"a": 0.0, "b": 0.0, "c": 2.0}  # at least one interval
