"""The parts of `moldau transactions` that need no broker: decoding, request versions, formatting."""

import datetime
import io

import kio.schema.describe_transactions.v0.response as dt_res
from kio.serial import entity_reader, entity_writer

from moldau.cli import transactions
from moldau.cli.transactions_session import DescribeTransactionsResponse
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode


def _encoded(start: datetime.datetime) -> bytes:
    state = make(dt_res.TransactionState, error_code=ErrorCode.none, transactional_id="t", transaction_state="Empty",
                 transaction_timeout=datetime.timedelta(seconds=60), transaction_start_time=start, producer_id=4,
                 producer_epoch=2, topics=(make(dt_res.TopicData, topic="orders", partitions=(1, 0)),))
    response = make(dt_res.DescribeTransactionsResponse, throttle_time=datetime.timedelta(0),
                    transaction_states=(state,))
    out = io.BytesIO()
    entity_writer(dt_res.DescribeTransactionsResponse)(out, response)
    return out.getvalue()


def test_describe_response_with_no_start_time_decodes() -> None:
    # -1 ms: what brokers send for a transactional id with no transaction started; kio's own reader refuses it.
    frame = _encoded(datetime.datetime.fromtimestamp(-0.001, tz=datetime.UTC))
    response, _ = entity_reader(DescribeTransactionsResponse)(frame, 0)
    coordinator = transactions.Coordinator(1, ("h", 9092))
    described = transactions._description(response.transaction_states[0], coordinator)
    assert (described.start_ms, described.timeout_ms, described.producer_epoch) == (-1, 60_000, 2)
    assert described.partitions == [("orders", 0), ("orders", 1)]
    assert "Started:         -" in transactions._describe_text(described, 0)


def test_describe_text_shows_start_time_and_age() -> None:
    frame = _encoded(datetime.datetime(2024, 5, 1, 12, 0, tzinfo=datetime.UTC))
    state = entity_reader(DescribeTransactionsResponse)(frame, 0)[0].transaction_states[0]
    described = transactions._description(state, transactions.Coordinator(1, ("h", 9092)))
    text = transactions._describe_text(described, described.start_ms + 125_000)
    assert "Started:         2024-05-01T12:00:00.000Z (2m05s ago)" in text
    assert "Coordinator:     1 (h:9092)" in text


def test_list_request_uses_the_oldest_version_with_the_filters() -> None:
    versions = [transactions._list_request(["Ongoing"], [], None, None).__version__,
                transactions._list_request([], [], 10, None).__version__,
                transactions._list_request([], [], None, "a.*").__version__]
    assert versions == [0, 1, 2]
    request = transactions._list_request([], [7], 10, "a.*")
    assert (request.producer_id_filters, request.duration_filter, request.transactional_id_pattern) == ((7,), 10, "a.*")


def test_durations() -> None:
    assert [transactions._duration(ms) for ms in (-5, 850, 12_340, 245_000, 7_380_000)] == [
        "0ms", "850ms", "12.3s", "4m05s", "2h03m"]
