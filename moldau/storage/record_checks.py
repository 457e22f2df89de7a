"""The record-level checks of a batch about to be appended, with Kafka's per-record errors.

`moldau.protocol.record_validation` walks the records (structure, counts, offsets, sizes, decompression);
this module applies the topic's rules to what the walk found: compacted topics need a key on every record
(INVALID_RECORD), and CreateTime records must lie within `message.timestamp.before.max.ms` /
`message.timestamp.after.max.ms` of the broker's clock (INVALID_TIMESTAMP). Each refusal lists the offending
records by their index in the batch, which Produce v8+ returns as `record_errors`.
"""

from __future__ import annotations

import os

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_codec import decode_batch
from moldau.protocol.record_validation import (
    RecordErrors,
    RecordsCheck,
    RecordsSummary,
    decompress_records,
    validate_batch_records,
)
from moldau.storage.log_config import LogConfig

__all__ = ["check_batch_records"]

NO_TIMESTAMP = -1
# A debug switch for benchmarks only (bench/validation.py measures what the walk costs): never a user config,
# since without the walk a corrupt batch is acknowledged and stops its partition's consumers.
SKIP_FOR_BENCHMARK = os.environ.get("MOLDAU_DEBUG_SKIP_RECORD_WALK") == "1"


def check_batch_records(header: BatchHeader, batch: memoryview, config: LogConfig, now_ms: int | None,
                        topic_partition: str, records_check: RecordsCheck | None = None) -> None:
    """Raise RecordErrors unless every record of this client batch is sound and allowed on this topic, and
    `records_check` (the topic's schema validation) accepts them.

    `now_ms` is None when timestamps are not checked (LogAppendTime topics: the broker sets them).
    """
    if SKIP_FOR_BENCHMARK:
        if records_check is not None:  # the switch skips the walk, never a topic's own checks
            records_check(header, decompress_records(batch, header, 2**31 - 1))
        return
    summary = validate_batch_records(batch, header, from_client=True, max_record_bytes=config.max_message_bytes,
                                     records_check=records_check)
    if config.compact and summary.null_key_indexes:
        message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
        raise RecordErrors(ErrorCode.invalid_record, message, [(i, message) for i in summary.null_key_indexes])
    if now_ms is not None and header.base_timestamp != NO_TIMESTAMP:
        _check_timestamps(header, batch, summary, config, now_ms)


def _check_timestamps(header: BatchHeader, batch: memoryview, summary: RecordsSummary, config: LogConfig,
                      now_ms: int) -> None:
    lowest = now_ms - config.message_timestamp_before_max_ms
    highest = now_ms + config.message_timestamp_after_max_ms
    first = header.base_timestamp + summary.min_timestamp_delta
    last = header.base_timestamp + summary.max_timestamp_delta
    if lowest <= first and last <= highest:
        return
    # Rare: decode the records once more to name each one out of bounds.
    errors = [(i, f"Timestamp {record.timestamp} of message with offset delta {i} is out of range. The "
                  f"timestamp should be within [{lowest}, {highest}]")
              for i, record in enumerate(decode_batch(batch))
              if not lowest <= record.timestamp <= highest]
    raise RecordErrors(ErrorCode.invalid_timestamp, errors[0][1] if errors else "timestamp out of range",
                       errors or [(0, "timestamp out of range")])
