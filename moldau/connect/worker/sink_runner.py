"""The thread that runs a sink task: consume in the group `connect-<connector>`, convert and transform the
records, `put` them, and commit consumer offsets (those `pre_commit` returns, by default after `flush`) every
`offset.flush.interval.ms`, on request, before partitions are revoked, and on stop. Nothing is committed that
the task has not flushed, so delivery is at least once."""

from __future__ import annotations

import logging
import re
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from moldau.connect.api import Header, SinkRecord, SinkTask, SinkTaskContext, TopicPartition
from moldau.connect.data import SchemaAndValue
from moldau.connect.error_policy import Stage
from moldau.connect.errors import ConfigException, RetriableException
from moldau.connect.worker.client_overrides import max_poll_records
from moldau.connect.worker.dead_letter_queue import DeadLetterQueue, ensure_topic
from moldau.connect.worker.error_handler import Consumed
from moldau.connect.worker.task_runner import TaskRunner, TaskSetup

__all__ = ["SinkTaskRunner", "group_id"]

log = logging.getLogger(__name__)

CONSUME_TIMEOUT_S = 0.2
TIMESTAMP_TYPES = {0: "NoTimestampType", 1: "CreateTime", 2: "LogAppendTime"}


def group_id(connector: str) -> str:
    return f"connect-{connector}"


class SinkTaskRunner(TaskRunner):
    is_sink = True

    def __init__(self, setup: TaskSetup, task: SinkTask, paused: bool) -> None:
        super().__init__(setup, paused)
        self.task = task
        self.context = SinkTaskContext(setup.task_config)
        self.consumer: Consumer | None = None
        self.current: dict[TopicPartition, int] = {}  # next offset to consume, per assigned partition
        self.committed: dict[TopicPartition, int] = {}
        self.consumer_paused = False
        self.task_started = False
        self.dead_letter_queue: DeadLetterQueue | None = None
        self.batch_size = 0

    def start_task(self) -> None:
        config = {"auto.offset.reset": "earliest", **self.setup.client_config("consumer"),
                  "group.id": group_id(self.setup.connector), "enable.auto.commit": False,
                  "client.id": f"connector-consumer-{self.setup.connector}-{self.setup.task_id}"}
        self.batch_size = max_poll_records(self.setup.worker.raw, self.setup.connector_config)
        self._start_dead_letter_queue()
        self.consumer = Consumer(config)
        self.task.initialize(self.context)
        self.task.start(self.setup.task_config)
        self.task_started = True
        self.consumer.subscribe(self._subscription(), on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _start_dead_letter_queue(self) -> None:
        assert self.errors is not None
        policy = self.errors.policy
        if not policy.dlq_topic:
            return
        ensure_topic(self.setup.client_config("admin"), policy.dlq_topic, policy.dlq_replication_factor)
        self.dead_letter_queue = DeadLetterQueue(
            {**self.setup.client_config("producer"),
             "client.id": f"connector-dlq-producer-{self.setup.connector}-{self.setup.task_id}"},
            self.setup.flush_timeout_s)
        self.errors.dead_letters = self.dead_letter_queue.send

    def _subscription(self) -> list[str]:
        config = self.setup.connector_config
        topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
        pattern = config.get("topics.regex", "").strip()
        if topics and pattern:
            raise ConfigException("topics", config.get("topics"), "topics and topics.regex are mutually exclusive")
        if pattern:
            re.compile(pattern)
            return ["^" + pattern]  # librdkafka reads a leading ^ as a regular expression
        if not topics:
            raise ConfigException("topics", None, "Must configure one of topics or topics.regex")
        return topics

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assigned = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.context.set_assignment(self.context.assignment() | set(assigned))
        self.task.open(assigned)
        for tp in assigned:
            self.setup.on_topic(tp.topic)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        revoked = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.commit(only=set(revoked))
        self.task.close(revoked)
        for tp in revoked:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)
        self.context.set_assignment(self.context.assignment() - set(revoked))

    def execute(self) -> None:
        assert self.consumer is not None
        while not self.stopping.is_set():
            self._apply_pause_state()
            self._apply_context_requests()
            messages = self.consumer.consume(self.batch_size, CONSUME_TIMEOUT_S)
            records = [r for r in (self._record(m) for m in messages) if r is not None]
            if records:
                self._put(records)
            for message in messages:
                if message.error() is None:
                    tp = TopicPartition(str(message.topic()), int(message.partition() or 0))
                    self.current[tp] = int(message.offset() or 0) + 1
            if self.commit_due() or self.context.commit_requested:
                self.context.commit_requested = False
                self.commit()

    def _apply_pause_state(self) -> None:
        assert self.consumer is not None
        want_paused = self.paused.is_set()
        if want_paused == self.consumer_paused:
            return
        assignment = self.consumer.assignment()
        if want_paused:
            self.consumer.pause(assignment)
        else:
            kept = {(tp.topic, tp.partition) for tp in self.context.requested_pause}
            self.consumer.resume([p for p in assignment if (p.topic, p.partition) not in kept])
        self.consumer_paused = want_paused

    def _apply_context_requests(self) -> None:
        assert self.consumer is not None
        for tp, offset in list(self.context.requested_offsets.items()):
            try:
                self.consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, offset))
                self.current[tp] = offset
            except KafkaException as exc:
                log.warning("connector %s: cannot seek %s to %d yet: %s", self.setup.connector, tp, offset, exc)
                continue
            del self.context.requested_offsets[tp]
        if self.context.requested_pause:
            self.consumer.pause([KafkaTopicPartition(t, p) for t, p in self.context.requested_pause])
            self.context.requested_pause.clear()
        if self.context.requested_resume and not self.consumer_paused:
            self.consumer.resume([KafkaTopicPartition(t, p) for t, p in self.context.requested_resume])
            self.context.requested_resume.clear()

    def _record(self, message: Message) -> SinkRecord | None:
        error = message.error()
        if error is not None:
            if error.fatal():
                raise KafkaException(error)
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("connector %s: consumer error: %s", self.setup.connector, error)
            return None
        assert self.errors is not None and self.converters is not None and self.transforms is not None
        raw_headers: list[tuple[str, Any]] = list(message.headers() or [])  # type: ignore[arg-type]
        consumed = Consumed(str(message.topic()), int(message.partition() or 0), int(message.offset() or 0),
                            message.key(), message.value(),
                            [(name, raw.encode() if isinstance(raw, str) else raw) for name, raw in raw_headers])
        converters, topic = self.converters, consumed.topic
        ok, key = self.errors.execute(Stage.KEY_CONVERTER,
                                      lambda: converters.key.to_connect_data(topic, consumed.key), consumed)
        if not ok or key is None:
            return None
        ok, value = self.errors.execute(Stage.VALUE_CONVERTER,
                                        lambda: converters.value.to_connect_data(topic, consumed.value), consumed)
        if not ok or value is None:
            return None
        ok, headers = self.errors.execute(Stage.HEADER_CONVERTER, lambda: self._headers(consumed), consumed)
        if not ok or headers is None:
            return None
        record = self._sink_record(message, key, value, headers)
        chain = self.transforms
        ok, transformed = self.errors.execute(Stage.TRANSFORMATION, lambda: chain.apply(record), consumed)
        return transformed if ok else None

    def _headers(self, consumed: Consumed) -> tuple[Header, ...]:
        assert self.converters is not None
        headers = []
        for name, data in consumed.headers:
            converted = self.converters.header.to_connect_header(consumed.topic, name, data)
            headers.append(Header(name, converted.value, converted.schema))
        return tuple(headers)

    def _sink_record(self, message: Message, key: SchemaAndValue, value: SchemaAndValue,
                     headers: tuple[Header, ...]) -> SinkRecord:
        timestamp_type, timestamp = message.timestamp()
        return SinkRecord(topic=str(message.topic()), kafka_partition=message.partition(), key_schema=key.schema,
                          key=key.value, value_schema=value.schema, value=value.value,
                          timestamp=timestamp if timestamp_type else None, headers=headers,
                          kafka_offset=int(message.offset() or 0),
                          timestamp_type=TIMESTAMP_TYPES.get(timestamp_type, "CreateTime"))

    def _put(self, records: list[SinkRecord]) -> None:
        while True:
            try:
                self.task.put(records)
                return
            except RetriableException as exc:
                wait_s = (self.context.timeout_ms or 1000) / 1000
                log.warning("connector %s task %d: put failed, retrying in %.1fs: %s", self.setup.connector,
                            self.setup.task_id, wait_s, exc)
                if self.stopping.wait(wait_s):
                    raise

    def commit(self, only: set[TopicPartition] | None = None) -> None:
        """Ask the task which offsets are safe (flushing by default) and commit those that moved."""
        assert self.consumer is not None
        current = {tp: o for tp, o in self.current.items() if only is None or tp in only}
        if not current:
            return
        safe = self.task.pre_commit(current)
        moved = {tp: o for tp, o in safe.items() if tp in current and self.committed.get(tp) != o}
        if not moved:
            return
        if self.dead_letter_queue is not None:
            self.dead_letter_queue.flush()  # a skipped record's offset is committed only once its letter is safe
        try:
            self.consumer.commit(offsets=[KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in moved.items()],
                                 asynchronous=False)
            self.committed.update(moved)
        except KafkaException as exc:
            log.warning("connector %s task %d: offset commit failed (retried at the next commit): %s",
                        self.setup.connector, self.setup.task_id, exc)

    def close(self) -> None:
        try:
            if self.consumer is not None and self.task_started and not self.failed:
                self.commit()
        finally:
            try:
                if self.task_started:
                    self.task.stop()
            finally:
                if self.consumer is not None:
                    self.consumer.close()
                if self.dead_letter_queue is not None:
                    self.dead_letter_queue.close()
