"""The thread that runs a source task: poll, transform, convert, produce through an idempotent `acks=all`
producer, and commit source offsets (to the offset store) only for records the brokers acknowledged, every
`offset.flush.interval.ms` and on stop."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from moldau.connect.api import OffsetStorageReader, RecordMetadata, SourceRecord, SourceTask, SourceTaskContext
from moldau.connect.error_policy import Stage
from moldau.connect.errors import ConnectException
from moldau.connect.passthrough import PassthroughSourceTask
from moldau.connect.worker.error_handler import ErrorHandler
from moldau.connect.worker.passthrough import PassthroughSender, passthrough_applies
from moldau.connect.worker.stores import OffsetStore
from moldau.connect.worker.submitted import Submitted, SubmittedRecords
from moldau.connect.worker.task_runner import IDLE_WAIT_S, TaskRunner, TaskSetup

__all__ = ["SourceTaskRunner", "StoreOffsetReader"]

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS = {"acks": "all", "enable.idempotence": True, "linger.ms": 5}


class StoreOffsetReader(OffsetStorageReader):
    def __init__(self, store: OffsetStore, connector: str) -> None:
        self.store = store
        self.connector = connector

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.store.get(self.connector, partition)


class SourceTaskRunner(TaskRunner):
    def __init__(self, setup: TaskSetup, task: SourceTask, offsets: OffsetStore, paused: bool) -> None:
        super().__init__(setup, paused)
        self.task = task
        self.offsets = offsets
        self.submitted = SubmittedRecords()
        self.producer: Producer | None = None
        self.delivery_error: KafkaError | None = None
        self.task_started = False
        self.passthrough: PassthroughSender | None = None

    def producer_config(self) -> dict[str, Any]:
        return {**PRODUCER_DEFAULTS, **self.setup.client_config("producer"),
                "client.id": f"connector-producer-{self.setup.connector}-{self.setup.task_id}"}

    def prepare(self) -> None:
        """Runs once the producer exists, before the task starts (and reads its offsets)."""

    def start_task(self) -> None:
        self.producer = Producer(self.producer_config())
        self.prepare()
        self.task.initialize(self.task_context())
        self.task.start(self.setup.task_config)
        self.task_started = True

    def task_context(self) -> SourceTaskContext:
        """What the task is given in `initialize`."""
        return SourceTaskContext(self.setup.task_config, StoreOffsetReader(self.offsets, self.setup.connector))

    def stop(self) -> None:
        super().stop()
        if self.task_started:
            # Kafka calls a source task's stop() from another thread, so that a blocking poll() returns.
            try:
                self.task.stop()
            except Exception:
                log.exception("connector %s task %d: stop() failed", self.setup.connector, self.setup.task_id)

    def execute(self) -> None:
        assert self.producer is not None
        self.passthrough = self._passthrough_sender()
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.stopping.wait(IDLE_WAIT_S)
            else:
                self._poll_and_send()
            self.producer.poll(0)
            self._check_deliveries()
            if self.commit_due():
                self.commit_offsets()

    def _poll_and_send(self) -> None:
        if self.passthrough is not None:
            self.passthrough.poll_and_send()
            return
        for record in self.task.poll() or ():
            self._send(record)

    def _passthrough_sender(self) -> PassthroughSender | None:
        """The sender of the pass-through path (`moldau.connect.passthrough`) when it applies to this task."""
        assert self.producer is not None and self.converters is not None and self.transforms is not None
        if not passthrough_applies(self.task, self.converters, self.transforms):
            return None
        assert isinstance(self.task, PassthroughSourceTask)
        log.info("connector %s task %d: records pass through unconverted", self.setup.connector, self.setup.task_id)
        return PassthroughSender(self.task, self.producer, self.submitted, self.setup.on_topic,
                                 self._delivery_failed, self._check_deliveries)

    def _delivery_failed(self, error: KafkaError) -> None:
        self.delivery_error = error

    def _check_deliveries(self) -> None:
        if self.delivery_error is not None:
            raise ConnectException(f"Unrecoverable exception from producer send callback: {self.delivery_error}")

    def _submit(self, record: SourceRecord) -> Submitted | None:
        """Note a polled record before it is sent; what `_acked` gets back once it is."""
        return self.submitted.submit(record.source_partition, record.source_offset) \
            if record.source_partition else None

    def _send(self, record: SourceRecord) -> None:
        submitted = self._submit(record)
        chain, errors = self.transforms, self.errors
        assert chain is not None and errors is not None
        ok, transformed = errors.execute(Stage.TRANSFORMATION, lambda: chain.apply(record))
        if not ok or transformed is None:
            self._acked(submitted, record, None)
            return
        encoded = self._encode(errors, transformed)
        if encoded is None:
            self._acked(submitted, record, None)
            return
        key, value, headers = encoded
        self._produce(transformed, key, value, headers, lambda err, msg: self._delivered(err, msg, submitted, record))

    def _encode(self, errors: ErrorHandler, record: SourceRecord) -> \
            tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]] | None:
        """The record's key, value and headers as bytes; None when a converter failed and the record is skipped."""
        converters, topic = self.converters, record.topic
        assert converters is not None
        ok, key = errors.execute(Stage.KEY_CONVERTER, lambda: converters.key
                                 .from_connect_data(topic, record.key_schema, record.key, record.headers))
        if not ok:
            return None
        ok, value = errors.execute(Stage.VALUE_CONVERTER, lambda: converters.value
                                   .from_connect_data(topic, record.value_schema, record.value, record.headers))
        if not ok:
            return None
        ok, headers = errors.execute(Stage.HEADER_CONVERTER, lambda: [
            (h.key, converters.header.from_connect_header(topic, h.key, h.schema, h.value)) for h in record.headers])
        if not ok or headers is None:
            return None
        return key, value, headers

    def _produce(self, record: SourceRecord, key: bytes | None, value: bytes | None,
                 headers: list[tuple[str, bytes | None]], callback: Any) -> None:
        assert self.producer is not None
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": callback}
        if record.kafka_partition is not None:
            kwargs["partition"] = record.kafka_partition
        if record.timestamp is not None:
            kwargs["timestamp"] = record.timestamp
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self.producer.produce(record.topic, **kwargs)
                break
            except BufferError:
                self.producer.poll(0.1)  # the local queue is full: serve acknowledgements, then retry
                self._check_deliveries()
        self.setup.on_topic(record.topic)

    def _delivered(self, error: KafkaError | None, message: Message, submitted: Submitted | None,
                   record: SourceRecord) -> None:
        if error is not None:
            self.delivery_error = error
            return
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        metadata = RecordMetadata(topic or record.topic, partition if partition is not None else -1,
                                  offset if offset is not None else -1)
        self._acked(submitted, record, metadata)

    def _acked(self, submitted: Submitted | None, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if submitted is not None:
            SubmittedRecords.ack(submitted)
        self.task.commit_record(record, metadata)

    def commit_offsets(self) -> None:
        """Store the offsets of every acknowledged prefix, then tell the task."""
        ready = self.submitted.committable()
        if ready:
            self.offsets.put(self.setup.connector, dict(ready.items()))
        self.task.commit()

    def close(self) -> None:
        if self.producer is not None:
            remaining = self.producer.flush(self.setup.flush_timeout_s)
            if remaining:
                log.warning("connector %s task %d: %d records not acknowledged at stop; their offsets are not "
                            "committed", self.setup.connector, self.setup.task_id, remaining)
            if self.delivery_error is None:
                self.commit_offsets()
            else:
                # Offsets of records acknowledged before the failure are still safe to commit.
                ready = self.submitted.committable()
                if ready:
                    self.offsets.put(self.setup.connector, dict(ready.items()))
        if self.task_started and not self.stopping.is_set():
            self.task.stop()
