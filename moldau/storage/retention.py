"""What retention and DeleteRecords may delete: decisions only, with no files touched.

`PartitionLog.apply_retention` and `delete_records_before` ask these functions which oldest segments may go
(or where the log start moves) and then delete them. Keeping the rules apart makes them testable without a
log on disk and keeps the log's own code to the mechanics. The rules, as in Kafka:

* Only whole segments go, oldest first, stopping at the first one that must stay.
* Nothing at or above the high watermark goes: a segment goes only when the high watermark has reached
  the next segment's base offset (for the active segment, the log end offset).
* An empty active segment is never deleted (a log always keeps one segment).
* By time, a segment goes when its largest timestamp (`retention_timestamp_ms`) is more than
  retention.ms old; by size, while deleting it leaves the log at or above retention.bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = [
    "DELETE_TO_HIGH_WATERMARK",
    "RetainedSegment",
    "beyond_retention_size",
    "deletable_prefix",
    "new_start_for_delete_records",
    "past_retention_time",
    "segments_below_start",
]

# DeleteRecords' "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1


class RetainedSegment(Protocol):
    """What the retention rules look at in a segment."""

    @property
    def size_bytes(self) -> int: ...

    @property
    def retention_timestamp_ms(self) -> int: ...


SegmentRule = Callable[[RetainedSegment], bool]


def deletable_prefix(segments: Sequence[RetainedSegment], bases: Sequence[int], log_end_offset: int,
                     high_watermark: int, deletable: SegmentRule) -> int:
    """How many of the oldest `segments` (base offsets `bases`) may go: those before the first one that
    `deletable` refuses, that reaches above the high watermark, or that is an empty active segment.
    `deletable` is asked oldest first and only about segments below the high watermark (the size rule
    counts what it has already allowed)."""
    count = 0
    for i, segment in enumerate(segments):
        is_last = i == len(segments) - 1
        if is_last and segment.size_bytes == 0:
            break
        upper = log_end_offset if is_last else bases[i + 1]
        if high_watermark < upper or not deletable(segment):
            break
        count += 1
    return count


def past_retention_time(now_ms: int, retention_ms: int) -> SegmentRule:
    """Retention by time: the segment's newest record is older than retention_ms."""
    return lambda segment: now_ms - segment.retention_timestamp_ms > retention_ms


def beyond_retention_size(total_bytes: int, retention_bytes: int) -> SegmentRule:
    """Retention by size, for a log of `total_bytes`: a segment may go while the log without it (and
    without those allowed before it) still holds at least retention_bytes. Stateful: ask oldest first."""
    excess = total_bytes - retention_bytes

    def deletable(segment: RetainedSegment) -> bool:
        nonlocal excess
        if excess - segment.size_bytes < 0:
            return False
        excess -= segment.size_bytes
        return True

    return deletable


def segments_below_start(bases: Sequence[int], log_start_offset: int) -> int:
    """How many of the oldest segments hold only offsets below the log start: those whose successor
    starts at or below it. The last segment always stays."""
    count = 0
    while count + 1 < len(bases) and bases[count + 1] <= log_start_offset:
        count += 1
    return count


def new_start_for_delete_records(offset: int, high_watermark: int, log_start_offset: int) -> int | None:
    """The log start offset DeleteRecords(`offset`) asks for (-1: the high watermark), or None when it would
    not move (at or below the current one). Raises KafkaError(OFFSET_OUT_OF_RANGE) beyond the high
    watermark or for a negative offset."""
    if offset == DELETE_TO_HIGH_WATERMARK:
        offset = high_watermark
    if offset < 0 or offset > high_watermark:
        raise KafkaError(ErrorCode.offset_out_of_range,
                         f"offset {offset} is beyond the high watermark {high_watermark}")
    return None if offset <= log_start_offset else offset
