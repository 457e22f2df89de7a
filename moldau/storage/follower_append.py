"""What a follower does with batches replicated from its leader: store them, or refuse them.

`plan_follower_append` decides, from the batches alone and the log's end offset, and touches no file;
`PartitionLog.append_as_follower` then writes what it decided. The batches are the leader's bytes, already
split and CRC-checked by the fetcher, with their final offsets, leader epochs and timestamps. The rules:

* The first base offset must be at or above the log end offset, and offsets must increase from batch to
  batch. Gaps are legal: the leader's log may be compacted.
* Every record is walked even though the leader validated it: a corrupt batch is never stored here,
  whatever the leader holds.
* A control batch's marker is parsed before anything is written, so a marker the leader stored has the
  same effect on producer state here, and an unreadable one refuses the whole append.
* All or nothing: one refused batch refuses the append, and the whole append must fit in one segment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader
from moldau.protocol.record_validation import validate_batch_records
from moldau.storage.control_batch import TransactionMarker, parse_marker
from moldau.storage.segment import AppendedBatch

__all__ = ["FollowerAppend", "no_batches_error", "plan_follower_append"]


@dataclass(frozen=True, slots=True)
class FollowerAppend:
    """An accepted follower append: where each batch goes, its marker (None for a data batch), the leader
    epoch entries it brings and its size."""

    stored: tuple[AppendedBatch, ...]
    markers: tuple[TransactionMarker | None, ...]
    epochs: tuple[tuple[int, int], ...]  # (leader epoch, start offset) per batch
    total_bytes: int


def no_batches_error() -> KafkaError:
    return KafkaError(ErrorCode.unknown_server_error, "no record batches to append as follower")


def plan_follower_append(batches: Sequence[tuple[BatchHeader, memoryview]], log_end_offset: int,
                         segment_bytes: int, partition: str) -> FollowerAppend:
    """Accept `batches` for a log ending at `log_end_offset`, or raise KafkaError: UNKNOWN_SERVER_ERROR (no
    batches, or offsets that overlap the log or go backwards), CORRUPT_MESSAGE (a batch whose length is not
    its header's), a record validation error, RECORD_LIST_TOO_LARGE (more than `segment_bytes`)."""
    if not batches:
        raise no_batches_error()
    expected = log_end_offset
    total_bytes = 0
    stored: list[AppendedBatch] = []
    markers: list[TransactionMarker | None] = []
    for header, view in batches:
        if header.base_offset < expected:
            raise KafkaError(
                ErrorCode.unknown_server_error,
                f"{partition}: follower append of a batch at offset {header.base_offset} "
                f"below the expected offset {expected} (log end offset {log_end_offset})",
            )
        if len(view) != header.total_size:
            raise KafkaError(ErrorCode.corrupt_message,
                             f"batch at offset {header.base_offset} is not {header.total_size} bytes long")
        validate_batch_records(view, header, from_client=False)
        stored.append(AppendedBatch(header.base_offset, header.next_offset, header.max_timestamp,
                                    header.total_size))
        markers.append(parse_marker(view) if header.is_control and header.has_producer_id else None)
        total_bytes += header.total_size
        expected = header.next_offset
    if total_bytes > segment_bytes:
        raise KafkaError(ErrorCode.record_list_too_large,
                         f"{total_bytes} bytes exceed segment.bytes {segment_bytes}")
    epochs = tuple((header.partition_leader_epoch, header.base_offset) for header, _ in batches)
    return FollowerAppend(tuple(stored), tuple(markers), epochs, total_bytes)
