"""A compacted topic read from its start and kept up with (Kafka Connect's KafkaBasedLog): a consumer thread
assigned every partition hands each record to a callback, `read_to_end` waits until everything below the
high watermarks seen when it was called has been handed over, and `send` produces with `acks=all`.

The topic is created (compacted) if missing, with the partitions and replication factor asked for.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.connect.errors import ConnectException
from moldau.connect.worker.worker_config import WorkerConfig

__all__ = ["KafkaLog", "RecordCallback", "end_offset", "watermarks"]

log = logging.getLogger(__name__)

# Called on the consumer thread with each record's key, value (None: a tombstone) and offset.
RecordCallback = Callable[[bytes | None, bytes | None, int], None]
POLL_S = 0.1
ADMIN_TIMEOUT_S = 30.0


# Answers to a watermark request for a topic just created: the broker asked, or the client's metadata, has not
# caught up with the creation yet (on a cluster, each broker replays it in its own time). Asked again, as
# Kafka Connect's TopicAdmin retries its end offsets, until the timeout.
_NOT_THERE_YET = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION,
                            KafkaError._UNKNOWN_TOPIC, KafkaError.LEADER_NOT_AVAILABLE,
                            KafkaError.NOT_LEADER_FOR_PARTITION})
RETRY_S = 0.2


def watermarks(client: Consumer, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
    """The partition's (low, high) watermarks (a read_committed client: high is its last stable offset), asked of
    its leader; a partition not known yet is asked again until `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(deadline - time.monotonic(), RETRY_S)
        try:
            low, high = client.get_watermark_offsets(TopicPartition(topic, partition), timeout=left, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in _NOT_THERE_YET or time.monotonic() + RETRY_S > deadline:
                raise
            log.debug("connect: %s-%d is not known yet (%s); asking again", topic, partition, exc.args[0].str())
        time.sleep(RETRY_S)


def end_offset(client: Consumer, topic: str, partition: int, timeout_s: float) -> int:
    """The partition's high watermark, as `watermarks`."""
    return watermarks(client, topic, partition, timeout_s)[1]


class KafkaLog:
    def __init__(self, worker: WorkerConfig, topic: str, partitions: int, replication_factor: int,
                 on_record: RecordCallback, read_committed: bool = False) -> None:
        self.worker = worker
        self.topic = topic
        self.partitions = partitions
        self.replication_factor = replication_factor
        self.on_record = on_record
        # read_committed also makes the watermark asked for by `read_to_end` the last stable offset.
        self.isolation = {"isolation.level": "read_committed"} if read_committed else {}
        self.condition = threading.Condition()
        self.positions: dict[int, int] = {}
        self.stopping = threading.Event()
        self.failure: BaseException | None = None
        self.consumer: Consumer | None = None
        # Watermarks are asked on a consumer of their own: the reading one is busy polling on its thread.
        self.offsets_client: Consumer | None = None
        # read_committed only: asks the high watermark (the other one gets the last stable offset).
        self.high_client: Consumer | None = None
        self.offsets_lock = threading.Lock()
        self.partition_count = 0
        self.producer: Producer | None = None
        self.thread: threading.Thread | None = None

    def start(self, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        """Create the topic if it is missing, then start reading it from the beginning (and read to its end)."""
        self._ensure_topic()
        group = f"{self.worker.values['group.id']}-{self.topic}-reader"
        self.consumer = Consumer({**self.worker.client_config("consumer"), "group.id": group,
                                  "enable.auto.commit": False, "enable.partition.eof": False, **self.isolation})
        self.producer = Producer({**self.worker.client_config("producer"), "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 0})
        self.offsets_client = Consumer({**self.worker.client_config("consumer"), "group.id": group,
                                        "enable.auto.commit": False, **self.isolation})
        if self.isolation:
            self.high_client = Consumer({**self.worker.client_config("consumer"), "group.id": group,
                                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        self.partition_count = self._partition_count(timeout_s)
        self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partition_count)])
        self.thread = threading.Thread(target=self._run, name=f"connect-log-{self.topic}", daemon=True)
        self.thread.start()
        self.read_to_end(timeout_s)

    def _ensure_topic(self) -> None:
        admin = AdminClient(self.worker.client_config("admin"))
        topic = NewTopic(self.topic, self.partitions, self.replication_factor, config={"cleanup.policy": "compact"})
        try:
            admin.create_topics([topic], request_timeout=ADMIN_TIMEOUT_S)[self.topic].result(ADMIN_TIMEOUT_S)
            log.info("connect: created the compacted topic %s", self.topic)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ConnectException(f"cannot create the topic {self.topic}: {exc.args[0].str()}") from None

    def _partition_count(self, timeout_s: float) -> int:
        assert self.consumer is not None
        deadline = time.monotonic() + timeout_s
        while True:
            topic = self.consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
            if topic is not None and topic.error is None and topic.partitions:
                return len(topic.partitions)
            if time.monotonic() > deadline:
                raise ConnectException(f"the topic {self.topic} has no partitions")
            time.sleep(0.2)

    def _run(self) -> None:
        assert self.consumer is not None
        try:
            while not self.stopping.is_set():
                message = self.consumer.poll(POLL_S)
                if message is not None and message.error() is None:
                    offset = message.offset()
                    self.on_record(message.key(), message.value(), -1 if offset is None else offset)
                elif message is not None:
                    log.warning("connect: reading %s: %s", self.topic, message.error())
                with self.condition:
                    for tp in self.consumer.position(self.consumer.assignment()):
                        self.positions[tp.partition] = tp.offset
                    self.condition.notify_all()
        except BaseException as exc:
            log.exception("connect: reading %s failed", self.topic)
            with self.condition:
                self.failure = exc
                self.condition.notify_all()

    def end_offsets(self, timeout_s: float, decided: bool = False) -> dict[int, int]:
        client = self.high_client if decided and self.high_client is not None else self.offsets_client
        assert client is not None
        ends = {}
        with self.offsets_lock:
            for partition in range(self.partition_count):
                ends[partition] = end_offset(client, self.topic, partition, timeout_s)
        return ends

    def read_to_end(self, timeout_s: float = ADMIN_TIMEOUT_S, decided: bool = False) -> None:
        """Return once every record below the current high watermarks (read_committed: the last stable offsets)
        has been handed to the callback. With `decided`, a read_committed log waits for the high watermarks:
        until every transaction open now has been committed or aborted, so that nothing committed after an
        older, still open transaction is missed."""
        ends = self.end_offsets(timeout_s, decided)
        deadline = time.monotonic() + timeout_s
        with self.condition:
            while not all(end == 0 or self.positions.get(p, -1) >= end for p, end in ends.items()):
                if self.failure is not None:
                    raise ConnectException(f"reading {self.topic} failed: {self.failure}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConnectException(f"timed out reading {self.topic} to its end")
                self.condition.wait(min(left, POLL_S))

    def send(self, key: bytes, value: bytes | None, flush: bool = True) -> None:
        """Produce one record; with `flush`, return once the brokers acknowledged it (raise if they refused)."""
        assert self.producer is not None
        errors: list[KafkaError] = []

        def delivered(error: KafkaError | None, _: object) -> None:
            if error is not None:
                errors.append(error)
        self.producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
        if flush:
            self.flush()
            if errors:
                raise ConnectException(f"writing to {self.topic} failed: {errors[0].str()}")
        else:
            self.producer.poll(0)

    def flush(self, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        assert self.producer is not None
        if self.producer.flush(timeout_s):
            raise ConnectException(f"writing to {self.topic} timed out")

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(5)
        if self.producer is not None:
            self.producer.flush(5)
        for consumer in (self.consumer, self.offsets_client, self.high_client):
            if consumer is not None:
                consumer.close()
