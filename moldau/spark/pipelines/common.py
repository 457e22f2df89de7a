"""What every example pipeline shares: its contract, JSON event topics, and running a query to the end.

A pipeline generates input events into Moldau topics, runs a Structured Streaming query over them with the
`moldau` source and sink, and is checked by computing the same result independently in plain Python from
the generated events and comparing it with what the query wrote.
"""

from __future__ import annotations

import json
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

Event = dict[str, Any]
# Event times start on a minute boundary, so window arithmetic is easy to follow in the output.
BASE_TIME_MS = 1_700_000_040_000
# An event this far past the last real one moves the watermark beyond every real window, closing them all.
FLUSH_AFTER_MS = 15 * 60_000


@dataclass
class RunSettings:
    """Where and how much: broker, topic prefix, event count, seed, checkpoint directory."""

    bootstrap: str
    prefix: str
    events: int
    seed: int
    checkpoint: Path
    max_offsets_per_trigger: int | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"


@dataclass
class Outcome:
    """What a run produced and whether it matched the independent computation."""

    expected: int
    actual: int
    missing: list[Any]
    unexpected: list[Any]
    duplicates: int
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected and not self.duplicates


class Pipeline(ABC):
    """One example pipeline: its topics, generator, Spark query and plain-Python reference."""

    name: str
    description: str

    @abstractmethod
    def create_topics(self, settings: RunSettings) -> None:
        """Create the input and output topics."""

    @abstractmethod
    def generate(self, settings: RunSettings) -> dict[str, list[Event]]:
        """Produce the input events (topic → events, in produce order) and return them."""

    @abstractmethod
    def start(self, spark: SparkSession, settings: RunSettings) -> StreamingQuery:
        """Start the streaming query (availableNow) that reads the inputs and writes the output topic."""

    @abstractmethod
    def expected(self, events: Mapping[str, list[Event]], settings: RunSettings) -> set[Any]:
        """The output computed from the events without Spark."""

    @abstractmethod
    def actual(self, settings: RunSettings) -> list[Any]:
        """The output the query wrote, in the same form as `expected` (a list: duplicates count)."""


def run(pipeline: Pipeline, spark: SparkSession, settings: RunSettings) -> Outcome:
    """Create topics, generate, run the query to its end, and compare with the reference."""
    pipeline.create_topics(settings)
    events = pipeline.generate(settings)
    began = time.monotonic()
    query = pipeline.start(spark, settings)
    query.awaitTermination()
    seconds = time.monotonic() - began
    expected, written = pipeline.expected(events, settings), pipeline.actual(settings)
    actual = set(written)
    return Outcome(len(expected), len(written), sorted(expected - actual, key=repr),
                   sorted(actual - expected, key=repr), len(written) - len(actual), seconds)


# The generated events carry historical event times (from BASE_TIME_MS) as record timestamps; under the broker's
# default time retention (7 days) the next retention pass would delete them in the middle of a run.
PIPELINE_TOPIC_CONFIG = {"retention.ms": "-1"}


def create_topics(bootstrap: str, partitions: Mapping[str, int]) -> None:
    """Create topics (name → partition count); existing ones are an error, so a run never mixes data.

    They keep records regardless of age (`retention.ms=-1`): see PIPELINE_TOPIC_CONFIG.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, count, 1, config=PIPELINE_TOPIC_CONFIG)
                                   for name, count in partitions.items()],
                                  operation_timeout=30, request_timeout=30)
    for name, future in futures.items():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            raise RuntimeError(f"cannot create topic {name}: {exc.args[0].str()} (use another --prefix)") from None


def produce_json(bootstrap: str, topic: str, events: Iterable[Event], key_field: str, time_field: str = "ts") -> None:
    """Produce events as JSON values keyed by `key_field`, with the event time as the record timestamp."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10, "enable.idempotence": True})
    errors: list[Any] = []
    for event in events:
        while True:
            try:
                producer.produce(topic, key=str(event[key_field]).encode(), value=json.dumps(event).encode(),
                                 timestamp=int(event[time_field]),
                                 on_delivery=lambda err, _m: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60) or errors:
        raise RuntimeError(f"producing to {topic} failed: {errors[:1] or 'not acknowledged in time'}")


def read_json(bootstrap: str, topic: str, timeout_s: float = 30.0) -> list[Event]:
    """Every JSON value in `topic`, read by assignment from the beginning to the current end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "moldau-pipeline-check",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s)
        partitions = list(metadata.topics[topic].partitions)
        consumer.assign([CkTopicPartition(topic, p, 0) for p in partitions])
        out: list[Event] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                error = msg.error()
                if error is not None and error.code() == error._PARTITION_EOF:
                    at_end.add(msg.partition() or 0)
                elif error is not None:
                    raise RuntimeError(f"reading {topic}: {error.str()}")
                else:
                    out.append(json.loads(msg.value() or b"null"))
        return out
    finally:
        consumer.close()


def json_stream(spark: SparkSession, settings: RunSettings, topics: list[str]) -> DataFrame:
    """A stream of the topics from their beginning, rate-limited if the settings say so."""
    reader = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", settings.bootstrap)
              .option("subscribe", ",".join(topics)).option("startingOffsets", "earliest"))
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    return reader.load()


def write_available_now(df: DataFrame, settings: RunSettings, topic: str, mode: str = "append") -> StreamingQuery:
    """Write `df` (key, value columns) into `topic` through the moldau sink, processing what is there."""
    return (df.writeStream.format("moldau").outputMode(mode)
            .option("kafka.bootstrap.servers", settings.bootstrap).option("topic", topic)
            .option("checkpointLocation", str(settings.checkpoint)).trigger(availableNow=True).start())


def jittered_times(rng: random.Random, count: int, step_ms: int, jitter_ms: int) -> list[int]:
    """Event times that advance `step_ms` on average and are out of order by at most `jitter_ms`."""
    times, now = [], BASE_TIME_MS
    for _ in range(count):
        now += rng.randint(0, 2 * step_ms)
        times.append(max(BASE_TIME_MS, now + rng.randint(-jitter_ms, jitter_ms)))
    return times


def window_start(ts_ms: int, size_ms: int) -> int:
    """The start of the tumbling window of `size_ms` holding `ts_ms` (Spark's windows are epoch-aligned)."""
    return ts_ms - ts_ms % size_ms
