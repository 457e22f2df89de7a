"""The message browser's data side without a broker: query strings, how bytes show, and where paging goes."""

from __future__ import annotations

import socket
from urllib.parse import parse_qsl

import pytest

from moldau.console.errors import ConsoleError
from moldau.console.records.decoding import SchemaDecoder, Shown, show_bytes, show_header, show_plain
from moldau.console.records.producing import ProduceForm
from moldau.console.records.query import COUNT_MAX, BrowseQuery, parse_query
from moldau.console.records.reader import PartitionRange, ShownRecord, _select
from moldau.registry.rest_client import RegistryError


def test_the_default_view_is_the_newest_records_of_every_partition() -> None:
    assert parse_query({}) == BrowseQuery(partition=None, start="end", count=50)


@pytest.mark.parametrize("query", [
    BrowseQuery(partition=0, start="offset", offset=42, count=10, q="order-7", search="key"),
    BrowseQuery(start="timestamp", timestamp_ms=1_750_000_000_123),
    BrowseQuery(start="before", positions={0: 12, 2: 40}, q="tea"),
    BrowseQuery(partition=3, start="beginning", count=COUNT_MAX),
])
def test_a_view_is_a_link_that_reads_back_to_itself(query: BrowseQuery) -> None:
    assert parse_query(dict(parse_qsl(query.params()))) == query


def test_timestamps_are_milliseconds_or_iso_dates_in_utc() -> None:
    assert parse_query({"from": "timestamp", "timestamp": "1750000000000"}).timestamp_ms == 1_750_000_000_000
    assert parse_query({"from": "timestamp", "timestamp": "2025-06-15T15:06:40Z"}).timestamp_ms == 1_750_000_000_000
    naive = parse_query({"from": "timestamp", "timestamp": "2025-06-15T15:06:40.5"})
    assert naive.timestamp_ms == 1_750_000_000_500
    assert naive.timestamp_text == "2025-06-15T15:06:40.500"


@pytest.mark.parametrize(("params", "message"), [
    ({"from": "middle"}, "from must be one of"),
    ({"count": "0"}, "count must be between 1 and 500"),
    ({"count": "501"}, "count must be between 1 and 500"),
    ({"count": "many"}, "count must be a whole number"),
    ({"partition": "-1"}, "partition must be 0 or more"),
    ({"from": "offset", "offset": "-5"}, "offset must be 0 or more"),
    ({"from": "timestamp"}, "needs a timestamp"),
    ({"from": "timestamp", "timestamp": "yesterday"}, "neither milliseconds nor an ISO 8601"),
    ({"from": "after", "positions": "0-4"}, "positions must look like"),
    ({"search": "value"}, "search must be text or key"),
])
def test_bad_queries_are_refused_with_a_reason(params: dict[str, str], message: str) -> None:
    with pytest.raises(ConsoleError) as refused:
        parse_query(params)
    assert refused.value.status == 400 and message in refused.value.message


def test_json_is_pretty_printed_text_is_kept_and_binary_is_hex() -> None:
    assert show_plain(b'{"a":[1,2]}') == Shown("json", '{\n  "a": [\n    1,\n    2\n  ]\n}', 11)
    assert show_plain(b"plain words\nover lines") == Shown("text", "plain words\nover lines", 22)
    assert show_plain(b"{not json") == Shown("text", "{not json", 9)
    binary = show_plain(bytes([0xff, 0x00, 0x41]))
    assert (binary.kind, binary.text, binary.base64) == ("binary", "ff 00 41", "/wBB")
    assert show_plain(b"bell\x07").kind == "binary"  # control characters are not text
    assert show_bytes(None, SchemaDecoder(None)).kind == "null"


def test_headers_show_as_text_or_hex() -> None:
    assert show_header("trace", b"abc").value == "abc"
    assert show_header("raw", b"\x00\x01").value == "00 01" and show_header("raw", b"\x00\x01").binary
    assert show_header("empty", None).value == "null"


def test_without_a_registry_the_wire_format_shows_as_bytes() -> None:
    record = b"\x00\x00\x00\x00\x07\x02hi"
    assert SchemaDecoder(None).decode(record) is None
    assert show_bytes(record, SchemaDecoder(None)).kind == "binary"


def test_an_unreachable_registry_is_named_and_not_asked_again_at_once() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    now = [0.0]
    decoder = SchemaDecoder(f"http://127.0.0.1:{port}", clock=lambda: now[0])
    shown = show_bytes(b"\x00\x00\x00\x00\x07\x02hi", decoder)
    assert shown.kind == "binary" and shown.error is not None and "cannot reach the schema registry" in shown.error
    with pytest.raises(RegistryError):
        decoder.decode(b"\x00\x00\x00\x00\x07\x02hi")
    assert decoder._failures[7][0] == SchemaDecoder.FAILURE_TTL_S


def _record(partition: int, offset: int, timestamp_ms: int) -> ShownRecord:
    text = Shown("text", f"{partition}/{offset}", 3)
    return ShownRecord(partition, offset, timestamp_ms, "CreateTime", text, text, [])


def test_the_first_page_of_two_partitions_pages_on_from_the_first_record_it_cut() -> None:
    ranges = [PartitionRange(0, 0, 10, 0, 10, read_to=3), PartitionRange(1, 0, 10, 0, 10, read_to=3)]
    candidates = [_record(0, o, 100 + o * 10) for o in range(3)] + [_record(1, o, 105 + o * 10) for o in range(3)]
    result = _select(candidates, ranges, BrowseQuery(start="beginning", count=3), 6, False)
    assert [(r.partition, r.offset) for r in result.records] == [(0, 0), (1, 0), (0, 1)]
    assert result.newer == {0: 2, 1: 1}
    assert result.older == {0: 0, 1: 0} and not result.has_older and result.has_newer


def test_the_newest_page_pages_back_from_the_last_record_it_cut() -> None:
    ranges = [PartitionRange(0, 0, 10, 7, 10, read_to=10), PartitionRange(1, 0, 4, 1, 4, read_to=4)]
    candidates = [_record(0, o, 1000 + o) for o in range(7, 10)] + [_record(1, o, o) for o in range(1, 4)]
    result = _select(candidates, ranges, BrowseQuery(start="end", count=3), 6, False)
    assert [(r.partition, r.offset) for r in result.records] == [(0, 7), (0, 8), (0, 9)]
    assert result.older == {0: 7, 1: 4}
    assert result.newer == {0: 10, 1: 4} and not result.has_newer and result.has_older


def test_the_produce_form_reads_headers_and_partition() -> None:
    form = ProduceForm(key="k", value="v", headers_text="a=1\n\n b = two=2 ", partition_text="3")
    assert form.headers == [("a", b"1"), ("b", b" two=2 ")] and form.partition == 3
    with pytest.raises(ConsoleError, match="Headers, line 1: expected name=value"):
        _ = ProduceForm(headers_text="no-equals").headers
    with pytest.raises(ConsoleError, match="whole number"):
        _ = ProduceForm(partition_text="-1").partition
