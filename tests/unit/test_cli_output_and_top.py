"""The pure parts of the CLI's output for scripts and of `moldau top`: JSON keys from table headers, and rates
from two samples."""

from __future__ import annotations

import argparse
import json

import pytest

from moldau.cli.output import emit_table, key, records
from moldau.cli.top import Sample, TopicSample, topic_rates


def test_headers_become_snake_case_keys_and_dashes_become_null() -> None:
    assert [key(h) for h in ("LOG-END-OFFSET", "SUPPORTED_MIN", "MSG/S", "CLIENT-ID")] == [
        "log_end_offset", "supported_min", "msg_s", "client_id"]
    assert [key(h) for h in ("NodeId", "LastCaughtUpTimestamp", "IN-FLIGHT")] == [
        "node_id", "last_caught_up_timestamp", "in_flight"]
    assert records([("t", 0, None)], ("TOPIC", "PARTITION", "LAG")) == [{"topic": "t", "partition": 0, "lag": None}]


def test_json_output_is_one_document_and_tables_stay_tables(capsys: pytest.CaptureFixture[str]) -> None:
    rows = [("a", 1), ("b", None)]
    emit_table(argparse.Namespace(output="json"), rows, ("NAME", "COUNT"))
    assert json.loads(capsys.readouterr().out) == [{"name": "a", "count": 1}, {"name": "b", "count": None}]
    emit_table(argparse.Namespace(output="table"), rows, ("NAME", "COUNT"))
    assert capsys.readouterr().out.splitlines() == ["NAME  COUNT", "a     1", "b     -"]
    emit_table(argparse.Namespace(output="table"), [], ("NAME",), empty="nothing")
    assert capsys.readouterr().out == "nothing\n"


def test_rates_are_the_growth_between_two_samples_over_their_distance_in_time() -> None:
    before = Sample(10.0, {"a": TopicSample(2, 100, 10_000), "b": TopicSample(1, 50, 9_000)})
    after = Sample(12.0, {"a": TopicSample(2, 300, 30_000), "b": TopicSample(1, 50, 4_000), "c": TopicSample(1, 8, 80)})
    rates = {r.topic: (r.messages_per_s, r.bytes_per_s) for r in topic_rates(before, after)}
    # a grew by 200 records and 20,000 bytes in 2 s; b's segments were deleted (no negative traffic);
    # c is new since the first sample and counts from zero.
    assert rates == {"a": (100.0, 10_000.0), "b": (0.0, 0.0), "c": (4.0, 40.0)}
