"""Finding data in a partition's segments: the slice a fetch sends, and the lookups ListOffsets makes.

These functions only look (no state changes), given the log's segments, their base offsets and offsets;
`PartitionLog` checks the requested offsets, calls them and turns an OSError into KAFKA_STORAGE_ERROR.
They are apart from `log.py` because they are a separate concern from keeping the log (reads never
change it) and the log's file was too long to read with them in it.
"""

from __future__ import annotations

from collections.abc import Sequence

from moldau.storage.log_common import segment_index
from moldau.storage.segment import FileSlice, LogSegment

__all__ = ["max_timestamp_offset", "offset_for_timestamp", "read_slice"]


def read_slice(segments: Sequence[LogSegment], bases: Sequence[int], log_end_offset: int, fetch_offset: int,
               max_bytes: int, min_one_batch: bool, upper: int) -> FileSlice | None:
    """Whole batches from the one holding `fetch_offset`, from a single segment, below offset `upper`;
    None when there are none. Raises OSError."""
    if fetch_offset >= upper:
        return None
    first = segment_index(bases, fetch_offset)
    last = len(segments) - 1
    for i in range(first, last + 1):
        segment = segments[i]
        if segment.base_offset >= upper:
            return None
        # A segment wholly below `upper` is read to its end; else only to the batch holding `upper`.
        if (i < last and bases[i + 1] <= upper) or (i == last and upper >= log_end_offset):
            max_position = segment.size_bytes
        else:
            max_position = segment.position_of(upper)
        found = segment.read(fetch_offset, max_bytes, max_position, min_one_batch)
        if found is not None:
            return found
    return None


def offset_for_timestamp(segments: Sequence[LogSegment], bases: Sequence[int], log_start_offset: int,
                         timestamp_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or after the log start with timestamp >= the target;
    None when there is none. Raises OSError."""
    for i, segment in enumerate(segments):
        if i + 1 < len(segments) and bases[i + 1] <= log_start_offset:
            continue  # wholly below the log start
        if segment.largest_timestamp < timestamp_ms:
            continue
        found = segment.find_offset_by_timestamp(timestamp_ms, log_start_offset)
        if found is not None:
            return found
    return None


def max_timestamp_offset(segments: Sequence[LogSegment]) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record carrying the largest timestamp; None if empty. Raises
    OSError."""
    best: LogSegment | None = None
    for segment in segments:
        if segment.largest_timestamp >= 0 and (best is None or segment.largest_timestamp > best.largest_timestamp):
            best = segment
    return None if best is None else best.max_timestamp_offset()
