"""The checks a leader makes before it appends a client's batches (Kafka's LogValidator).

Every batch of a Produce request is checked before any byte is written, so an append is all or nothing:
sizes, timestamps (for CreateTime topics), every record, control and transactional flags, idempotent
producer sequences (a duplicate batch is answered with the original's offsets) and, for a batch that
starts a transaction, the producer's verification guard (KIP-890). Nothing here touches a file; it is
apart from `log.py` because it is the largest single step of the produce path and has its own rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_validation import RecordsCheck
from moldau.storage.log_config import LogConfig
from moldau.storage.producer_state import BatchMetadata, ProducerStateManager
from moldau.storage.record_checks import check_batch_records

__all__ = ["LeaderAppendChecks", "check_own_sizes"]


def check_own_sizes(batches: Sequence[tuple[BatchHeader, memoryview]], config: LogConfig) -> int:
    """The checks of a batch the broker built itself (`PartitionLog.append(own=True)`): the log's size limits,
    with the errors a client's batch gets. Its records, CRC, flags and timestamps are right by construction, and it
    has no producer id, so nothing else of `LeaderAppendChecks` applies. Returns the total bytes."""
    total_bytes = 0
    for header, _ in batches:
        if header.producer_id >= 0:
            raise ValueError("a batch with a producer id needs the producer checks")
        size = header.total_size
        if size > config.max_message_bytes:
            raise KafkaError(ErrorCode.message_too_large,
                             f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
        total_bytes += size
    if total_bytes > config.segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"{total_bytes} bytes exceed segment.bytes {config.segment_bytes}")
    return total_bytes


@dataclass(slots=True, eq=False)  # made per append: not frozen, whose __init__ costs several times as much
class LeaderAppendChecks:
    """The checks of one append, with what they need from the log."""

    config: LogConfig
    producers: ProducerStateManager
    verify_transactions: bool  # the log's `transaction_verification`
    partition: str  # `<topic>-<partition>`, for messages
    records_check: RecordsCheck | None = None  # the topic's schema validation, where it has one

    def validate(self, batches: Sequence[tuple[BatchHeader, memoryview]], now_ms: int, check_create_time: bool,
                 verification_guard: object | None = None) -> tuple[int, BatchMetadata | None]:
        """(total bytes, duplicate batch or None); raises KafkaError on rejection."""
        config = self.config
        total_bytes = 0
        pending: dict[int, BatchHeader] | None = None
        for header, view in batches:
            size = header.total_size
            if size > config.max_message_bytes:
                raise KafkaError(ErrorCode.message_too_large,
                                 f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
            if header.is_control:
                raise KafkaError(ErrorCode.invalid_record, "control batches are not accepted from clients")
            if header.is_transactional and not header.has_producer_id:
                raise KafkaError(ErrorCode.invalid_record, "a transactional batch needs a producer id")
            if check_create_time:
                self._check_timestamps(header, now_ms)
            # Every record, as Kafka's LogValidator: structure, count, offsets, sizes, keys, timestamps.
            check_batch_records(header, view, config, now_ms if check_create_time else None, self.partition,
                                self.records_check)
            total_bytes += size
            if header.producer_id >= 0:
                decision = self.producers.check(header, pending)
                if decision.duplicate_of is not None:
                    return total_bytes, decision.duplicate_of
                self._check_verified(header, pending, verification_guard)
                if pending is None:
                    pending = {}
                pending[header.producer_id] = header
        if total_bytes > config.segment_bytes:
            raise KafkaError(ErrorCode.record_list_too_large,
                             f"{total_bytes} bytes exceed segment.bytes {config.segment_bytes}")
        return total_bytes, None

    def _check_verified(self, header: BatchHeader, pending: dict[int, BatchHeader] | None,
                        guard: object | None) -> None:
        """A batch starting a transaction needs the producer's current guard: without one, or with one a marker
        or a newer epoch dropped since, the coordinator's answer may be stale (KIP-890)."""
        if not self.verify_transactions or not self.producers.starts_transaction(header, pending):
            return
        if guard is None or guard is not self.producers.current_guard(header.producer_id):
            raise KafkaError(ErrorCode.invalid_txn_state,
                             f"producer {header.producer_id}: the transaction on {self.partition} "
                             "was not verified or the verification expired")

    def _check_timestamps(self, header: BatchHeader, now_ms: int) -> None:
        # Without decoding records, the header's first and max timestamps stand for the batch.
        config = self.config
        lowest = now_ms - config.message_timestamp_before_max_ms
        highest = now_ms + config.message_timestamp_after_max_ms
        for ts in (header.base_timestamp, header.max_timestamp):
            if ts != -1 and not lowest <= ts <= highest:
                raise KafkaError(ErrorCode.invalid_timestamp,
                                 f"timestamp {ts} is outside [{lowest}, {highest}]")
