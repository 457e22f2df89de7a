"""The `moldau` Spark source and sink end to end: a real broker, a real local Spark, real client libraries.

Every test makes its own topics on the run's shared broker and shares the run's one SparkSession.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from tests.support.broker_process import BrokerProcess
from tests.support.clients import RECENT_TIMESTAMP_MS, ck_consume, ck_produce, create_topic

pytestmark = pytest.mark.spark


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def source(spark: SparkSession, broker: BrokerProcess, **options: Any) -> Any:
    """A `spark.read`-style reader of the moldau format with the options given as keyword arguments."""
    reader = spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader


def stream(spark: SparkSession, broker: BrokerProcess, **options: Any) -> DataFrame:
    reader = spark.readStream.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def to_moldau(df: DataFrame, broker: BrokerProcess, topic: str, checkpoint: Path, **trigger: Any) -> StreamingQuery:
    """Start `df` writing into `topic` through the moldau sink."""
    writer = (df.writeStream.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("topic", topic).option("checkpointLocation", str(checkpoint)))
    return writer.trigger(**(trigger or {"availableNow": True})).start()


def produce_numbered(broker: BrokerProcess, topic: str, first: int, count: int, **fields: Any) -> list[tuple[int, int]]:
    records = [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), **fields} for i in range(first, first + count)]
    return ck_produce(broker.bootstrap, topic, records)


def values_of(broker: BrokerProcess, topic: str, count: int) -> list[bytes]:
    return sorted(r.value or b"" for r in ck_consume(broker.bootstrap, topic, count, timeout_s=5))


def test_batch_read_gives_every_record_with_its_metadata(spark: SparkSession, shared_broker: BrokerProcess) -> None:
    prefix = topic_name("meta")
    created, appended = f"{prefix}-create", f"{prefix}-append"
    create_topic(shared_broker.bootstrap, created, partitions=2)
    create_topic(shared_broker.bootstrap, appended, config={"message.timestamp.type": "LogAppendTime"})
    sent: list[dict[str, Any]] = [
        {"key": f"k{i}".encode() if i % 3 else None, "value": f"v{i}".encode(), "timestamp": RECENT_TIMESTAMP_MS + i,
         "partition": i % 2, "headers": [("h", f"x{i}".encode()), ("n", None)] if i % 2 else None}
        for i in range(40)]
    placed = ck_produce(shared_broker.bootstrap, created, sent)
    ck_produce(shared_broker.bootstrap, appended, [{"value": b"late"}])

    rows = source(spark, shared_broker, subscribePattern=f"{prefix}-.*", includeHeaders="true").load().collect()

    by_topic = {t: [r for r in rows if r.topic == t] for t in (created, appended)}
    expected = {(p, off, s["key"], s["value"], s["timestamp"], 0,
                 tuple((k, v) for k, v in s["headers"]) if s["headers"] else None)
                for s, (p, off) in zip(sent, placed, strict=True)}
    got = {(r.partition, r.offset, r.key, r.value, int(r.timestamp.timestamp() * 1000), r.timestampType,
            tuple((h.key, h.value) for h in r.headers) if r.headers is not None else None)
           for r in by_topic[created]}
    assert got == expected
    [late] = by_topic[appended]
    assert (late.value, late.timestampType, late.partition, late.offset) == (b"late", 1, 0, 0)
    assert abs(late.timestamp.timestamp() - time.time()) < 120


def test_batch_offsets_json_latest_timestamps_assign_and_min_partitions(spark: SparkSession,
                                                                         shared_broker: BrokerProcess) -> None:
    topic = topic_name("offsets")
    # The records are stamped 1970: without retention.ms=-1 the shared broker's time retention may delete them (all
    # segments, as Kafka does) while the test reads them back.
    create_topic(shared_broker.bootstrap, topic, partitions=2, config={"retention.ms": "-1"})
    records = [{"value": f"p{i % 2}-{i // 2}".encode(), "partition": i % 2, "timestamp": 1_000 * (i // 2 + 1)}
               for i in range(20)]
    ck_produce(shared_broker.bootstrap, topic, records)

    def offsets(df: DataFrame) -> list[tuple[int, int]]:
        return sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())

    bounded = source(spark, shared_broker, subscribe=topic,
                     startingOffsets=json.dumps({topic: {"0": 2, "1": -2}}),
                     endingOffsets=json.dumps({topic: {"0": 5, "1": -1}})).load()
    assert offsets(bounded) == [(0, 2), (0, 3), (0, 4)] + [(1, o) for o in range(10)]

    # Without transactions in the topic, read_committed reads the same as read_uncommitted.
    assigned = source(spark, shared_broker, assign=json.dumps({topic: [1]}), endingOffsets="latest",
                      **{"kafka.isolation.level": "read_committed"}).load()
    assert offsets(assigned) == [(1, o) for o in range(10)]

    # Timestamps are 1000, 2000, ... per partition: from 4000 on is offset 3 onwards in both.
    by_time = source(spark, shared_broker, subscribe=topic, startingTimestamp=4_000,
                     endingOffsetsByTimestamp=json.dumps({topic: {"0": 6_000, "1": 99_000}})).load()
    assert offsets(by_time) == [(0, 3), (0, 4)] + [(1, o) for o in range(3, 10)]

    split = source(spark, shared_broker, subscribe=topic, minPartitions=6).load()
    assert split.rdd.getNumPartitions() == 6
    assert offsets(split) == [(p, o) for p in (0, 1) for o in range(10)]


def test_read_committed_skips_aborted_records_and_stops_before_an_open_transaction(
        spark: SparkSession, shared_broker: BrokerProcess) -> None:
    topic = topic_name("txn")
    create_topic(shared_broker.bootstrap, topic)
    # The last transaction stays open across two Spark jobs: longer than the default 60 s timeout allows.
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": f"t-{topic}",
                         "transaction.timeout.ms": 600_000})
    producer.init_transactions(30)
    for outcome, first in (("commit", 0), ("abort", 10), ("commit", 20), ("open", 30)):
        producer.begin_transaction()
        for i in range(first, first + 10):
            producer.produce(topic, value=f"v{i}".encode(), partition=0)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)

    def values(level: str) -> list[bytes]:
        # A read that waited for the offsets of markers and aborted records as if they were messages would
        # stall until this poll timeout (10 minutes) instead of failing.
        df = source(spark, shared_broker, subscribe=topic, **{"kafka.isolation.level": level,
                                                              "kafkaConsumer.pollTimeoutMs": "600000"}).load()
        return sorted(r.value for r in df.select("value").collect())

    committed = sorted(f"v{i}".encode() for i in (*range(10), *range(20, 30)))
    # Planned up to the last stable offset, read by offsets across the markers and the aborted records.
    started = time.monotonic()
    assert values("read_committed") == committed
    assert time.monotonic() - started < 120, "reading across the gaps waited for records that never come"
    assert values("read_uncommitted") == sorted(f"v{i}".encode() for i in range(40))
    producer.commit_transaction(30)
    assert values("read_committed") == sorted([*committed, *(f"v{i}".encode() for i in range(30, 40))])


def test_batch_write_then_read_back(spark: SparkSession, shared_broker: BrokerProcess) -> None:
    topic = topic_name("written")
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    df = spark.createDataFrame(
        [(f"k{i}", f"v{i}", i % 3, [("trace", f"t{i}".encode())]) for i in range(30)],
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    df.write.format("moldau").option("kafka.bootstrap.servers", shared_broker.bootstrap).option("topic", topic) \
        .mode("append").save()

    got = ck_consume(shared_broker.bootstrap, topic, 30, timeout_s=10)
    assert sorted((r.partition, r.key, r.value, r.headers) for r in got) == sorted(
        (i % 3, f"k{i}".encode(), f"v{i}".encode(), (("trace", f"t{i}".encode()),)) for i in range(30))


def test_available_now_in_rate_limited_batches_and_new_partitions(spark: SparkSession, shared_broker: BrokerProcess,
                                                                  tmp_path: Path) -> None:
    topic, out = topic_name("avail"), topic_name("avail-out")
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    produce_numbered(shared_broker, topic, 0, 100)

    def run() -> StreamingQuery:
        df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest", maxOffsetsPerTrigger=30)
        query = to_moldau(df.select("value"), shared_broker, out, tmp_path / "ck")
        query.awaitTermination(120)
        assert not query.isActive and query.exception() is None
        return query

    first = run()
    sizes = [p["numInputRows"] for p in first.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    assert values_of(shared_broker, out, 100) == sorted(f"v{i}".encode() for i in range(100))

    # A partition added while the query was down is read from its first offset by the next run.
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=30)
    ck_produce(shared_broker.bootstrap, topic, [{"value": f"new{i}".encode(), "partition": 2} for i in range(5)])
    second = run()
    assert sum(p["numInputRows"] for p in second.recentProgress) == 5
    expected = [f"v{i}".encode() for i in range(100)] + [f"new{i}".encode() for i in range(5)]
    assert values_of(shared_broker, out, 105) == sorted(expected)


def test_restart_loses_nothing_and_the_sink_skips_a_replayed_batch(spark: SparkSession,
                                                                   shared_broker: BrokerProcess,
                                                                   tmp_path: Path) -> None:
    source_topic, out_topic = topic_name("replay-in"), topic_name("replay-out")
    create_topic(shared_broker.bootstrap, source_topic, partitions=2)
    create_topic(shared_broker.bootstrap, out_topic, partitions=2)
    produce_numbered(shared_broker, source_topic, 0, 60)
    checkpoint = tmp_path / "ck"

    def start(**trigger: Any) -> StreamingQuery:
        df = stream(spark, shared_broker, subscribe=source_topic, startingOffsets="earliest", maxOffsetsPerTrigger=20)
        return to_moldau(df.selectExpr("key", "upper(cast(value as string)) as value"), shared_broker, out_topic,
                         checkpoint, **trigger)

    # A processing-time query stopped after its first batch, whatever it was doing then.
    query = start(processingTime="200 milliseconds")
    deadline = time.monotonic() + 120
    while not [p for p in query.recentProgress if p["numInputRows"]] and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    start().awaitTermination(120)
    expected = sorted(f"V{i}".encode() for i in range(60))
    assert sorted(set(values_of(shared_broker, out_topic, 200))) == expected

    # A crash after the sink recorded its last batch but before Spark's commit log did: Spark runs that
    # batch again on restart, and the sink must recognise and skip it.
    consumed_before = len(values_of(shared_broker, out_topic, 200))
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    last_batch = int(commits[-1].name)
    commits[-1].unlink()
    (checkpoint / "commits" / f".{last_batch}.crc").unlink(missing_ok=True)
    replay = start()
    replay.awaitTermination(120)
    assert replay.exception() is None
    replayed = [p for p in replay.recentProgress if p["batchId"] == last_batch]
    assert replayed and replayed[0]["numInputRows"] > 0, "Spark did not replay the uncommitted batch"
    assert len(values_of(shared_broker, out_topic, 200)) == consumed_before


def test_bad_options_fail_before_the_query_starts(spark: SparkSession, shared_broker: BrokerProcess) -> None:
    topic = topic_name("bad")
    create_topic(shared_broker.bootstrap, topic)
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "exactly one of subscribe, subscribePattern or assign is required; none was given"),
        ({"subscribe": topic, "assign": json.dumps({topic: [0]})}, "got subscribe, assign"),
        ({"subscribe": "no-such-topic-here"}, "unknown topic(s) no-such-topic-here"),
        ({"subscribe": topic, "startingOffsets": "{not json"}, "startingOffsets: malformed JSON"),
        ({"subscribe": topic, "startingOffsets": json.dumps({topic: {"7": 0}})}, "outside the subscription"),
        ({"subscribe": topic, "kafka.no.such.setting": "1"}, "kafka.* options rejected"),
        ({"subscribe": topic, "kafka.auto.offset.reset": "latest"}, "kafka.auto.offset.reset cannot be set"),
    ]
    for options, message in cases:
        with pytest.raises(PySparkException, match=re.escape(message)):
            source(spark, shared_broker, **options).load()
        with pytest.raises(PySparkException, match=re.escape(message)):
            stream(spark, shared_broker, **options)


def test_data_loss_fails_or_is_skipped(spark: SparkSession, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic, out = topic_name("loss"), topic_name("loss-out")
    create_topic(shared_broker.bootstrap, topic)
    produce_numbered(shared_broker, topic, 0, 30)

    def run(**options: Any) -> StreamingQuery:
        df = stream(spark, shared_broker, subscribe=topic, startingOffsets="earliest", **options)
        query = to_moldau(df.selectExpr("cast(offset as string) as value"), shared_broker, out, tmp_path / "ck")
        with contextlib.suppress(StreamingQueryException):
            query.awaitTermination(120)
        return query

    assert run().exception() is None
    produce_numbered(shared_broker, topic, 30, 30)
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    admin.delete_records([TopicPartition(topic, 0, 45)])[TopicPartition(topic, 0, 45)].result(timeout=30)

    failed = run()
    assert failed.exception() is not None and "failOnDataLoss" in str(failed.exception())
    skipped = run(failOnDataLoss="false")
    assert skipped.exception() is None
    assert sorted(int(v) for v in values_of(shared_broker, out, 60)) == list(range(30)) + list(range(45, 60))

    batch = source(spark, shared_broker, subscribe=topic, startingOffsets=json.dumps({topic: {"0": 0}}))
    with pytest.raises(PySparkException, match="failOnDataLoss"):
        batch.load().collect()
    assert batch.option("failOnDataLoss", "false").load().count() == 15
