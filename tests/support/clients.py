"""Thin helpers around the real client libraries, so tests read as what they check."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, Message, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.messages import headers_of, offset_of, partition_of

# For tests that set record timestamps: an hour before the run, so fixed yet inside every retention window. The
# shared broker enforces time retention (7 days) while the suite runs and deletes records stamped years ago,
# active segment and all, as Kafka does; a test reading them back then finds an empty partition.
RECENT_TIMESTAMP_MS = (int(time.time()) - 3600) * 1000

# A librdkafka client config as AdminClient's stubs take it (a dict is invariant, so dict[str, str] is not one).
ClientConf = dict[str, str | int | float | bool]


@dataclass(frozen=True)
class Rec:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @classmethod
    def of(cls, msg: Message) -> Rec:
        """The record a consumed message holds."""
        return cls(partition_of(msg), offset_of(msg), msg.key(), msg.value(), msg.timestamp()[1], headers_of(msg))


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], operation_timeout=10)
    futures[name].result(timeout=30)


def ck_produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> list[tuple[int, int]]:
    """Produce with confluent-kafka; returns (partition, offset) per record in order, after all acks."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    results: list[tuple[int, int] | None] = [None] * len(records)
    errors: list[Any] = []

    def ack(i: int) -> Any:
        def callback(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                results[i] = (msg.partition(), msg.offset())
        return callback

    for i, r in enumerate(records):
        producer.produce(topic, on_delivery=ack(i), **r)
        producer.poll(0)
    remaining = producer.flush(30)
    assert remaining == 0 and not errors, f"{remaining} undelivered, {len(errors)} errors, e.g. {errors[:3]}"
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


def ck_consume(bootstrap: str, topic: str, count: int, partitions: list[int] | None = None,
               start: int = -2, timeout_s: float = 30.0,
               conf: Mapping[str, str | int | float | bool] | None = None) -> list[Rec]:
    """Consume `count` records with confluent-kafka by assignment (no group), from `start` (-2 = beginning);
    `conf` adds to the consumer's config (security settings)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": False, **(conf or {})})
    try:
        parts = partitions if partitions is not None else list(range(partition_count(consumer, topic)))
        consumer.assign([TopicPartition(topic, p, start) for p in parts])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=min(10_000, count - len(out)), timeout=0.5):
                if msg.error() is not None:
                    raise AssertionError(f"consume error: {msg.error()}")
                out.append(Rec.of(msg))
        return out
    finally:
        consumer.close()


def ck_consume_to_end(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[Rec]:
    """Consume every record of every partition, up to the high watermarks seen when it starts.

    Unlike a count, this cannot stop early on one partition because another holds records that were written
    but never acknowledged (a crash between the write and the answer)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partition_count(consumer, topic))}
        consumer.assign([TopicPartition(topic, p, -2) for p, end in ends.items() if end > 0])
        out: list[Rec] = []
        next_offset = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + timeout_s
        while any(next_offset[p] < end for p, end in ends.items()):
            if time.monotonic() > deadline:
                raise AssertionError(f"read only up to {next_offset} of {ends} in {timeout_s} s")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                if msg.error() is not None:
                    raise AssertionError(f"consume error: {msg.error()}")
                out.append(Rec.of(msg))
                next_offset[out[-1].partition] = out[-1].offset + 1
        return out
    finally:
        consumer.close()


def partition_count(consumer: Any, topic: str) -> int:
    metadata = consumer.list_topics(topic, timeout=10)
    return len(metadata.topics[topic].partitions)
