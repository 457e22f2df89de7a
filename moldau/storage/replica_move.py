"""Moving a partition's log to another log directory of the same broker (AlterReplicaLogDirs, KIP-113).

The log being moved (the *current* log) keeps serving reads and appends. A *future* log, in the target
directory under `<topic>-<partition>.<hex>-future`, copies it batch by batch at the offsets they carry (the
follower append path, so producer state and leader epochs follow the batches), as Kafka's future replica does.
Once the future log has caught up with the current log's end, the log manager swaps them in one step of the
event loop: nothing can be appended in between, so every acknowledged record is in the log that goes on.

This module holds the copy step and the directory names; `LogManager` owns the logs and does the swap.
"""

from __future__ import annotations

import uuid

from moldau.protocol.record_batch import split_batches
from moldau.storage.log import PartitionLog
from moldau.text import ascii_digits

__all__ = ["FUTURE_SUFFIX", "copy_step", "future_dir_name", "parse_future_dir_name", "realign_future"]

FUTURE_SUFFIX = "-future"


def future_dir_name(topic: str, partition: int) -> str:
    """`<topic>-<partition>.<32 hex digits>-future`, as Kafka names a future replica's directory."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def parse_future_dir_name(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future replica's directory name, else None."""
    if not name.endswith(FUTURE_SUFFIX):
        return None
    stem, dot, unique = name[: -len(FUTURE_SUFFIX)].rpartition(".")
    if not dot or len(unique) != 32:
        return None
    topic, dash, partition = stem.rpartition("-")
    if not dash or not topic or not ascii_digits(partition):
        return None
    return topic, int(partition)


def realign_future(current: PartitionLog, future: PartitionLog) -> None:
    """Make `future` a prefix of `current` again after `current` changed under it.

    The current log may have been truncated (a follower cutting a divergent suffix, possibly then appending
    other batches at the same offsets) or have moved its log start past the future's end (retention,
    DeleteRecords). Leader epochs tell where they diverge, as they tell a follower: the future keeps what
    lies below the end of its latest epoch in the current log."""
    if future.log_end_offset < current.log_start_offset or future.log_start_offset > current.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return
    latest = future.leader_epochs.latest_epoch
    if latest >= 0 and future.log_end_offset > future.log_start_offset:
        epoch, end_offset = current.end_offset_for_epoch(latest)
        if epoch != latest or end_offset < future.log_end_offset:
            future.truncate_to(min(end_offset, future.log_end_offset) if epoch >= 0 else future.log_start_offset)
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(current.log_end_offset)


def copy_step(current: PartitionLog, future: PartitionLog, max_bytes: int) -> int:
    """Copy up to about `max_bytes` of whole batches from `current` to the end of `future`; returns the bytes
    copied (0 when the future has caught up with the current log's end)."""
    realign_future(current, future)
    copied = 0
    while copied < max_bytes and future.log_end_offset < current.log_end_offset:
        found = current.read(future.log_end_offset, max_bytes - copied, True, max_offset=current.log_end_offset)
        data = found.read_bytes()
        if not data:
            break
        batches = split_batches(data, verify_crc=False, from_client=False)
        batches = [(h, v) for h, v in batches if h.next_offset > future.log_end_offset]
        if not batches:
            break
        first = batches[0][0].base_offset
        if first < future.log_end_offset:
            # The current log starts inside this batch (DeleteRecords, retention), and so did the empty future
            # log: start it at the batch instead, as a follower does; the swap moves its log start up again.
            future.truncate_fully_and_start_at(first)
        future.append_as_follower(batches)
        copied += len(data)
    return copied
