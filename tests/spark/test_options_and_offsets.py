"""The pure parts of the Spark integration: option checking, offset arithmetic, the sink's column rules.

No broker and no Spark session: these run in milliseconds.
"""

from __future__ import annotations

import itertools
import json

import pytest
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, LongType, StringType, StructField, StructType

from moldau.spark.offsets import (
    OffsetRange,
    TopicPartition,
    from_json,
    plan_ranges,
    rate_limit,
    split_ranges,
    to_json,
)
from moldau.spark.options import (
    OffsetBound,
    OptionError,
    check_batch,
    check_streaming,
    parse_sink_options,
    parse_source_options,
)
from moldau.spark.schema import source_schema
from moldau.spark.writer import check_layout

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def test_options_are_case_insensitive_and_default_like_spark() -> None:
    opts = parse_source_options({**BASE, "SUBSCRIBE": "a, b", "kafka.fetch.min.bytes": "1"})
    assert opts.subscription.topics == ("a", "b")
    assert opts.starting is None and opts.ending is None
    assert opts.fail_on_data_loss and not opts.include_headers
    assert opts.isolation_level == "read_uncommitted"
    assert opts.client_conf == {"fetch.min.bytes": "1"}


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t"} | {"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers is required"),
    ({}, "none was given"),
    ({"subscribe": "t", "subscribePattern": "t.*"}, "got subscribe, subscribePattern"),
    ({"subscribePattern": "("}, "subscribePattern: not a valid regular expression"),
    ({"assign": '{"t": "0"}'}, "assign: topic 't' needs a list"),
    ({"assign": "[1]"}, "assign: expected a JSON object"),
    ({"subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "startingOffsets: bad entry"),
    ({"subscribe": "t", "endingOffsets": '{"t": {"x": 1}}'}, "endingOffsets: bad entry 'x'"),
    ({"subscribe": "t", "startingOffsetsByTimestamp": "{"}, "startingOffsetsByTimestamp: malformed JSON"),
    ({"subscribe": "t", "startingTimestamp": "soon"}, "startingTimestamp must be a timestamp"),
    ({"subscribe": "t", "maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be a positive integer"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "failOnDataLoss must be true or false"),
    ({"subscribe": "t", "kafka.isolation.level": "serializable"}, "kafka.isolation.level must be one of"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit cannot be set"),
])
def test_bad_source_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(")):
        parse_source_options({**BASE, **options})


def test_bounds_precedence_and_mode_rules() -> None:
    opts = parse_source_options({**BASE, "subscribe": "t", "startingTimestamp": "5",
                                 "startingOffsetsByTimestamp": '{"t": {"0": 1}}', "startingOffsets": "earliest",
                                 "endingOffsets": json.dumps({"t": {"0": 9, "1": -1}})})
    assert opts.starting == OffsetBound("timestamp", timestamp=5)
    assert opts.ending == OffsetBound("offsets", offsets={T0: 9, T1: -1})
    check_batch(opts)
    with pytest.raises(OptionError, match="apply to batch reads only"):
        check_streaming(opts)
    with pytest.raises(OptionError, match=r"'latest' .* not allowed in a batch read"):
        check_batch(parse_source_options({**BASE, "subscribe": "t", "startingOffsets": '{"t": {"0": -1}}'}))
    with pytest.raises(OptionError, match=r"'earliest' .* not allowed in a batch read"):
        check_batch(parse_source_options({**BASE, "subscribe": "t", "endingOffsets": "earliest"}))


def test_offsets_round_trip_through_json_in_a_stable_order() -> None:
    offsets = {TopicPartition("b", 1): 7, TopicPartition("a", 10): 1, TopicPartition("a", 2): 3}
    as_json = to_json(offsets)
    assert json.dumps(as_json) == '{"a": {"2": 3, "10": 1}, "b": {"1": 7}}'
    assert from_json(as_json) == offsets


def test_rate_limit_shares_in_proportion_and_never_exceeds_the_limit() -> None:
    start = {T0: 0, T1: 100}
    assert rate_limit(start, {T0: 300, T1: 200}, 40) == {T0: 30, T1: 110}
    assert rate_limit(start, {T0: 3, T1: 100}, 40) == {T0: 3, T1: 100}
    # Uneven shares: flooring leaves 1 over, given to the largest remainder; the total is exact.
    end = rate_limit({T0: 0, T1: 0}, {T0: 2, T1: 1}, 2)
    assert sum(end.values()) == 2 and end[T0] >= 1
    # A partition new since `start` starts at 0.
    assert rate_limit({}, {T0: 10}, 4) == {T0: 4}


def test_ranges_skip_empty_partitions_and_split_for_min_partitions() -> None:
    assert plan_ranges({T0: 5, T1: 9}, {T0: 9, T1: 9}) == [OffsetRange("t", 0, 5, 9)]
    pieces = split_ranges([OffsetRange("t", 0, 0, 90), OffsetRange("t", 1, 0, 10)], 10)
    assert len(pieces) == 10
    for p in (0, 1):
        mine = [r for r in pieces if r.partition == p]
        assert mine[0].start == 0 and all(a.end == b.start for a, b in itertools.pairwise(mine))
        assert all(r.size > 0 for r in mine)
    assert split_ranges([OffsetRange("t", 0, 0, 2)], 5) == [OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2)]


def test_source_schema_is_spark_kafka_schema() -> None:
    assert source_schema(False).simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>")
    assert source_schema(True).fieldNames()[-1] == "headers"


def _schema(**columns: object) -> StructType:
    return StructType([StructField(name, kind) for name, kind in columns.items()])  # type: ignore[arg-type]


def test_sink_columns_follow_spark_kafka_sink_rules() -> None:
    with_topic = parse_sink_options({**BASE, "topic": "out"})
    no_topic = parse_sink_options(BASE)
    assert check_layout(_schema(value=StringType()), with_topic).has_key is False
    headers = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    layout = check_layout(_schema(key=BinaryType(), value=BinaryType(), topic=StringType(),
                                  partition=IntegerType(), headers=headers, extra=LongType()), no_topic)
    assert (layout.has_key, layout.has_topic, layout.has_partition, layout.has_headers) == (True, True, True, True)
    for schema, options, message in [
        (_schema(key=StringType()), with_topic, "needs a 'value' column"),
        (_schema(value=LongType()), with_topic, "column 'value' must be binary or string"),
        (_schema(value=StringType(), partition=LongType()), with_topic, "column 'partition' must be integer"),
        (_schema(value=StringType(), headers=ArrayType(StringType())), with_topic, "column 'headers' must be"),
        (_schema(value=StringType()), no_topic, "no topic to write to"),
    ]:
        with pytest.raises(OptionError, match=message):
            check_layout(schema, options)
    with pytest.raises(OptionError, match="idempotent producer"):
        parse_sink_options({**BASE, "kafka.enable.idempotence": "false"})
    assert (with_topic.commits_topic, with_topic.staging_topic) == ("__moldau_spark_sink_commits",
                                                                   "__moldau_spark_sink_staging")
    with pytest.raises(OptionError, match="must be different topics"):
        parse_sink_options({**BASE, "sinkCommitsTopic": "x", "sinkStagingTopic": "x"})
    for owned in ("transactional.id", "isolation.level"):
        with pytest.raises(OptionError, match=f"kafka.{owned} cannot be set"):
            parse_sink_options({**BASE, f"kafka.{owned}": "x"})
