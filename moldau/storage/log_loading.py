"""Opening a partition directory: which files are segments, recovery after a crash, and rebuilding the
state derived from the batches (leader epoch cache, producer state, aborted-transaction indexes).

This is the code that runs once per start and never on the produce or fetch path, which is why it lives
apart from `PartitionLog`: the log calls these functions from `open` (and, for producer state, after a
truncation) with the state they need, and keeps the results.

Recovery re-validates segments from the one holding the recovery point. A torn tail (a crash mid-write) is
cut and the later segments, written after the tear, are deleted. A corrupt batch is different: its bytes
go to `<segment>.log.corrupt-<position>` and later segments are quarantined whole (`LogSegment.quarantine`),
because they may hold the only copy of later records.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence

from moldau.protocol.record_batch import BatchHeader, InvalidBatch
from moldau.storage.control_batch import TransactionMarker, parse_marker
from moldau.storage.leader_epoch_cache import LeaderEpochCache
from moldau.storage.log_common import aborted_entry, segment_index
from moldau.storage.producer_state import ProducerStateManager
from moldau.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, LogSegment
from moldau.storage.segment_swap import complete_interrupted_swaps
from moldau.text import ascii_digits

log = logging.getLogger(__name__)

__all__ = [
    "STRAY_SUFFIXES",
    "headers_from",
    "load_leader_epochs",
    "load_producer_state",
    "loaded_offsets",
    "open_segments",
    "recover_segments",
    "scan_directory",
]

# Leftovers of interrupted operations: never part of a consistent log.
STRAY_SUFFIXES = (".tmp", ".deleted", ".swap", ".cleaned")


def open_segments(directory: str, max_index_bytes: int, now_ms: int) -> list[LogSegment]:
    """The directory's segments, oldest first, after finishing a compaction swap a crash interrupted."""
    swapped = complete_interrupted_swaps(directory)
    segments = []
    for base in scan_directory(directory):
        segment = LogSegment.open(directory, base, max_index_bytes, now_ms)
        if base in swapped:
            segment.recover()  # its index files went with the interrupted swap
        segments.append(segment)
    return segments


def scan_directory(directory: str) -> list[int]:
    """Base offsets of the segments; removes leftovers and indexes without a log file."""
    bases, index_files = [], []
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if name.endswith(STRAY_SUFFIXES):
            _remove_quietly(path)
            continue
        stem, _, suffix = name.partition(".")
        if not ascii_digits(stem):
            continue
        if "." + suffix == LOG_SUFFIX:
            bases.append(int(stem))
        elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            index_files.append((int(stem), path))
    known = set(bases)
    for base, path in index_files:
        if base not in known:
            _remove_quietly(path)
    return sorted(bases)


def recover_segments(segments: Sequence[LogSegment], bases: Sequence[int], recovery_point: int,
                     name: str) -> tuple[int | None, int]:
    """Re-validate segments from the one holding the recovery point, emptying their transaction indexes
    for the producer-state replay to rebuild. Returns (base offset of the first re-validated segment, or
    None without segments; how many segments remain). Segments past a cut are deleted or quarantined on
    disk here; the caller drops them from its lists."""
    if not segments:
        return None, 0
    start = segment_index(bases, recovery_point)
    for i in range(start, len(segments)):
        segment = segments[i]
        segment.txn_index.reset()
        truncated = segment.recover()
        if truncated:
            log.warning("%s: recovery cut %d bytes of torn or corrupt tail from segment %d",
                        name, truncated, segment.base_offset)
        if i < len(segments) - 1:
            segment.seal()
        if truncated:
            _discard(segments[i + 1 :], corrupt=segment.corruption is not None)
            return bases[start], i + 1
    return bases[start], len(segments)


def _discard(later: Sequence[LogSegment], *, corrupt: bool) -> None:
    """After a torn tail (a crash) later segments are stale; after a corrupt batch they may hold the only
    copy of later records, so they are set aside, not deleted."""
    for segment in later:
        if corrupt:
            segment.quarantine()
        else:
            segment.delete()


def loaded_offsets(first_base: int, log_end_offset: int, checkpointed_start: int | None,
                   checkpointed_high_watermark: int | None) -> tuple[int, int]:
    """(log start offset, high watermark) of a log just opened, from its checkpoints: each is kept within
    the segments' offsets, because a crash may have lost data the checkpoints counted (a missing log start
    checkpoint means the first segment's base offset, a missing high watermark the log end offset)."""
    start = min(max(checkpointed_start or first_base, first_base), log_end_offset)
    if checkpointed_high_watermark is None:
        return start, log_end_offset
    return start, min(max(checkpointed_high_watermark, start), log_end_offset)


def load_leader_epochs(directory: str, headers: Callable[[], Iterable[BatchHeader]], log_start_offset: int,
                       log_end_offset: int) -> LeaderEpochCache:
    """The checkpointed cache, cut to the log's offsets; rebuilt from `headers()` (the batch headers from
    the log start) when the file is missing or unreadable (logs written before it existed)."""
    cache = LeaderEpochCache.load(directory)
    if not cache.loaded_from_file and log_end_offset > log_start_offset:
        cache.assign_all((h.partition_leader_epoch, h.base_offset) for h in headers())
        if not cache.loaded_from_file:
            cache.write()  # no batch has an epoch: an empty file spares the next start the scan
        log.info("%s: rebuilt the leader epoch cache: %s", os.path.basename(directory), list(cache.entries))
    # Kept in memory until the next write: every load makes the same cuts again.
    cache.truncate_from_end(log_end_offset, write=False)
    cache.truncate_from_start(log_start_offset, write=False)
    return cache


def load_producer_state(producers: ProducerStateManager, segments: Sequence[LogSegment], bases: Sequence[int],
                        log_start_offset: int, log_end_offset: int, now_ms: int, at_or_below: int | None,
                        name: str) -> None:
    """Newest snapshot at or below the log end (and `at_or_below`), then the batches after it."""
    snapshot = producers.load(log_end_offset, now_ms, at_or_below)
    replay_from = max(snapshot if snapshot is not None else 0, log_start_offset)
    if replay_from < log_end_offset:
        _replay_producers(producers, segments, bases, replay_from)
        # Spare the next start this scan: an optimisation, so a full disk only costs the next start a scan.
        try:
            producers.take_snapshot(log_end_offset)
        except OSError as exc:
            log.warning("%s: producer snapshot not written: %s", name, exc)
    producers.truncate_head(log_start_offset)


def _replay_producers(producers: ProducerStateManager, segments: Sequence[LogSegment], bases: Sequence[int],
                      offset: int) -> None:
    """Apply the batches from `offset` on to producer state, as appends did: ongoing transactions come
    back, and aborts are indexed again (a no-op for entries the indexes already hold)."""
    for segment, position, header in _positioned_headers(segments, bases, offset):
        if header.producer_id < 0:
            continue
        marker = _stored_marker(segment, position, header)
        completed = producers.update(header, header.base_offset, header.last_offset, marker=marker)
        if completed is not None and completed.aborted:
            segment.txn_index.append(aborted_entry(producers, completed))


def headers_from(segments: Sequence[LogSegment], bases: Sequence[int], offset: int) -> Iterator[BatchHeader]:
    """The batch headers from the one holding `offset` to the log end."""
    for _, _, header in _positioned_headers(segments, bases, offset):
        yield header


def _positioned_headers(segments: Sequence[LogSegment], bases: Sequence[int],
                        offset: int) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
    for segment in segments[segment_index(bases, offset) :]:
        start = segment.position_of(offset) if segment.base_offset < offset else 0
        for position, header in segment.iter_headers(start, segment.size_bytes):
            yield segment, position, header


def _stored_marker(segment: LogSegment, position: int, header: BatchHeader) -> TransactionMarker | None:
    if not header.is_control:
        return None
    try:
        return parse_marker(segment.read_bytes(position, header.total_size))
    except InvalidBatch as e:
        log.warning("%s: unreadable control batch at offset %d: %s", segment.directory, header.base_offset, e)
        return None


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
