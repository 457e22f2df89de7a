"""The transaction coordinator of one broker: the `__transaction_state` partitions it leads, and their records.

- The topic is created on first use (FindCoordinator with key type 1), through the controller, with
  `transaction.state.log.num.partitions` partitions, `transaction.state.log.replication.factor` replicas (capped
  at the registered brokers), `min.insync.replicas` = `transaction.state.log.min.isr` (capped at the factor) and
  `cleanup.policy=compact`.
- Each partition led here is a shard (held by the shared skeleton, `coordinator.shards`): transactional id ->
  its latest `TxnValue`. Following the metadata image (`on_image`), a partition that becomes led here is loaded
  by replaying its log, and its coordinator epoch is the partition's leader epoch; transactions it finds half
  completed (PrepareCommit/PrepareAbort) get their markers sent again (returned as `MarkerJob`s). A partition
  led elsewhere is dropped.
- The partition logs are reached through a `CoordinatorLog` (the replica manager's `ReplicaLog` in the broker).
- Every change is appended to the partition (acks=all) before it is applied, and the caller answers only once
  the log's high watermark has passed it (`Outcome.wait`). A retried request that needs no write still waits for
  the transaction's last write, so an answer never rests on a record a failover could lose.

Nothing here reads a clock or awaits: callers pass `now_ms` and a fresh producer id when one may be needed
(`needs_new_producer_id`), and run the I/O (`runtime`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Self

from moldau.coordinator.internal_topic import ReplicaLog, build_batch
from moldau.coordinator.log import CoordinatorLog, LogRecord, read_partition
from moldau.coordinator.record_codec import RecordFormatError
from moldau.coordinator.shards import CoordinatorShards
from moldau.coordinator.txn import transitions as rules
from moldau.coordinator.txn.records import (
    TRANSACTION_STATE_TOPIC,
    TopicPartition,
    TxnState,
    TxnValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from moldau.config import BrokerConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TxnSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024
    max_timeout_ms: int = 900_000
    expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    remove_interval_ms: int = 3_600_000
    write_timeout_ms: int = 5_000
    load_buffer_size: int = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(
            num_partitions=config.transaction_state_log_num_partitions,
            replication_factor=config.transaction_state_log_replication_factor,
            min_isr=config.transaction_state_log_min_isr,
            segment_bytes=config.transaction_state_log_segment_bytes,
            max_timeout_ms=config.transaction_max_timeout_ms,
            expiration_ms=config.transactional_id_expiration_ms,
            abort_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            remove_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
            load_buffer_size=config.transaction_state_log_load_buffer_size,
        )

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {"cleanup.policy": "compact", "segment.bytes": str(self.segment_bytes),
                "min.insync.replicas": str(min(self.min_isr, replication_factor))}


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Markers to write for a transaction being completed, then the Complete record."""

    transactional_id: str
    state_partition: int
    coordinator_epoch: int
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer to give, once the state partition's high watermark reaches `wait` (if any): (partition, offset)."""

    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1
    wait: tuple[int, int] | None = None
    job: MarkerJob | None = None


@dataclass(slots=True)
class TxnShard:
    partition: int
    coordinator_epoch: int
    transactions: dict[str, TxnValue] = field(default_factory=dict)
    last_write_end: dict[str, int] = field(default_factory=dict)  # log end after the id's last record

    def replay(self, transactional_id: str, value: TxnValue | None, end_offset: int) -> None:
        if value is None:
            self.transactions.pop(transactional_id, None)
            self.last_write_end.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = value
            self.last_write_end[transactional_id] = end_offset


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: TxnState
    start_ms: int


class TransactionCoordinator:
    def __init__(self, node_id: int, settings: TxnSettings, image: Callable[[], MetadataImage],
                 request_topic: Callable[[], None], log: ReplicaManager | CoordinatorLog) -> None:
        """`log`: the `__transaction_state` partitions, or the replica manager holding them."""
        self.node_id = node_id
        self.settings = settings
        self.log: CoordinatorLog = (ReplicaLog(log, TRANSACTION_STATE_TOPIC, settings.load_buffer_size)
                                    if isinstance(log, ReplicaManager) else log)
        self.partitions = CoordinatorShards[TxnShard](
            node_id, self.log, lambda: self.settings.num_partitions, image, request_topic,
            no_leader_message="the transaction state partition has no leader")

    @property
    def shards(self) -> dict[int, TxnShard]:
        """The loaded shards by partition."""
        return self.partitions.shards

    # -- partitions ----------------------------------------------------------------------------------------

    def on_image(self, image: MetadataImage) -> list[MarkerJob]:
        """Load partitions newly led here (returning completions to resume), drop those led elsewhere. A new
        leader epoch reloads the partition, so the coordinator epoch always follows the leader epoch."""
        jobs: list[MarkerJob] = []

        def load(partition: int, epoch: int) -> TxnShard | None:
            shard = self._load(partition, epoch)
            if shard is not None:
                jobs.extend(self._job(shard, txn_id, value) for txn_id, value in shard.transactions.items()
                            if value.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT))
            return shard

        self.partitions.follow(image, load, keep=lambda shard, epoch: shard.coordinator_epoch == epoch)
        return jobs

    def _load(self, partition: int, coordinator_epoch: int) -> TxnShard | None:
        if not self.partitions.is_loadable(partition):
            return None  # the image moved ahead of the replica manager; the next image loads it
        shard = TxnShard(partition, coordinator_epoch)
        for item in read_partition(self.log, partition):
            if not isinstance(item, LogRecord):
                continue  # no transaction writes markers here
            try:
                value = None if item.value is None else decode_value(item.value)
                shard.replay(decode_key(item.key), value, item.batch_end)
            except (RecordFormatError, UnicodeDecodeError) as exc:
                log.warning("skipping unreadable record at %s-%d@%d: %s", TRANSACTION_STATE_TOPIC, partition,
                            item.offset, exc)
        if shard.transactions:
            log.info("loaded %s-%d: %d transactional ids", TRANSACTION_STATE_TOPIC, partition,
                     len(shard.transactions))
        return shard

    def ensure_topic(self) -> None:
        """Raise COORDINATOR_NOT_AVAILABLE, and ask for the topic to be created, if it does not exist."""
        self.partitions.ensure_topic()

    def partition_of(self, transactional_id: str) -> int:
        return self.partitions.partition_of(transactional_id)

    def coordinator_node(self, transactional_id: str) -> int:
        """The broker leading the id's partition. Raises KafkaError (COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.coordinator_node(transactional_id)

    def shard(self, transactional_id: str) -> TxnShard:
        """The shard of an id coordinated here. Raises KafkaError (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.shard(transactional_id)

    def current(self, transactional_id: str) -> TxnValue | None:
        """The id's state if coordinated here; never creates the topic."""
        shard = self.partitions.find(transactional_id)
        return shard.transactions.get(transactional_id) if shard is not None else None

    # -- requests ------------------------------------------------------------------------------------------

    def needs_new_producer_id(self, transactional_id: str) -> bool:
        return rules.needs_new_producer_id(self.current(transactional_id))

    def init_producer_id(self, transactional_id: str, timeout_ms: int, new_producer_id: int,
                         expected: tuple[int, int], fence_code: ErrorCode, now_ms: int) -> Outcome:
        if not 0 < timeout_ms <= self.settings.max_timeout_ms:
            return Outcome(ErrorCode.invalid_transaction_timeout)
        return self._decide(transactional_id, now_ms, lambda current: rules.init_producer_id(
            current, timeout_ms, new_producer_id, now_ms, expected, fence_code))

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], fence_code: ErrorCode, now_ms: int) -> Outcome:
        wanted = frozenset(partitions)
        return self._decide(transactional_id, now_ms, lambda current: rules.add_partitions(
            current, producer_id, epoch, wanted, now_ms, fence_code))

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        try:
            shard = self.shard(transactional_id)
        except KafkaError as exc:
            return {tp: exc.code for tp in partitions}
        return rules.verify_partitions(shard.transactions.get(transactional_id), producer_id, epoch, partitions)

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        fence_code: ErrorCode, now_ms: int) -> Outcome:
        return self._decide(transactional_id, now_ms, lambda current: rules.end_transaction(
            current, producer_id, epoch, commit, now_ms, fence_code))

    def _decide(self, transactional_id: str, now_ms: int,
                decide: Callable[[TxnValue | None], rules.Decision]) -> Outcome:
        try:
            shard = self.shard(transactional_id)
        except KafkaError as exc:
            return Outcome(exc.code)
        decision = decide(shard.transactions.get(transactional_id))
        if decision.error != ErrorCode.none:
            return Outcome(decision.error)
        if decision.write is not None:
            error = self._write(shard, transactional_id, decision.write, now_ms)
            if error != ErrorCode.none:
                return Outcome(error)
        value = shard.transactions[transactional_id]
        job = self._job(shard, transactional_id, value) if decision.starts_completion else None
        return Outcome(decision.answer_after_write, value.producer_id, value.producer_epoch,
                       self._wait_target(shard, transactional_id), job)

    # -- completion ------------------------------------------------------------------------------------------

    def complete(self, job: MarkerJob, now_ms: int) -> Outcome | None:
        """Every marker of `job` is written: record the completion, unless the transaction moved on meanwhile
        (the partition was reloaded, or another completion finished it)."""
        shard = self.shards.get(job.state_partition)
        if shard is None or shard.coordinator_epoch != job.coordinator_epoch:
            return None
        current = shard.transactions.get(job.transactional_id)
        expected = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
        if current is None or current.state != expected or current.producer_epoch != job.producer_epoch:
            return None
        error = self._write(shard, job.transactional_id, rules.complete(current, now_ms), now_ms)
        return Outcome(error, wait=self._wait_target(shard, job.transactional_id))

    def is_current(self, job: MarkerJob) -> bool:
        shard = self.shards.get(job.state_partition)
        return shard is not None and shard.coordinator_epoch == job.coordinator_epoch

    def abort_timed_out(self, now_ms: int) -> list[Outcome]:
        """Abort, under a bumped epoch, every transaction open longer than its timeout."""
        outcomes = []
        for shard in list(self.shards.values()):
            for txn_id, value in list(shard.transactions.items()):
                if rules.is_timed_out(value, now_ms):
                    log.info("aborting transaction of %r (producer %d): open longer than %d ms", txn_id,
                             value.producer_id, value.timeout_ms)
                    outcomes.append(self._decide(txn_id, now_ms, lambda current: rules.abort_timed_out(
                        current, now_ms) if current is not None else rules.Decision(ErrorCode.none)))
        return outcomes

    def remove_expired(self, now_ms: int) -> int:
        """Forget transactional ids idle longer than transactional.id.expiration.ms (tombstones)."""
        removed = 0
        for shard in list(self.shards.values()):
            for txn_id, value in list(shard.transactions.items()):
                if rules.is_expired(value, now_ms, self.settings.expiration_ms) and \
                        self._write(shard, txn_id, None, now_ms) == ErrorCode.none:
                    removed += 1
        return removed

    # -- listing -----------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnValue | None]:
        try:
            shard = self.shard(transactional_id)
        except KafkaError as exc:
            return exc.code, None
        value = shard.transactions.get(transactional_id)
        return (ErrorCode.none, value) if value is not None else (ErrorCode.transactional_id_not_found, None)

    def list_transactions(self, states: frozenset[TxnState] | None, producer_ids: frozenset[int] | None,
                          min_duration_ms: int, pattern: re.Pattern[str] | None,
                          now_ms: int) -> list[ListedTransaction]:
        """Transactions coordinated here, filtered as ListTransactions asks (an empty filter matches all)."""
        listed = []
        for shard in self.shards.values():
            for txn_id, value in sorted(shard.transactions.items()):
                if states and value.state not in states:
                    continue
                if producer_ids and value.producer_id not in producer_ids:
                    continue
                if min_duration_ms >= 0 and (value.state != TxnState.ONGOING or
                                             now_ms - value.start_ms < min_duration_ms):
                    continue
                if pattern is not None and pattern.fullmatch(txn_id) is None:
                    continue
                listed.append(ListedTransaction(txn_id, value.producer_id, value.state, value.start_ms))
        return listed

    # -- writing -------------------------------------------------------------------------------------------

    def _write(self, shard: TxnShard, transactional_id: str, value: TxnValue | None, now_ms: int) -> ErrorCode:
        """Append, then apply: state changes only once the record is in the log."""
        batch = build_batch([(encode_key(transactional_id), encode_value(value))], now_ms)
        try:
            result = self.log.append(shard.partition, batch)
        except KafkaError as exc:
            log.warning("cannot write to %s-%d: %s", TRANSACTION_STATE_TOPIC, shard.partition, exc.message)
            return write_error(exc.code)
        shard.replay(transactional_id, value, result.last_offset + 1)
        return ErrorCode.none

    def _wait_target(self, shard: TxnShard, transactional_id: str) -> tuple[int, int] | None:
        end = shard.last_write_end.get(transactional_id)
        if end is None or not self.partitions.is_loadable(shard.partition):
            return None
        return shard.partition, end

    def _job(self, shard: TxnShard, transactional_id: str, value: TxnValue) -> MarkerJob:
        return MarkerJob(transactional_id, shard.partition, shard.coordinator_epoch, value.producer_id,
                         value.producer_epoch, value.state == TxnState.PREPARE_COMMIT, value.partitions)

    def close(self) -> None:
        self.partitions.clear()


def write_error(code: ErrorCode) -> ErrorCode:
    """What a client is told when the state log refuses a write (Kafka's mapping): retriable errors."""
    if code == ErrorCode.not_leader_or_follower:
        return ErrorCode.not_coordinator
    return ErrorCode.coordinator_not_available
