"""Shared pieces of the mirror tests: a steady load on a source topic, reading a (remote) topic whole, and a
fresh topic."""

from __future__ import annotations

import threading
import uuid

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.messages import value_of

PARTITIONS = 2


class Load:
    """Writes numbered records to the source until stopped; each acknowledged one is counted."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                                  "message.timeout.ms": 120_000})
        self.topic = topic
        self.acked: set[int] = set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            self.producer.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS,
                                  on_delivery=self._delivered)
            i += 1
            self.producer.poll(0)
            self.stopping.wait(0.002)

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked.add(int(value_of(msg)))

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()
        assert self.producer.flush(120) == 0


def copied(bootstrap: str, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    values: list[int] = []
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return []  # not created yet
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        while sum(ends.values()) > len(values):
            values += [int(value_of(m)) for m in consumer.consume(1000, 1.0) if m.error() is None]
    finally:
        consumer.close()
    return values


def fresh_topic(bootstrap: str) -> str:
    topic = f"faults-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])[topic].result(30)
    return topic
