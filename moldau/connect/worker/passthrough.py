"""The worker's side of pass-through source tasks (see `moldau.connect.passthrough`): when it applies, and the
sender that produces a task's consumed messages as they are.

Per record, the sender only hands the message's bytes to the producer with a shared delivery callback. The
bookkeeping is per run, consecutive records of one source partition in one poll (at most the task's `max_run`):
one `Submitted` entry carrying the source offset of the run's last record (so the offset store sees it once all
of the run, and everything polled before it, is acknowledged), a count of deliveries outstanding, and where its
first and last records were written: those two have callbacks of their own, so the (upstream, downstream) pairs
the task hears of are exact whatever order the acknowledgements come in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, Message, Producer

from moldau.connect.api import RecordMetadata, SourceTask
from moldau.connect.converters.simple import ByteArrayConverter, SimpleHeaderConverter
from moldau.connect.passthrough import PassthroughSourceTask
from moldau.connect.transforms.chain import TransformationChain
from moldau.connect.worker.plugin_setup import Converters
from moldau.connect.worker.submitted import Submitted, SubmittedRecords

__all__ = ["PassthroughSender", "passthrough_applies"]

BUFFER_FULL_WAIT_S = 0.1


def passthrough_applies(task: SourceTask, converters: Converters, transforms: TransformationChain) -> bool:
    """Whether the task's messages may be produced as they are: it can hand them over, no transform would
    change them, and the converters would pass bytes through unchanged (exact classes: a subclass may not)."""
    return (isinstance(task, PassthroughSourceTask) and not transforms.stages
            and type(converters.key) is ByteArrayConverter and type(converters.value) is ByteArrayConverter
            and type(converters.header) in (ByteArrayConverter, SimpleHeaderConverter))


class _Run:
    """The records of one source partition in one poll, produced and awaiting acknowledgement."""

    __slots__ = ("count", "destination", "first", "first_index", "first_written", "last", "last_index",
                 "last_written", "partition", "remaining", "sender", "submitted", "topic")

    def __init__(self, sender: PassthroughSender, topic: str, partition: int, destination: str, first: int,
                 index: int) -> None:
        self.sender = sender
        self.topic, self.partition, self.destination = topic, partition, destination
        self.first = self.last = first
        self.count = 0
        self.first_index = self.last_index = index
        self.remaining = 0
        self.submitted: Submitted | None = None
        self.first_written: RecordMetadata | None = None
        self.last_written: RecordMetadata | None = None

    def delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self.sender.on_error(error)
            return
        self.remaining -= 1
        if self.remaining == 0:
            self.sender.completed(self)

    def first_delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.first_written = self._written(message)
        self.delivered(error, message)

    def last_delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            self.last_written = self._written(message)
            if self.count == 1:
                self.first_written = self.last_written
        self.delivered(error, message)

    def _written(self, message: Message) -> RecordMetadata:
        offset = message.offset()
        return RecordMetadata(self.destination, self.partition, offset if offset is not None else -1)

    def callback(self, index: int) -> Callable[[KafkaError | None, Message], None]:
        """The delivery callback of the run's record at `index` in the batch."""
        if index == self.last_index:
            return self.last_delivered
        return self.first_delivered if index == self.first_index else self.delivered


class PassthroughSender:
    """Produces the batches a `PassthroughSourceTask` polls, tracking acknowledgements per run."""

    def __init__(self, task: PassthroughSourceTask, producer: Producer, submitted: SubmittedRecords,
                 on_topic: Callable[[str], None], on_error: Callable[[KafkaError], None],
                 check_deliveries: Callable[[], None]) -> None:
        self.task = task
        self.producer = producer
        self.submitted = submitted
        self.on_topic = on_topic
        self.on_error = on_error
        self.check_deliveries = check_deliveries
        self._destinations: dict[str, str] = {}

    def poll_and_send(self) -> None:
        messages = self.task.poll_messages()
        if messages:
            self.send(messages)

    def send(self, messages: Sequence[Message]) -> None:
        runs = self._plan(messages)
        produce = self.producer.produce
        for index, message in enumerate(messages):
            run = runs[index]
            timestamp_type, timestamp = message.timestamp()
            while True:
                try:
                    # A timestamp of 0 lets the producer stamp records that had none (TIMESTAMP_NOT_AVAILABLE).
                    produce(run.destination, message.value(), message.key(), run.partition, run.callback(index),
                            timestamp=timestamp if timestamp_type else 0, headers=message.headers())
                    break
                except BufferError:
                    self.producer.poll(BUFFER_FULL_WAIT_S)  # serve acknowledgements, then retry
                    self.check_deliveries()

    def _plan(self, messages: Sequence[Message]) -> list[_Run]:
        """The run of each message, in order; each run registered as submitted under its last source offset."""
        by_partition: dict[tuple[str, int], _Run] = {}  # the current run of each source partition
        runs: list[_Run] = []
        plan: list[_Run] = []
        max_run = max(1, self.task.max_run())
        for index, message in enumerate(messages):
            topic, partition = message.topic(), message.partition()
            assert topic is not None and partition is not None
            run = by_partition.get((topic, partition))
            if run is None or run.count == max_run:
                run = by_partition[(topic, partition)] = _Run(self, topic, partition, self._destination(topic),
                                                              message.offset() or 0, index)
                runs.append(run)
            run.count += 1
            run.last_index = index
            plan.append(run)
        for run in runs:  # in the order polled, so each partition's runs queue up in order
            run.last = messages[run.last_index].offset() or 0
            run.remaining = run.count
            # Once per run rather than once per task: the connector's active topics may be reset meanwhile.
            self.on_topic(run.destination)
            run.submitted = self.submitted.submit(self.task.source_partition(run.topic, run.partition),
                                                  self.task.source_offset(run.last))
        return plan

    def _destination(self, topic: str) -> str:
        destination = self._destinations.get(topic)
        if destination is None:
            destination = self._destinations[topic] = self.task.destination(topic)
        return destination

    def completed(self, run: _Run) -> None:
        assert run.submitted is not None and run.first_written is not None and run.last_written is not None
        SubmittedRecords.ack(run.submitted)
        self.task.commit_run(run.topic, run.partition, run.first, run.last, run.count, run.first_written,
                             run.last_written)

