"""A sink task's dead letter queue: the topic named by `errors.deadletterqueue.topic.name`, created with
`errors.deadletterqueue.topic.replication.factor` if missing, and the task's own idempotent `acks=all` producer.

The sink runner flushes it before committing consumer offsets, so a skipped record's offset is committed only
once its dead letter record is acknowledged: nothing is lost.
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.connect.error_policy import DeadLetter
from moldau.connect.errors import ConnectException

__all__ = ["DeadLetterQueue", "ensure_topic"]

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}
ADMIN_TIMEOUT_S = 30.0


def ensure_topic(admin_config: dict[str, Any], topic: str, replication_factor: int) -> None:
    """Create `topic` (one partition, as Kafka does) unless it exists."""
    admin = AdminClient(admin_config)
    if topic in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics:
        return
    future = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=replication_factor)],
                                 operation_timeout=ADMIN_TIMEOUT_S)[topic]
    try:
        future.result(ADMIN_TIMEOUT_S)
        log.info("created the dead letter queue topic %s", topic)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise ConnectException(f"Could not create the dead letter queue topic {topic}: {exc}") from exc


class DeadLetterQueue:
    def __init__(self, producer_config: dict[str, Any], flush_timeout_s: float) -> None:
        self.producer = Producer({**PRODUCER_DEFAULTS, **producer_config})
        self.flush_timeout_s = flush_timeout_s
        self.error: KafkaError | None = None
        self.sent = 0

    def send(self, letter: DeadLetter) -> None:
        kwargs: dict[str, Any] = {"key": letter.key, "value": letter.value, "on_delivery": self._delivered}
        if letter.headers:
            kwargs["headers"] = list(letter.headers)
        while True:
            try:
                self.producer.produce(letter.topic, **kwargs)
                break
            except BufferError:
                self.producer.poll(0.1)  # the local queue is full: serve acknowledgements, then retry
        self.producer.poll(0)
        self.sent += 1

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.error = error

    def flush(self) -> None:
        """Wait until every dead letter record is acknowledged; raises if one was not (the offsets of the
        records it stands for must not be committed)."""
        remaining = self.producer.flush(self.flush_timeout_s)
        if self.error is not None:
            raise ConnectException(f"Could not write to the dead letter queue: {self.error}")
        if remaining:
            raise ConnectException(f"{remaining} dead letter queue records not acknowledged within "
                                   f"{self.flush_timeout_s}s")

    def close(self) -> None:
        self.producer.flush(self.flush_timeout_s)
