"""The fault-injection workload: idempotent acks=all producers and from-the-beginning readers, all recorded.

`History` is the run's record, shared by the workload and the nemesis (thread-safe): the sends with
their outcomes, the consumer reads, the events (nemesis actions, client errors) and the final read. Its
`as_dict()` is what `tests/support/checker.py` checks and what the runner saves as JSON.

`Workload` drives confluent-kafka clients against the CLIENT listeners:

- `producers` threads, each an idempotent producer (`enable.idempotence=true`, `acks=all`) sending unique
  values `p<producer>-<seq>` round-robin over the partitions at `rate` records per second, with at most
  `max_outstanding` unresolved records. A producer that hits a fatal error is replaced by a new one with a
  new producer id (its unresolved records stay "pending").
- `consumers` threads, each assigned every partition from offset 0 (`isolation`, read_committed as
  librdkafka's default), recording every (partition, offset, value) it reads.
- `final_read()`: every partition from offset 0 to its high watermark, once the cluster is healed.

`TxnWorkload` (`tests/support/txn_workload.py`) replaces the producers with transactional ones; it records
its transactions in `History.txns` and adds a read_uncommitted final read (`History.final_uncommitted`).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

# librdkafka's own log lines (every disconnect during a fault) go here, silent unless a handler is added;
# the errors that matter reach the history through each client's error callback.
CLIENT_LOG = logging.getLogger("tests.fault.clients")
CLIENT_LOG.addHandler(logging.NullHandler())
CLIENT_LOG.propagate = False
CLIENT_TIMEOUTS: dict[str, Any] = {
    "socket.timeout.ms": "5000",
    "socket.connection.setup.timeout.ms": "5000",
    "reconnect.backoff.max.ms": "500",
    "topic.metadata.refresh.interval.ms": "1000",
    "logger": CLIENT_LOG,
    "log_level": 3,  # errors only: every disconnect during a fault would be a warning
}
MAX_ERROR_EVENTS = 2000


class History:
    """The thread-safe record of one run (see the module docstring); times are seconds since `start`."""

    def __init__(self, meta: dict[str, Any] | None = None) -> None:
        self.meta: dict[str, Any] = dict(meta or {})
        self.start = time.monotonic()
        self.meta.setdefault("started_at", time.time())
        self.sends: list[dict[str, Any]] = []
        self.reads: list[list[Any]] = []
        self.events: list[dict[str, Any]] = []
        self.final: dict[str, Any] = {"partitions": {}}
        # Only the transactional workload fills these (tests/support/txn_workload.py).
        self.txns: list[dict[str, Any]] = []
        self.final_uncommitted: dict[str, Any] = {"partitions": {}}
        self._lock = threading.Lock()
        self._ack_orders: dict[str, itertools.count[int]] = {}
        self._error_events = 0

    def now(self) -> float:
        return round(time.monotonic() - self.start, 4)

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        entry = {"t": self.now(), "kind": kind, **fields}
        with self._lock:
            self.events.append(entry)
        return entry

    def client_error(self, who: str, error: object) -> None:
        """A client-side error event; capped so that a long outage does not flood the history."""
        with self._lock:
            self._error_events += 1
            if self._error_events > MAX_ERROR_EVENTS:
                return
        self.event("client-error", who=who, error=str(error))

    def sent(self, producer: str, seq: int, partition: int, value: str) -> dict[str, Any]:
        record = {"value": value, "producer": producer, "seq": seq, "partition": partition,
                  "sent_at": self.now(), "status": "pending"}
        with self._lock:
            self.sends.append(record)
        return record

    def resolve(self, record: dict[str, Any], error: Any, partition: int | None, offset: int | None) -> None:
        with self._lock:
            record["done_at"] = self.now()
            if error is None and offset is not None and offset >= 0:
                counter = self._ack_orders.setdefault(record["producer"], itertools.count())
                record.update(status="acked", partition=partition, offset=offset, ack_order=next(counter))
            else:
                record.update(status="failed", error=str(error if error is not None else "no offset"))

    def read(self, consumer: str, partition: int, offset: int, value: str) -> None:
        entry = [consumer, partition, offset, value, self.now()]
        with self._lock:
            self.reads.append(entry)

    def txn(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Record a transaction as it begins; `txn_update` changes it later (under the same lock)."""
        entry.setdefault("started_at", self.now())
        with self._lock:
            self.txns.append(entry)
        return entry

    def txn_update(self, entry: dict[str, Any], **fields: Any) -> None:
        with self._lock:
            entry.update(fields)

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            recorded = {"meta": dict(self.meta), "events": list(self.events), "sends": [dict(s) for s in self.sends],
                        "reads": list(self.reads), "final": self.final}
            if self.txns:
                recorded.update(txns=copy.deepcopy(self.txns), final_uncommitted=self.final_uncommitted)
            return recorded


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 3,
                 configs: dict[str, str] | None = None, timeout_s: float = 60.0) -> None:
    """Create the topic, retrying while the cluster is not ready; an existing topic is fine."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **CLIENT_TIMEOUTS})
    deadline = time.monotonic() + timeout_s
    while True:
        future = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=configs or {})],
                                     operation_timeout=10)[topic]
        try:
            future.result(timeout=15)
            return
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return
            if time.monotonic() >= deadline:
                raise
        time.sleep(0.5)


class Workload:
    """Producers and consumers over `topic` (see the module docstring); `start`, `stop`, `final_read`."""

    # librdkafka's default: the same as read_uncommitted for records written without transactions.
    isolation = "read_committed"

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History, *, producers: int = 2,
                 consumers: int = 1, rate: float = 50.0, max_outstanding: int = 200,
                 message_timeout_ms: int = 10_000) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.history = history
        self.producer_count = producers
        self.consumer_count = consumers
        self.rate = rate
        self.max_outstanding = max_outstanding
        self.message_timeout_ms = message_timeout_ms
        self._producer_ids = itertools.count()
        self._stop_producers = threading.Event()
        self._stop_consumers = threading.Event()
        self._threads: list[threading.Thread] = []
        self._consumer_threads: list[threading.Thread] = []
        self.flush_s = message_timeout_ms / 1000 + 5

    # ---- lifecycle

    def start(self) -> Workload:
        for index in range(self.consumer_count):
            thread = threading.Thread(target=self._guard(self._consume, f"c{index}"), name=f"consumer-{index}",
                                      daemon=True)
            self._consumer_threads.append(thread)
        for index in range(self.producer_count):
            thread = threading.Thread(target=self._guard(self._produce, index), name=f"producer-{index}",
                                      daemon=True)
            self._threads.append(thread)
        for thread in self._consumer_threads + self._threads:
            thread.start()
        self.history.event("workload", action="start", producers=self.producer_count,
                           consumers=self.consumer_count, rate=self.rate)
        return self

    def stop_producers(self) -> None:
        """Stop sending; each producer waits up to the message timeout for its outstanding records."""
        self._stop_producers.set()
        for thread in self._threads:
            thread.join(self.flush_s + 10)
        self.history.event("workload", action="producers-stopped")

    def stop_consumers(self) -> None:
        self._stop_consumers.set()
        for thread in self._consumer_threads:
            thread.join(30)
        self.history.event("workload", action="consumers-stopped")

    def stop(self) -> None:
        self.stop_producers()
        self.stop_consumers()

    def _guard(self, target: Callable[[Any], None], arg: Any) -> Callable[[], None]:
        def run() -> None:
            try:
                target(arg)
            except Exception as exc:  # recorded, never silent: a dead thread shows in the history
                self.history.event("workload-crash", thread=threading.current_thread().name,
                                   error=f"{type(exc).__name__}: {exc}")

        return run

    # ---- producers

    def _new_producer(self) -> tuple[str, Producer, threading.Event]:
        producer_id = f"p{next(self._producer_ids)}"
        # request.timeout.ms outlasts a fault and its recovery (a killed majority took 6.6 s to serve again). When
        # an acks=all request times out, its records are "possibly persisted" and librdkafka bumps the producer
        # epoch and sends them again under new sequence numbers (seen in a run: the same values at epoch 0 and,
        # later in the log, at epoch 1 from sequence 0), which no broker, Kafka's included, can tell from new
        # records: a duplicate made by the client, not by the log.
        config = {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": self.message_timeout_ms,
                  "request.timeout.ms": min(30_000, self.message_timeout_ms), "retry.backoff.ms": 100,
                  "client.id": producer_id, **CLIENT_TIMEOUTS}
        fatal = threading.Event()

        def on_error(error: KafkaError) -> None:
            if error.fatal():
                fatal.set()
            self.history.client_error(producer_id, error)

        producer = Producer({**config, "error_cb": on_error})
        self.history.event("producer", action="created", producer=producer_id)
        return producer_id, producer, fatal

    def _produce(self, index: int) -> None:
        producer_id, producer, fatal = self._new_producer()
        outstanding = [0]
        lock = threading.Lock()
        seq = 0
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        next_send = time.monotonic()

        def callback(record: dict[str, Any]) -> Callable[[Any, Any], None]:
            def delivered(error: Any, message: Any) -> None:
                with lock:
                    outstanding[0] -= 1
                if error is not None:
                    self.history.resolve(record, error, None, None)
                else:
                    self.history.resolve(record, None, message.partition(), message.offset())

            return delivered

        while not self._stop_producers.is_set():
            if fatal.is_set():
                self._retire(producer_id, producer, 0.0)
                producer_id, producer, fatal = self._new_producer()
                outstanding[0], seq = 0, 0
            producer.poll(0)
            now = time.monotonic()
            if now < next_send or outstanding[0] >= self.max_outstanding:
                time.sleep(min(0.01, max(0.0, next_send - now)) or 0.005)
                continue
            next_send = max(next_send + interval, now - 1.0)
            partition = seq % self.partitions
            value = f"{producer_id}-{seq}"
            record = self.history.sent(producer_id, seq, partition, value)
            try:
                producer.produce(self.topic, value=value.encode(), partition=partition, on_delivery=callback(record))
            except (BufferError, KafkaException) as exc:
                self.history.resolve(record, f"produce() refused: {exc}", None, None)
                continue
            with lock:
                outstanding[0] += 1
            seq += 1
        self._retire(producer_id, producer, self.flush_s)

    def _retire(self, producer_id: str, producer: Producer, flush_s: float) -> None:
        left = producer.flush(flush_s)
        self.history.event("producer", action="retired", producer=producer_id, unresolved=left)

    # ---- consumers

    def _consumer(self, name: str, isolation: str | None = None, eof: bool = False) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"fault-{name}-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation or self.isolation, "enable.partition.eof": eof,
                         "fetch.wait.max.ms": 100, "client.id": name,
                         "error_cb": lambda error: self.history.client_error(name, error), **CLIENT_TIMEOUTS})

    def _consume(self, name: str) -> None:
        consumer = self._consumer(name)
        try:
            consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(self.partitions)])
            while not self._stop_consumers.is_set():
                for message in consumer.consume(500, 0.2):
                    if message.error() is not None:
                        self.history.client_error(name, message.error())
                        continue
                    value, partition, offset = message.value(), message.partition(), message.offset()
                    if partition is not None and offset is not None:
                        self.history.read(name, partition, offset, value.decode() if value is not None else "")
        finally:
            consumer.close()

    # ---- the final read

    def final_read(self, timeout_s: float = 60.0, isolation: str | None = None) -> dict[str, Any]:
        """Read every partition from offset 0 to its high watermark; store and return `history.final`
        (`history.final_uncommitted` for a read_uncommitted read by a read_committed workload)."""
        deadline = time.monotonic() + timeout_s
        isolation = isolation or self.isolation
        name = "final" if isolation == self.isolation else f"final-{isolation}"
        consumer = self._consumer(name, isolation, eof=True)
        try:
            result = self._read_to_ends(consumer, name, deadline)
        finally:
            consumer.close()
        if isolation == self.isolation:
            self.history.final = result
        else:
            self.history.final_uncommitted = result
        self.history.event("final-read", isolation=isolation,
                           ends={p: v["end"] for p, v in result["partitions"].items()},
                           complete=all(v["complete"] for v in result["partitions"].values()))
        return result

    def _read_to_ends(self, consumer: Consumer, name: str, deadline: float) -> dict[str, Any]:
        # The high watermark, whatever the isolation: a read_committed consumer's watermark is the last stable
        # offset, which stops short of a transaction whose markers are not written yet (commit_transaction
        # returns before they are) and would let a read of the committed records end early.
        watermarks = self._consumer(f"{name}-ends", "read_uncommitted")
        try:
            ends = {p: self._end_offset(watermarks, p, deadline) for p in range(self.partitions)}
        finally:
            watermarks.close()
        records: dict[int, dict[int, str]] = {p: {} for p in ends}
        # Where the consumer said it reached the end: with transactions the last offsets hold commit/abort
        # markers (and read_committed skips aborted records), which are never returned as records.
        eof: dict[int, int] = {}
        consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in ends if ends[p]])

        def reached(partition: int) -> bool:
            end, got = ends[partition], records[partition]
            return end is not None and (end == 0 or (bool(got) and max(got) >= end - 1)
                                        or eof.get(partition, -1) >= end)

        while not all(reached(p) for p in ends if ends[p] is not None) and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                partition, offset, error = message.partition(), message.offset(), message.error()
                if partition is None or offset is None:
                    if error is not None:
                        self.history.client_error(name, error)
                elif error is not None and error.code() == KafkaError._PARTITION_EOF:
                    eof[partition] = offset
                elif error is not None:
                    self.history.client_error(name, error)
                elif (end := ends.get(partition)) is not None and offset < end:
                    value = message.value()
                    records[partition][offset] = value.decode() if value is not None else ""
        return {"partitions": {str(p): {"end": end, "complete": reached(p),
                                        "records": [[o, v] for o, v in sorted(records[p].items())]}
                               for p, end in ends.items()}}

    def _end_offset(self, consumer: Consumer, partition: int, deadline: float) -> int | None:
        """The partition's high watermark, retried until the deadline; None if it never answered."""
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaException):
                _low, high = consumer.get_watermark_offsets(TopicPartition(self.topic, partition), timeout=5)
                return int(high)
            time.sleep(0.5)
        return None
