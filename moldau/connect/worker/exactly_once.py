"""Exactly-once delivery of source records (KIP-618), on a distributed worker with
`exactly.once.source.support=enabled`.

Each source task writes through a transactional producer whose `transactional.id` is
`<group.id>-<connector>-<task>`. Before the task starts, `init_transactions` fences every older incarnation of
that id (a task on a worker killed -9, still running on a worker cut off from the group) and waits until the
transaction it left open is aborted; only then is the offsets topic read (read_committed) up to its high
watermark, which waits for transactions of other tasks still open (a sibling task on the same crashed worker:
until it is fenced in turn, or its transaction times out) so that no offset committed after them is missed, and
the task started: it resumes from the offsets of its last committed transaction. The records of a transaction
and the source offsets they reach (in `offset.storage.topic`, in the offset store's record format) are
committed together, per the connector's `transaction.boundary`: after each `poll` (`poll`, the default),
every `transaction.boundary.interval.ms` (`interval`), or when the task asks through its `TransactionContext`
(`connector`: commit or abort after a batch or after a given record; `transaction_context`). A crash therefore
loses the open transaction's records and offsets together, and the next incarnation copies them again, once.

`SourceTask.commit_record` is called once a record's transaction is committed, not when it is acknowledged.

When a connector's task configs change, the leader fences the transactional ids of every task of the previous
configs before it stores the new ones (`fence_producers`), so that no task of the old generation can still
commit a transaction once a task of the new one has read its offsets.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from moldau.connect.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
)
from moldau.connect.config import ConfigValue
from moldau.connect.errors import ConnectException
from moldau.connect.worker.passthrough import PassthroughSender
from moldau.connect.worker.source_runner import SourceTaskRunner
from moldau.connect.worker.states import State
from moldau.connect.worker.stores import OffsetStore
from moldau.connect.worker.submitted import Submitted, partition_key
from moldau.connect.worker.task_runner import TaskSetup
from moldau.connect.worker.transaction_context import WorkerTransactionContext
from moldau.connect.worker.worker_config import (
    EXACTLY_ONCE_SOURCE_SUPPORT,
    EXACTLY_ONCE_SUPPORT,
    OFFSETS_STORAGE_TOPIC,
    TRANSACTION_BOUNDARY,
    TRANSACTION_BOUNDARY_INTERVAL_MS,
    WorkerConfig,
)

__all__ = [
    "ExactlyOnceSourceTaskRunner", "Transactions", "fence_producers", "transactional_id", "transactions_for",
    "validate_exactly_once",
]

log = logging.getLogger(__name__)

# Key and value of an offset record for (connector, partition, offset): the offset store's format.
OffsetRecord = Callable[[str, Mapping[str, Any], Mapping[str, Any] | None], tuple[bytes, bytes | None]]
TRANSACTION_TIMEOUT_S = 60.0
COMMIT_ATTEMPTS = 3
REFRESH_MARGIN_S = 30.0
FENCED = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


class TaskFencedError(ConnectException):
    """A newer incarnation of the task (or the leader, on reconfiguration) fenced this task's producer."""


def _fenced(error: KafkaError | None) -> bool:
    return error is not None and error.code() in FENCED


def _is_fencing(raised: object) -> bool:
    """Whether what a producer call raised says this producer was fenced: TaskFencedError, a KafkaException,
    or the bare KafkaError confluent-kafka raises for fatal errors from poll() and flush()."""
    if isinstance(raised, TaskFencedError):
        return True
    if isinstance(raised, KafkaException):
        raised = raised.args[0] if raised.args else None
    return isinstance(raised, KafkaError) and _fenced(raised)


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """Kafka Connect's transactional id of a source task."""
    return f"{group_id}-{connector}-{task}"


@dataclass(frozen=True)
class Transactions:
    """How one source task writes transactionally."""

    transactional_id: str
    boundary: str  # poll, interval or connector
    interval_s: float
    offsets_topic: str
    offset_record: OffsetRecord
    timeout_s: float = TRANSACTION_TIMEOUT_S


def transactions_for(setup: TaskSetup, offsets_topic: str, offset_record: OffsetRecord) -> Transactions:
    config, worker = setup.connector_config, setup.worker.values
    interval_ms = config.get(TRANSACTION_BOUNDARY_INTERVAL_MS) or worker["offset.flush.interval.ms"]
    return Transactions(transactional_id(worker["group.id"], setup.connector, setup.task_id),
                        config.get(TRANSACTION_BOUNDARY, "poll").strip().lower(), float(interval_ms) / 1000,
                        offsets_topic, offset_record)


def validate_exactly_once(connector: SourceConnector, config: Mapping[str, str], worker_mode: str
                          ) -> list[ConfigValue]:
    """KIP-618's checks of a source connector's config on a worker whose `exactly.once.source.support` is
    `worker_mode`: the cases Moldau cannot honour are refused, not ignored."""
    errors: list[ConfigValue] = []
    boundary = config.get(TRANSACTION_BOUNDARY, "poll").strip().lower()
    if boundary == "connector" and worker_mode == "enabled" and \
            connector.can_define_transaction_boundaries(config) is not ConnectorTransactionBoundaries.SUPPORTED:
        errors.append(ConfigValue(TRANSACTION_BOUNDARY, boundary, errors=[
            "The connector does not support connector-defined transaction boundaries with the given "
            "configuration"]))
    support = config.get(EXACTLY_ONCE_SUPPORT, "requested").strip().lower()
    if support == "required":
        errors += _required(connector, config, worker_mode)
    if worker_mode == "enabled" and config.get(OFFSETS_STORAGE_TOPIC):
        errors.append(ConfigValue(OFFSETS_STORAGE_TOPIC, config[OFFSETS_STORAGE_TOPIC], errors=[
            "Connector-specific offsets topics are not supported; source offsets are committed to the worker's "
            "offset.storage.topic"]))
    return errors


def _required(connector: SourceConnector, config: Mapping[str, str], worker_mode: str) -> list[ConfigValue]:
    if worker_mode != "enabled":
        return [ConfigValue(EXACTLY_ONCE_SUPPORT, "required", errors=[
            f"Exactly-once support is required, but this worker runs with {EXACTLY_ONCE_SOURCE_SUPPORT}="
            f"{worker_mode} (it must be enabled on a distributed worker)"])]
    answer = connector.exactly_once_support(config)
    if answer is ExactlyOnceSupport.SUPPORTED:
        return []
    message = ("The connector does not say whether it supports exactly-once delivery; use requested to run it "
               "transactionally anyway") if answer is None else \
        "The connector does not support exactly-once delivery with this configuration"
    return [ConfigValue(EXACTLY_ONCE_SUPPORT, "required", errors=[message])]


def fence_producers(worker: WorkerConfig, transactional_ids: Iterable[str],
                    timeout_s: float = TRANSACTION_TIMEOUT_S) -> None:
    """Bump the epoch of each transactional id (aborting a transaction left open), so that a producer still
    holding an older epoch can no longer write or commit. Kafka's Admin.fenceProducers does the same through
    InitProducerId."""
    for tid in transactional_ids:
        producer = Producer({**worker.client_config("producer"), "transactional.id": tid,
                             "client.id": f"connect-fencing-{tid}"})
        producer.init_transactions(timeout_s)
        log.info("connect: fenced the producers of transactional id %s", tid)


class ExactlyOnceSourceTaskRunner(SourceTaskRunner):
    """A source task thread whose records and offsets are committed in one transaction per boundary."""

    def __init__(self, setup: TaskSetup, task: SourceTask, offsets: OffsetStore, paused: bool,
                 transactions: Transactions) -> None:
        super().__init__(setup, task, offsets, paused)
        self.transactions = transactions
        self.in_transaction = False
        self.transaction_began = 0.0
        self.pending_offsets: dict[str, tuple[Mapping[str, Any], Mapping[str, Any]]] = {}
        self.pending_records: list[tuple[SourceRecord, RecordMetadata | None]] = []
        self.fenced = False
        # With connector-defined boundaries, what the task asks of its transactions.
        self.boundaries = WorkerTransactionContext() if transactions.boundary == "connector" else None

    def task_context(self) -> SourceTaskContext:
        context = super().task_context()
        return SourceTaskContext(context.configs(), context.offset_storage_reader, self.boundaries)

    def producer_config(self) -> dict[str, Any]:
        return {**super().producer_config(), "transactional.id": self.transactions.transactional_id,
                "transaction.timeout.ms": int(self.transactions.timeout_s * 1000)}

    def prepare(self) -> None:
        assert self.producer is not None
        self.producer.init_transactions(self.transactions.timeout_s)
        # Only now is no transaction of an older incarnation of this task still open. Another task's may be (its
        # worker crashed too): it ends when that task is fenced in turn, or after its transaction timeout.
        self.offsets.refresh(self.transactions.timeout_s + REFRESH_MARGIN_S)
        log.info("connector %s task %d: transactional id %s initialized", self.setup.connector, self.setup.task_id,
                 self.transactions.transactional_id)

    def execute(self) -> None:
        """The source loop; being fenced ends it without failing the task: another incarnation took over (after
        new task configs, or on another worker after this one lost the group), and its status is its own."""
        try:
            super().execute()
        except:  # noqa: E722 - see `task_runner`: a fatal librdkafka error is raised as a KafkaError object
            if not _is_fencing(sys.exc_info()[1]):
                raise
            log.warning("connector %s task %d: fenced by a newer incarnation of %s; stopping", self.setup.connector,
                        self.setup.task_id, self.transactions.transactional_id)
            self.in_transaction = False  # aborted by whoever fenced it
            self.fenced = True
            self.report(State.UNASSIGNED)

    def _passthrough_sender(self) -> PassthroughSender | None:
        """None: the pass-through path produces outside any transaction, so exactly-once tasks take the ordinary
        one, whose records and offsets go into the boundary's transaction."""
        return None

    def _check_deliveries(self) -> None:
        if _fenced(self.delivery_error):
            raise TaskFencedError(f"fenced: {self.delivery_error}")
        super()._check_deliveries()

    # --- records --------------------------------------------------------------------------------------------

    def _submit(self, record: SourceRecord) -> Submitted | None:
        if not self.in_transaction:
            assert self.producer is not None
            self.producer.begin_transaction()
            self.in_transaction = True
            self.transaction_began = self.setup.clock()
        if record.source_partition:
            # Records dropped by a transform or an error policy count too: their offsets are committed with the rest.
            self.pending_offsets[partition_key(record.source_partition)] = (record.source_partition,
                                                                            record.source_offset)
        return None

    def _acked(self, submitted: Submitted | None, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.pending_records.append((record, metadata))

    # --- boundaries -----------------------------------------------------------------------------------------

    def _send(self, record: SourceRecord) -> None:
        super()._send(record)
        if self.boundaries is not None and self.in_transaction:
            if self.boundaries.should_commit_on(record):
                self._commit_transaction()
            elif self.boundaries.should_abort_on(record):
                self._abort_open()

    def _poll_and_send(self) -> None:
        super()._poll_and_send()
        if self.boundaries is not None and self.in_transaction:
            if self.boundaries.should_commit_batch():
                self._commit_transaction()
            elif self.boundaries.should_abort_batch():
                self._abort_open()

    def _abort_open(self) -> None:
        """The connector asked to abort: its records are delivered into the transaction first (so no delivery
        fails for being purged), then the transaction is aborted, and neither their offsets nor the task hear of
        them."""
        assert self.producer is not None
        if self.producer.flush(self.transactions.timeout_s):
            raise ConnectException("records of the transaction were not acknowledged in time")
        self._check_deliveries()
        self.pending_records, self.pending_offsets = [], {}
        self._abort()

    def commit_due(self) -> bool:
        if self.in_transaction:
            if self.boundaries is not None:
                return False  # only the connector commits (or a stop in good order)
            if self.transactions.boundary == "poll":
                return True  # `execute` asks after the records of each poll
            return self.setup.clock() - self.transaction_began >= self.transactions.interval_s
        return super().commit_due()  # with nothing to commit, still call the task's commit() now and then

    def commit_offsets(self) -> None:
        if self.in_transaction:
            self._commit_transaction()
        self.task.commit()

    def _commit_transaction(self) -> None:
        assert self.producer is not None
        for partition, offset in self.pending_offsets.values():
            key, value = self.transactions.offset_record(self.setup.connector, partition, offset)
            self._produce_offset(key, value)
        if self.producer.flush(self.transactions.timeout_s):
            raise ConnectException("records of the transaction were not acknowledged in time")
        self._check_deliveries()
        for attempt in range(COMMIT_ATTEMPTS):
            try:
                self.producer.commit_transaction(self.transactions.timeout_s)
                break
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if _fenced(error):
                    raise TaskFencedError(f"fenced: {error.str()}") from None
                if not error.retriable() or attempt == COMMIT_ATTEMPTS - 1:
                    raise ConnectException(f"committing the transaction failed: {error.str()}") from None
        self.in_transaction = False
        done, self.pending_records, self.pending_offsets = self.pending_records, [], {}
        for record, metadata in done:
            self.task.commit_record(record, metadata)

    def _produce_offset(self, key: bytes, value: bytes | None) -> None:
        assert self.producer is not None

        def delivered(error: KafkaError | None, _: object) -> None:
            if error is not None:
                self.delivery_error = error
        while True:
            try:
                self.producer.produce(self.transactions.offsets_topic, key=key, value=value, on_delivery=delivered)
                return
            except BufferError:
                self.producer.poll(0.1)

    # --- stopping -------------------------------------------------------------------------------------------

    def close(self) -> None:
        """A task stopped in good order commits its open transaction; a failed one aborts it (a fenced producer
        cannot do either: the next incarnation has aborted it already)."""
        if self.producer is not None and self.in_transaction:
            try:
                if self.failed or self.fenced or self.delivery_error is not None:
                    self._abort()
                else:
                    self._commit_transaction()
                    self.task.commit()
            except:  # noqa: E722 - as in `execute`
                log.warning("connector %s task %d: final commit failed (%s); the transaction is aborted",
                            self.setup.connector, self.setup.task_id, sys.exc_info()[1])
                self._abort()
        if self.task_started and not self.stopping.is_set():
            self.task.stop()

    def _abort(self) -> None:
        assert self.producer is not None
        self.in_transaction = False
        try:
            self.producer.abort_transaction(self.transactions.timeout_s)
        except KafkaException as exc:
            log.warning("connector %s task %d: aborting the transaction failed: %s", self.setup.connector,
                        self.setup.task_id, exc.args[0].str())
