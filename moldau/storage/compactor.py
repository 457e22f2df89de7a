"""The heavy half of log compaction: from an immutable snapshot of a log's old segments, write cleaned ones.

`compact(job, cancelled)` runs on the cleaner thread and touches no `PartitionLog` or `LogSegment`: the job
names files (with their inode, checked on open), offsets and settings captured on the event loop. It:

1. builds an `OffsetMap` (key -> latest offset) over the dirty part [first_dirty_offset, end_offset),
   stopping early at a batch boundary when the map is full; `clean_end_offset` is where mapping stopped;
2. groups the segments below `clean_end_offset` (from the log start) into runs whose total size fits in
   segment.bytes and whose offsets fit in an index's 32-bit relative offsets;
3. rewrites each group into `<first base>.log.cleaned` plus freshly built `.index.cleaned`,
   `.timeindex.cleaned` and `.txnindex.cleaned`, all fsynced. A group that is a single segment and loses
   nothing is skipped.

A record goes when a later record of its key exists below `clean_end_offset` (the map says so), when it
has no key (invalid in a compacted log, as Kafka treats it), when it belongs to an aborted transaction
(`job.aborted`, from the `.txnindex` entries), or when it is a tombstone in a batch whose delete horizon
has passed. Aborted records are never mapped, so they cannot supersede a committed record of the same key;
the cleaner only gets segments below the last stable offset, so every transaction there is decided. A
tombstone that stays in a batch without a horizon gets one: its batch is rewritten with horizon = now +
delete.retention.ms (KIP-534), so every tombstone survives at least delete.retention.ms after its first
cleaning. Records at or beyond `clean_end_offset` always stay.

Batches keep their base offset and last offset (see `batch_rewrite`); a batch losing every record is
dropped, except the last batch of a producer still known to the partition, kept empty so idempotent
producer state survives a restart. Batches nothing changes are copied byte for byte. A batch that cannot
be decoded is kept as it is and not mapped: cleaning never loses data it cannot read.

Transaction markers (Kafka's `CleanedTransactionMetadata`). Walking the batches in offset order, each
producer's transactional data batches belong to its open transaction, which its next marker closes
(`_OpenTransactions`). A marker below `clean_end_offset` whose transaction has no batch left in the output
(every record superseded, or aborted and removed; a batch kept empty for producer state counts as left)
goes like a tombstone: the first cleaning that finds it so rewrites it with a delete horizon, and a
cleaning after the horizon drops it, so a consumer that read the transaction's records within
delete.retention.ms still sees its marker. The marker that is the last batch of a producer still known to
the partition stays, as the empty batches do. Markers at or beyond `clean_end_offset` and control records
that are not markers stay as they are.

Each cleaned segment gets a transaction index of its own: the `.txnindex` entries of the group's segments
whose abort marker stays. An entry tells a read_committed consumer to drop the producer's transactional
batches from the first offset until it meets the abort marker, so an entry whose marker went would hide the
producer's later, committed records; an entry whose marker stays is harmless even once its records went.
The loop deletes the producer-state snapshots at or below the group's last removed marker before swapping
it in (`CleanedGroup.last_removed_marker`): a snapshot taken inside such a transaction would make a
restart replay it as ongoing, with no marker left to end it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from moldau.protocol.errors import KafkaError
from moldau.protocol.record_batch import INT32_MAX, BatchHeader, InvalidBatch, iter_batch_headers, parse_header
from moldau.protocol.record_codec import StoredRecord, decode_batch
from moldau.storage.batch_rewrite import delete_horizon_ms, empty_batch, rebuild_batch
from moldau.storage.control_batch import TransactionMarker, parse_marker
from moldau.storage.io_throttle import IoThrottle
from moldau.storage.offset_index import OffsetIndex
from moldau.storage.offset_map import OffsetMap
from moldau.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    read_exactly,
    segment_path,
)
from moldau.storage.segment_swap import cleaned_path, remove_cleaned
from moldau.storage.time_index import TimeIndex
from moldau.storage.transaction_index import AbortedTxn, encode_entries

__all__ = ["CleanedGroup", "CleanerIo", "CompactionCancelled", "CompactionJob", "CompactionResult",
           "SegmentSnapshot", "compact"]

log = logging.getLogger(__name__)

DEFAULT_READ_CHUNK_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CleanerIo:
    """How a cleaning reads and writes: its read size (`log.cleaner.io.buffer.size`'s share of one cleaning) and
    the throttle every cleaning shares (`log.cleaner.io.max.bytes.per.second`; None: unthrottled)."""

    read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES
    throttle: IoThrottle | None = None

    def done(self, nbytes: int, cancelled: threading.Event) -> None:
        """Count `nbytes` read or written; may sleep, until the rate is met or the cleaner stops."""
        if self.throttle is not None:
            self.throttle.observe(nbytes, cancelled.wait)


class CompactionCancelled(Exception):
    """The cleaner is stopping, or the snapshot no longer matches the files; nothing was swapped."""


@dataclass(frozen=True, slots=True)
class SegmentSnapshot:
    """A non-active segment as it was when the job was prepared."""

    base_offset: int
    end_offset: int  # the next segment's base offset: every offset of this segment lies below it
    size_bytes: int
    file_id: tuple[int, int]  # (st_dev, st_ino) of the .log file


@dataclass(frozen=True, slots=True)
class CompactionJob:
    """Everything the cleaner thread needs, captured on the event loop; immutable."""

    directory: str
    segments: tuple[SegmentSnapshot, ...]  # from the log start, consecutive, all below end_offset
    first_dirty_offset: int
    end_offset: int  # the first uncleanable offset
    now_ms: int
    delete_retention_ms: int
    producer_last_offsets: Mapping[int, int]  # producer id -> last offset of its last batch
    segment_bytes: int
    index_interval_bytes: int
    max_index_bytes: int
    map_memory_bytes: int
    # producer id -> (first offset, marker offset) of each of its aborted transactions in the range
    aborted: Mapping[int, tuple[tuple[int, int], ...]]
    # the `.txnindex` entries of each segment, index-aligned with `segments`
    txn_entries: tuple[tuple[AbortedTxn, ...], ...]
    map_load_factor: float = 1.0  # how full a cleaning fills its map (log.cleaner.io.buffer.load.factor)

    def is_aborted(self, header: BatchHeader) -> bool:
        """Whether a data batch belongs to an aborted transaction."""
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last for first, last in self.aborted.get(header.producer_id, ()))


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    """One cleaned segment written next to the log, replacing `job.segments[first:first + count]`."""

    first: int
    count: int
    base_offset: int
    size_bytes: int
    last_removed_marker: int = -1  # the offset of the last transaction marker it dropped; -1 when none


@dataclass(frozen=True, slots=True)
class CompactionResult:
    groups: tuple[CleanedGroup, ...]
    clean_end_offset: int  # the first dirty offset for the next cleaning
    earliest_delete_horizon_ms: int  # of tombstones and markers left in the rewritten range; -1 when none
    bytes_read: int
    bytes_written: int
    records_removed: int
    markers_removed: int = 0


def compact(job: CompactionJob, cancelled: threading.Event, io: CleanerIo = CleanerIo()) -> CompactionResult:
    """Write the cleaned segments of `job`; on any exception no `.cleaned` file is left behind."""
    written: list[CleanedGroup] = []
    try:
        return _compact(job, cancelled, io, written)
    except BaseException:
        for group in written:
            remove_cleaned(job.directory, group.base_offset)
        raise


def _compact(job: CompactionJob, cancelled: threading.Event, io: CleanerIo,
             written: list[CleanedGroup]) -> CompactionResult:
    offset_map, clean_end = _build_offset_map(job, cancelled, io)
    walk = _Walk(job, offset_map, clean_end, cancelled, io)
    for first, count in _groups(job, clean_end):
        base = job.segments[first].base_offset
        # Reserve the name first, so the cleanup in `compact` also covers a half-written group.
        written.append(CleanedGroup(first, count, base, 0))
        size, changed = _write_group(walk, first, count)
        if changed:
            written[-1] = CleanedGroup(first, count, base, size, max(walk.removed_markers, default=-1))
        else:
            written.pop()
            remove_cleaned(job.directory, base)
        walk.removed_markers.clear()
    stats = walk.stats
    return CompactionResult(tuple(written), clean_end, stats.earliest_horizon, stats.bytes_read,
                            stats.bytes_written, stats.records_removed, stats.markers_removed)


# -- reading -----------------------------------------------------------------------------------------


def _batches(job: CompactionJob, index: int, cancelled: threading.Event,
             io: CleanerIo) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every batch of the snapshot's segment `index`, read through a fresh fd checked against the snapshot."""
    snapshot = job.segments[index]
    try:
        fd = os.open(segment_path(job.directory, snapshot.base_offset, LOG_SUFFIX), os.O_RDONLY)
    except FileNotFoundError as e:
        raise CompactionCancelled(f"segment {snapshot.base_offset} is gone") from e
    try:
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != snapshot.file_id or stat.st_size < snapshot.size_bytes:
            raise CompactionCancelled(f"segment {snapshot.base_offset} changed")
        yield from _read_batches(fd, snapshot.size_bytes, cancelled, io)
    finally:
        os.close(fd)


def _read_batches(fd: int, size: int, cancelled: threading.Event,
                  io: CleanerIo) -> Iterator[tuple[BatchHeader, bytes]]:
    position = 0
    while position < size:
        if cancelled.is_set():
            raise CompactionCancelled("the cleaner is stopping")
        chunk = read_exactly(fd, position, min(io.read_chunk_bytes, size - position))
        io.done(len(chunk), cancelled)
        consumed = 0
        for at, header in iter_batch_headers(chunk, 0, len(chunk)):
            if at + header.total_size > len(chunk):
                break
            yield header, chunk[at : at + header.total_size]
            consumed = at + header.total_size
        if consumed == 0:  # a batch larger than the chunk
            header = parse_header(chunk)
            batch = read_exactly(fd, position, header.total_size)
            io.done(len(batch), cancelled)
            yield header, batch
            consumed = header.total_size
        position += consumed


# -- the offset map ----------------------------------------------------------------------------------


def _build_offset_map(job: CompactionJob, cancelled: threading.Event, io: CleanerIo) -> tuple[OffsetMap, int]:
    """The map over the dirty part and the offset where mapping stopped (end_offset when complete)."""
    offset_map = OffsetMap(job.map_memory_bytes, job.map_load_factor)
    for index, snapshot in enumerate(job.segments):
        if snapshot.end_offset <= job.first_dirty_offset:
            continue
        for header, data in _batches(job, index, cancelled, io):
            if header.last_offset < job.first_dirty_offset or header.is_control or job.is_aborted(header):
                continue
            # Always map at least one batch, so a cleaning makes progress whatever the budget.
            if len(offset_map) and not offset_map.has_room_for(header.records_count):
                return offset_map, header.base_offset
            for record in _records_or_none(header, data) or ():
                if record.key is not None and record.offset >= job.first_dirty_offset:
                    offset_map.put(record.key, record.offset)
    return offset_map, job.end_offset


def _records_or_none(header: BatchHeader, data: bytes) -> list[StoredRecord] | None:
    try:
        return decode_batch(data)
    except KafkaError as e:
        log.warning("keeping undecodable batch at offset %d as it is: %s", header.base_offset, e.message)
        return None


# -- grouping ----------------------------------------------------------------------------------------


def _groups(job: CompactionJob, clean_end: int) -> Iterator[tuple[int, int]]:
    """(first index, count) of consecutive segments below `clean_end` that one cleaned segment can hold."""
    segments = [s for s in job.segments if s.base_offset < clean_end]
    first = 0
    while first < len(segments):
        count, size = 1, segments[first].size_bytes
        while first + count < len(segments):
            following = segments[first + count]
            if size + following.size_bytes > job.segment_bytes or \
                    following.end_offset - 1 - segments[first].base_offset > INT32_MAX:
                break
            size += following.size_bytes
            count += 1
        yield first, count
        first += count


# -- writing -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Stats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_removed: int = 0
    markers_removed: int = 0
    earliest_horizon: int = -1

    def note_horizon(self, horizon_ms: int) -> None:
        if self.earliest_horizon < 0 or horizon_ms < self.earliest_horizon:
            self.earliest_horizon = horizon_ms


class _OpenTransactions:
    """The producers whose transaction the walk is in (a transactional data batch seen, its marker not yet),
    each with whether a batch of that transaction stays in the cleaned log."""

    def __init__(self) -> None:
        self._kept: dict[int, bool] = {}

    def add_batch(self, producer_id: int, kept: bool) -> None:
        self._kept[producer_id] = self._kept.get(producer_id, False) or kept

    def close(self, producer_id: int) -> bool:
        """End the producer's transaction at its marker; returns whether a batch of it stays."""
        return self._kept.pop(producer_id, False)


@dataclass(slots=True)
class _Walk:
    """One pass over the groups in offset order: what every batch's fate depends on."""

    job: CompactionJob
    offset_map: OffsetMap
    clean_end: int
    cancelled: threading.Event
    io: CleanerIo
    stats: _Stats = field(default_factory=_Stats)
    transactions: _OpenTransactions = field(default_factory=_OpenTransactions)
    removed_markers: list[int] = field(default_factory=list)  # offsets, of the group being written

    def last_batch_of_producer(self, header: BatchHeader) -> bool:
        return header.has_producer_id and self.job.producer_last_offsets.get(header.producer_id) == header.last_offset


class _SegmentWriter:
    """Appends batches to a `.cleaned` segment and builds its indexes like `LogSegment` does."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int, max_index_bytes: int) -> None:
        self.size = 0
        self._directory = directory
        self._base_offset = base_offset
        self._interval = index_interval_bytes
        self._fd = os.open(cleaned_path(directory, base_offset, LOG_SUFFIX),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._index = OffsetIndex(cleaned_path(directory, base_offset, INDEX_SUFFIX), base_offset, max_index_bytes)
        self._time_index = TimeIndex(cleaned_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset,
                                     max_index_bytes)
        self._index.reset()
        self._time_index.reset()
        self._since_index = 0
        self._max_timestamp = -1
        self._next_offset = base_offset

    def append(self, data: bytes) -> None:
        header = parse_header(data)  # of the batch as written: a rewritten one may have a smaller max timestamp
        if self._since_index > self._interval and not self._index.is_full:
            self._index.append(header.base_offset, self.size)
            if not self._time_index.is_full:
                self._time_index.maybe_append(self._max_timestamp, header.base_offset)
            self._since_index = 0
        view = memoryview(data)
        while view:
            view = view[os.pwrite(self._fd, view, self.size + len(data) - len(view)) :]
        self.size += len(data)
        self._since_index += len(data)
        self._max_timestamp = max(self._max_timestamp, header.max_timestamp)
        self._next_offset = header.next_offset

    def finish(self, txn_entries: list[AbortedTxn]) -> None:
        """Seal (the time index's last entry names the largest timestamp), write the transaction index (empty
        too: the swap then knows the segment has none) and fsync everything."""
        try:
            if self.size:
                self._time_index.maybe_append(self._max_timestamp, self._next_offset)
            _write_synced(cleaned_path(self._directory, self._base_offset, TXN_INDEX_SUFFIX),
                          encode_entries(txn_entries))
            os.fsync(self._fd)
            self._index.flush()
            self._time_index.flush()
        finally:
            os.close(self._fd)

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


def _write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _write_group(walk: _Walk, first: int, count: int) -> tuple[int, bool]:
    """Write one cleaned segment; returns (its size, whether it differs from the group's files)."""
    job = walk.job
    writer = _SegmentWriter(job.directory, job.segments[first].base_offset, job.index_interval_bytes,
                            job.max_index_bytes)
    changed = count > 1
    try:
        for index in range(first, first + count):
            for header, data in _batches(job, index, walk.cancelled, walk.io):
                walk.stats.bytes_read += len(data)
                cleaned = _clean_batch(walk, header, data)
                if cleaned is not data:
                    changed = True
                if cleaned is not None:
                    writer.append(cleaned)
                    walk.io.done(len(cleaned), walk.cancelled)
        writer.finish(_kept_txn_entries(walk, first, count))
    except BaseException:
        writer.abandon()
        raise
    walk.stats.bytes_written += writer.size
    return writer.size, changed


def _kept_txn_entries(walk: _Walk, first: int, count: int) -> list[AbortedTxn]:
    """The group's `.txnindex` entries whose abort marker stays, once each, in marker order. Only entries
    whose marker lies in the group count: an older interrupted swap may have copied a later segment's."""
    start, end = walk.job.segments[first].base_offset, walk.job.segments[first + count - 1].end_offset
    removed = set(walk.removed_markers)
    kept = {e.last_offset: e for index in range(first, first + count) for e in walk.job.txn_entries[index]
            if start <= e.last_offset < end and e.last_offset not in removed}
    return [kept[offset] for offset in sorted(kept)]


def _clean_batch(walk: _Walk, header: BatchHeader, data: bytes) -> bytes | None:
    """The batch to write for `data` (`data` itself when unchanged), or None to drop it."""
    if header.is_control:
        return _clean_control_batch(walk, header, data)
    cleaned = _clean_data_batch(walk, header, data)
    if header.is_transactional:
        walk.transactions.add_batch(header.producer_id, kept=cleaned is not None)
    return cleaned


def _clean_data_batch(walk: _Walk, header: BatchHeader, data: bytes) -> bytes | None:
    job, stats = walk.job, walk.stats
    records = _records_or_none(header, data)
    if records is None:
        return data
    horizon = delete_horizon_ms(header)
    if job.is_aborted(header) and header.last_offset < walk.clean_end:
        kept = []  # read_committed consumers never see them; their index entries stay with their marker
    else:
        kept = [r for r in records if _retain(r, walk.offset_map, walk.clean_end, horizon, job.now_ms)]
    stats.records_removed += len(records) - len(kept)
    if not kept:
        if not walk.last_batch_of_producer(header):
            return None
        return data if not records else empty_batch(header)
    has_tombstone = any(r.value is None for r in kept)
    if has_tombstone:
        horizon = horizon if horizon is not None else job.now_ms + job.delete_retention_ms
        stats.note_horizon(horizon)
    if len(kept) == len(records) and (not has_tombstone or delete_horizon_ms(header) is not None):
        return data
    return rebuild_batch(header, kept, horizon if has_tombstone else None)


def _clean_control_batch(walk: _Walk, header: BatchHeader, data: bytes) -> bytes | None:
    """A marker goes once its transaction left nothing behind and its delete horizon passed."""
    if header.last_offset >= walk.clean_end:
        walk.transactions.close(header.producer_id)
        return data
    marker = _marker_or_none(header, data)
    if marker is None:
        return data  # another control record, or one it cannot read: kept, and the transaction stays open
    if walk.transactions.close(header.producer_id) or walk.last_batch_of_producer(header):
        return data
    job = walk.job
    horizon = delete_horizon_ms(header)
    if horizon is None:
        records = _records_or_none(header, data)
        if records is None:
            return data
        horizon = job.now_ms + job.delete_retention_ms
        walk.stats.note_horizon(horizon)
        return rebuild_batch(header, records, horizon)
    if horizon > job.now_ms:
        walk.stats.note_horizon(horizon)
        return data
    walk.stats.markers_removed += 1
    walk.removed_markers.append(header.base_offset)
    return None


def _marker_or_none(header: BatchHeader, data: bytes) -> TransactionMarker | None:
    try:
        return parse_marker(data)
    except InvalidBatch as e:
        log.warning("keeping unreadable control batch at offset %d as it is: %s", header.base_offset, e.message)
        return None


def _retain(record: StoredRecord, offset_map: OffsetMap, clean_end: int, horizon_ms: int | None,
            now_ms: int) -> bool:
    if record.offset >= clean_end:
        return True
    if record.key is None:
        return False
    if offset_map.get(record.key) > record.offset:
        return False
    return record.value is not None or horizon_ms is None or horizon_ms > now_ms
