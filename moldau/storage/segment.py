"""One log segment: `<base offset>.log` plus its `.index`, `.timeindex` and `.txnindex` (aborted
transactions, `moldau.storage.transaction_index`; usually absent), in Apache Kafka's layout.

The `.log` file holds whole v2 record batches back to back, with offsets assigned and increasing. File
names carry the segment's base offset padded to 20 digits. Invariants:

* `size_bytes` is the end of the last whole, valid batch; bytes beyond it (a failed write) are never read
  and are overwritten by the next append, because appends write at an explicit position (`pwritev`).
* Index entries always point at batch boundaries below `size_bytes`.
* Derived facts (next offset, largest timestamp) are computed lazily for segments loaded from disk: a
  clean start reads only each segment's tail from its last index entry, and only when asked.

Reads hand out `FileSlice`s (fd, position, size) so a fetch can `os.sendfile`/`os.pread` them; a deleted
segment's fd is closed through a caller-supplied function, so the log can delay the close until slices
in flight are done. A segment is owned by one `PartitionLog` and is not thread-safe.

Why this file is longer than ~600 lines: appends, reads, recovery and truncation of a segment all keep the
same private state consistent (the lazily computed tail, the valid size, the three indexes); taking one of
them out would mean another module reaching into that state.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NamedTuple

from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    MAGIC_V2,
    BatchHeader,
    InvalidBatch,
    crc_matches,
    iter_batch_headers,
    parse_header,
)
from moldau.protocol.record_codec import decode_batch
from moldau.protocol.record_validation import validate_batch_records
from moldau.storage.offset_index import CorruptIndexError, OffsetIndex
from moldau.storage.time_index import TimeIndex
from moldau.storage.transaction_index import TXN_INDEX_SUFFIX, TransactionIndex
from moldau.text import ascii_digits

log = logging.getLogger(__name__)

__all__ = [
    "DELETED_SUFFIX",
    "INDEX_SUFFIX",
    "LOG_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "AppendedBatch",
    "DeferredCloser",
    "FileSlice",
    "LogSegment",
    "PinnedFile",
    "segment_log_base",
    "segment_path",
    "write_all",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# A segment retention deleted, until its fd is closed and the file unlinked off the event loop.
DELETED_SUFFIX = ".deleted"

# Header scans read this much at a time: index entries are ~4 KiB apart, so one read usually suffices.
_SCAN_CHUNK_BYTES = 16 * 1024
# Recovery checks CRCs of whole batches, so it reads larger chunks.
_RECOVERY_CHUNK_BYTES = 4 * 1024 * 1024
# Bytes recovery cut for corruption are kept beside the segment, in `<segment>.log.corrupt-<byte position>`.
QUARANTINE_INFIX = ".corrupt-"
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_BASE_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_LAST_OFFSET_DELTA_POS = 23


def segment_path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, f"{base_offset:020d}{suffix}")


def segment_log_base(name: str, suffix: str = LOG_SUFFIX) -> int | None:
    """The base offset a segment's log file name (`<digits>.log`, or with `suffix`) holds, else None."""
    stem = name[:-len(suffix)]
    return int(stem) if name.endswith(suffix) and ascii_digits(stem) else None


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`size` bytes at `position` of an open file: whole batches ready for sendfile or pread.

    Valid while the log is open and for `file_delete_delay_ms` after its segment is deleted.
    """

    fd: int
    position: int
    size: int

    def read_bytes(self) -> bytes:
        return read_exactly(self.fd, self.position, self.size)

    def pinned(self) -> PinnedFile:
        """A descriptor of this slice's file that stays valid for as long as it is referenced."""
        return PinnedFile(self.fd)


class PinnedFile:
    """A duplicate of a segment's descriptor, closed when the last reference to it goes.

    A fetch answered with sendfile reads its slice when the connection gets to send it, which a slow consumer can
    put off past `file_delete_delay_ms`; by then the segment may be deleted, its descriptor closed and the number
    reused for another file. The duplicate keeps the file itself open (a deleted file's bytes stay readable).
    """

    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = os.dup(fd)

    def __del__(self) -> None:
        _close_quietly(self.fd)


class AppendedBatch(NamedTuple):
    """What a segment needs to know about a batch it stores (the bytes themselves go in `pieces`)."""

    base_offset: int
    next_offset: int
    max_timestamp: int
    size_bytes: int


class _Doomed(NamedTuple):
    deadline_ms: int
    fd: int
    paths: tuple[str, ...]  # `.deleted` files to unlink with the fd's close


class DeferredCloser:
    """Closes file descriptors of deleted segments (and unlinks their `.deleted` files) only after `delay_ms`,
    on a background thread.

    A fetch may still be sending from a `FileSlice` of a segment that retention just deleted; closing at
    once could let the kernel reuse the fd number for another file. The last close of a deleted file is
    also when the file system frees its blocks, work that grows with the segment's size and must not stall
    the event loop, so due closes and unlinks run on one worker thread (as Kafka deletes `.deleted` files
    asynchronously). The owner calls `run(now_ms)` periodically and `close_all()` on shutdown.
    """

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._pending: list[_Doomed] = []
        self._reaper: ThreadPoolExecutor | None = None

    def close_later(self, fd: int, now_ms: int, paths: Sequence[str] = ()) -> None:
        self._pending.append(_Doomed(now_ms + self.delay_ms, fd, tuple(paths)))

    def run(self, now_ms: int) -> None:
        due = [d for d in self._pending if d.deadline_ms <= now_ms]
        if not due:
            return
        self._pending = [d for d in self._pending if d.deadline_ms > now_ms]
        if self._reaper is None:
            self._reaper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="segment-delete")
        self._reaper.submit(_reap, due)

    def close_all(self) -> None:
        """Close and unlink everything pending now, after what the worker already has."""
        pending, self._pending = self._pending, []
        if self._reaper is not None:
            self._reaper.shutdown(wait=True)
            self._reaper = None
        _reap(pending)


def _reap(doomed: Sequence[_Doomed]) -> None:
    for item in doomed:
        for path in item.paths:
            _remove_quietly(path)
        _close_quietly(item.fd)


class _Tail(NamedTuple):
    next_offset: int
    max_timestamp: int
    max_timestamp_offset: int | None
    bytes_since_index: int


class LogSegment:
    """A `.log` file with its sparse indexes; see the module docstring for invariants."""

    def __init__(
        self, directory: str, base_offset: int, fd: int, max_index_bytes: int, created_ms: int
    ) -> None:
        self._directory = directory
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.index_interval_bytes = 4096
        self._fd = fd
        self._size = os.fstat(fd).st_size
        self.offset_index = OffsetIndex(segment_path(directory, base_offset, INDEX_SUFFIX), base_offset,
                                        max_index_bytes)
        self.time_index = TimeIndex(segment_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset,
                                    max_index_bytes)
        self.txn_index = TransactionIndex(segment_path(directory, base_offset, TXN_INDEX_SUFFIX))
        self.corruption: str | None = None  # why recovery stopped early at a corrupt batch, if it did
        # None until known: computed from the tail on first use (see `_ensure_tail`).
        self._next_offset: int | None = None
        self._max_timestamp = -1
        self._max_timestamp_offset: int | None = None
        self._bytes_since_index = 0
        self._first_timestamp: int | None = None
        # Closed, deleted or replaced by compaction: its fd may be closed and its number reused (drop-behind asks).
        self.retired = False
        # Counts the changes to the log file and its offset and time indexes (appends, cuts, rebuilds, sealing), so
        # that `flush` can skip what another thread already made durable (`mark_durable`). -1: never flushed.
        self._changes = 0
        self._durable_changes = -1

    # -- construction --------------------------------------------------------------------------------

    @classmethod
    def create(
        cls, directory: str, base_offset: int, max_index_bytes: int, now_ms: int
    ) -> LogSegment:
        """A new, empty segment (any leftover files with the same base offset are emptied)."""
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            _remove_quietly(segment_path(directory, base_offset, suffix))
        path = segment_path(directory, base_offset, LOG_SUFFIX)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        segment = cls(directory, base_offset, fd, max_index_bytes, now_ms)
        segment.offset_index.reset()
        segment.time_index.reset()
        segment._next_offset = base_offset
        segment._first_timestamp = -1  # a segment created by this process ages from its creation
        return segment

    @classmethod
    def open(cls, directory: str, base_offset: int, max_index_bytes: int, now_ms: int) -> LogSegment:
        """An existing segment; nothing is read until needed."""
        fd = os.open(segment_path(directory, base_offset, LOG_SUFFIX), os.O_RDWR)
        return cls(directory, base_offset, fd, max_index_bytes, now_ms)

    # -- facts ---------------------------------------------------------------------------------------

    @property
    def directory(self) -> str:
        return self._directory

    @directory.setter
    def directory(self, directory: str) -> None:
        """Follow a rename of the partition directory: later index writes go to the new place."""
        self._directory = directory
        self.offset_index.path = segment_path(directory, self.base_offset, INDEX_SUFFIX)
        self.time_index.path = segment_path(directory, self.base_offset, TIME_INDEX_SUFFIX)
        self.txn_index.path = segment_path(directory, self.base_offset, TXN_INDEX_SUFFIX)

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size_bytes(self) -> int:
        return self._size

    @property
    def next_offset(self) -> int:
        """One past the last offset stored here (the base offset when empty)."""
        self._ensure_tail()
        assert self._next_offset is not None
        return self._next_offset

    @property
    def largest_timestamp(self) -> int:
        """The largest batch max timestamp, -1 when empty or without timestamps."""
        self._ensure_tail()
        return self._max_timestamp

    @property
    def rolling_base_ms(self) -> int:
        """Start of the segment's age for time-based rolling: the first batch's timestamp when the
        segment was loaded from disk with a valid one, else the clock time at creation/load."""
        if self._first_timestamp is None:
            self._first_timestamp = -1
            if self._size >= BATCH_HEADER_SIZE:
                self._first_timestamp = parse_header(os.pread(self._fd, BATCH_HEADER_SIZE, 0)).max_timestamp
        return self._first_timestamp if self._first_timestamp >= 0 else self.created_ms

    @property
    def retention_timestamp_ms(self) -> int:
        largest = self.largest_timestamp
        return largest if largest >= 0 else self.created_ms

    @property
    def indexes_full(self) -> bool:
        self._ensure_indexes()
        return self.offset_index.is_full or self.time_index.is_full

    def must_roll_before(self, append_bytes: int, last_offset: int, now_ms: int, segment_bytes: int,
                         segment_ms: int) -> bool:
        """Whether an append of `append_bytes` ending at `last_offset` needs a new segment (Kafka's
        rules: size, age, full indexes, relative offsets beyond i32). An empty segment never rolls."""
        size = self._size
        return size > 0 and (
            size + append_bytes > segment_bytes
            or now_ms - self.rolling_base_ms > segment_ms
            or last_offset - self.base_offset > INT32_MAX
            or self.indexes_full
        )

    def can_hold_offset(self, offset: int) -> bool:
        """Relative offsets are u32 in the indexes; Kafka keeps them within i32."""
        return offset - self.base_offset <= INT32_MAX

    # -- lazy loading --------------------------------------------------------------------------------

    def _ensure_indexes(self) -> None:
        if self.offset_index.loaded and self.time_index.loaded:
            return
        try:
            self.offset_index.load(self._size)
            self.time_index.load()
        except CorruptIndexError:
            self.recover()

    def _ensure_tail(self) -> None:
        if self._next_offset is not None:
            return
        self._ensure_indexes()
        if self._next_offset is not None:  # a rebuild during _ensure_indexes computed it
            return
        try:
            tail = self._scan_tail()
        except InvalidBatch:
            self.recover()
            return
        self._next_offset, self._max_timestamp, self._max_timestamp_offset, self._bytes_since_index = tail

    def _scan_tail(self) -> _Tail:
        """Facts about the batches after the last index entry, combined with what the indexes know."""
        last_indexed, position = self.offset_index.lookup(2**63 - 1)
        next_offset = last_indexed
        max_ts, max_ts_offset = self.time_index.last_timestamp(), None
        for _, header in self.iter_headers(position, self._size):
            next_offset = header.next_offset
            if header.max_timestamp > max_ts:
                max_ts, max_ts_offset = header.max_timestamp, header.base_offset
        return _Tail(next_offset, max_ts, max_ts_offset, self._size - position)

    # -- appending -----------------------------------------------------------------------------------

    def append(self, pieces: Sequence[bytes | memoryview], batches: Sequence[AppendedBatch],
               size_bytes: int) -> None:
        """Write `pieces` (exactly the bytes of `batches`, `size_bytes` in total) at the end.

        Raises OSError with nothing changed in memory; partial bytes on disk lie beyond `size_bytes`.
        """
        self._ensure_tail()
        try:
            write_all(self._fd, pieces, self._size, size_bytes)
        except OSError:
            self._cut_garbage()
            raise
        position = self._size
        for batch in batches:
            self._track(position, batch.base_offset, batch.next_offset, batch.max_timestamp, batch.size_bytes)
            position += batch.size_bytes
        self._size = position
        self._changes += 1

    def _track(self, position: int, base_offset: int, next_offset: int, max_timestamp: int,
               size_bytes: int) -> None:
        """Index bookkeeping for a batch stored at `position` (append and recovery share it)."""
        if self._bytes_since_index > self.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(base_offset, position)
            if not self.time_index.is_full:
                self.time_index.maybe_append(self._max_timestamp, base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += size_bytes
        if max_timestamp > self._max_timestamp:
            self._max_timestamp, self._max_timestamp_offset = max_timestamp, base_offset
        self._next_offset = next_offset

    def _cut_garbage(self) -> None:
        # Best effort: if this fails too, the next pwritev at `size_bytes` overwrites the garbage, and
        # recovery would cut it.
        self._changes += 1
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)

    def seal(self) -> None:
        """The segment stops being active: record its largest timestamp in the time index."""
        self._ensure_tail()
        self._changes += 1
        if self._next_offset is not None and self._next_offset > self.base_offset:
            self.time_index.maybe_append(self._max_timestamp, self._next_offset)
        self.offset_index.write_pending()
        self.time_index.write_pending()

    # -- reading -------------------------------------------------------------------------------------

    def iter_headers(self, start_position: int, end_position: int) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch starting in [start_position, end_position), read in chunks.

        Both bounds must be batch boundaries (or `end_position` the segment size)."""
        position = start_position
        while end_position - position >= BATCH_HEADER_SIZE:
            buf = os.pread(self._fd, min(_SCAN_CHUNK_BYTES, end_position - position), position)
            resume = position
            for relative, header in iter_batch_headers(buf, 0, len(buf)):
                yield position + relative, header
                resume = position + relative + header.total_size
            if resume == position:
                return  # a short read: nothing more on disk
            position = resume

    def find_batch(self, offset: int, end_position: int | None = None) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset >= `offset`, before `end_position`."""
        self._ensure_indexes()
        _, position = self.offset_index.lookup(offset)
        end = self._size if end_position is None else end_position
        # The hot read path: decode two fields per skipped batch, the full header only for the match.
        fd = self._fd
        while end - position >= BATCH_HEADER_SIZE:
            buf = os.pread(fd, min(_SCAN_CHUNK_BYTES, end - position), position)
            available, at = len(buf), 0
            while available - at >= BATCH_HEADER_SIZE:
                base_offset, batch_length = _BASE_AND_LENGTH.unpack_from(buf, at)
                if base_offset + _INT32.unpack_from(buf, at + _LAST_OFFSET_DELTA_POS)[0] >= offset:
                    return position + at, parse_header(buf, at)
                if batch_length < BATCH_HEADER_SIZE - LOG_OVERHEAD:
                    raise InvalidBatch(ErrorCode.corrupt_message, f"batch size {batch_length} at {position + at}")
                at += batch_length + LOG_OVERHEAD
            if at == 0:
                return None
            position += at
        return None

    def position_of(self, offset: int) -> int:
        """Position of the batch holding `offset` or the first after it; `size_bytes` when none."""
        if self._next_offset is not None and offset >= self._next_offset:
            return self._size
        found = self.find_batch(offset)
        return self._size if found is None else found[0]

    def read(self, start_offset: int, max_bytes: int, max_position: int,
             min_one_batch: bool) -> FileSlice | None:
        """Whole batches from the one holding `start_offset`, ending at or before `max_position`
        (a batch boundary), at most `max_bytes` unless `min_one_batch` lets the first batch through.

        None when no batch here reaches `start_offset`; a zero-size slice when the first batch does
        not fit in `max_bytes` and `min_one_batch` is off.
        """
        found = self.find_batch(start_offset, max_position)
        if found is None:
            return None
        position, header = found
        first_end = position + header.total_size
        limit = min(max_position, position + max(max_bytes, 0))
        if first_end > limit:
            return FileSlice(self._fd, position, header.total_size if min_one_batch else 0)
        end = limit if limit == max_position else self._last_batch_end(first_end, limit)
        return FileSlice(self._fd, position, end - position)

    def _last_batch_end(self, from_position: int, limit: int) -> int:
        """The largest batch boundary <= `limit`, at least `from_position` (itself a boundary)."""
        end = position = max(from_position, self.offset_index.lookup_position(limit))
        fd = self._fd
        # Only the length fields matter here; each batch costs one unpack.
        while limit - position >= LOG_OVERHEAD:
            buf = os.pread(fd, min(_SCAN_CHUNK_BYTES, limit - position), position)
            available, at = len(buf), 0
            while available - at >= LOG_OVERHEAD:
                batch_end = position + at + _INT32.unpack_from(buf, at + 8)[0] + LOG_OVERHEAD
                if batch_end > limit or batch_end <= position + at:
                    return end
                end = batch_end
                at = batch_end - position
            if at == 0:
                return end
            position += at
        return end

    def read_bytes(self, position: int, size: int) -> bytes:
        return read_exactly(self._fd, position, size)

    def find_offset_by_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `min_offset` with timestamp >= target."""
        if self.largest_timestamp < timestamp_ms:
            return None
        start = max(self.time_index.lookup(timestamp_ms), min_offset)
        _, position = self.offset_index.lookup(start)
        for pos, header in self.iter_headers(position, self._size):
            if header.last_offset < start or header.max_timestamp < timestamp_ms:
                continue
            found = self._first_record(pos, header, lambda ts: ts >= timestamp_ms, start)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the segment's largest timestamp."""
        max_ts = self.largest_timestamp
        if max_ts < 0:
            return None
        found = self._locate_max_timestamp_batch(max_ts)
        if found is None:
            return None
        position, header = found
        record = self._first_record(position, header, lambda ts: ts == max_ts, header.base_offset)
        # A producer may claim a max timestamp no record has; then the batch stands for it.
        return record if record is not None else (header.last_offset, max_ts)

    def _locate_max_timestamp_batch(self, max_ts: int) -> tuple[int, BatchHeader] | None:
        start_position = 0
        if self._max_timestamp_offset is not None:
            start_position = self.offset_index.lookup(self._max_timestamp_offset)[1]
        else:
            reaching = self.time_index.first_offset_reaching(max_ts)
            if reaching is not None:
                # The time index gained that timestamp at `reaching`, so the batch lies after the
                # previous offset-index entry.
                start_position = self.offset_index.lookup(reaching - 1)[1]
        for position, header in self.iter_headers(start_position, self._size):
            if header.max_timestamp == max_ts:
                return position, header
        return None

    def _first_record(self, position: int, header: BatchHeader, accept: Callable[[int], bool],
                      min_offset: int) -> tuple[int, int] | None:
        """Decode one batch (off the hot path) for the first record >= `min_offset` that `accept`s."""
        if header.timestamp_type_is_log_append:
            # Every record of a LogAppendTime batch carries the batch's max timestamp.
            if accept(header.max_timestamp):
                return max(header.base_offset, min_offset), header.max_timestamp
            return None
        for record in decode_batch(self.read_bytes(position, header.total_size)):
            if record.offset >= min_offset and accept(record.timestamp):
                return record.offset, record.timestamp
        return None

    # -- recovery and truncation ---------------------------------------------------------------------

    def recover(self) -> int:
        """Re-validate every batch (sizes, magic, CRC, increasing offsets), rebuild both indexes and
        cut the file after the last valid batch. Returns the number of bytes cut."""
        self._changes += 1
        self.offset_index.reset()
        self.time_index.reset()
        self._next_offset, self._max_timestamp, self._max_timestamp_offset = self.base_offset, -1, None
        self._bytes_since_index = 0
        file_size = os.fstat(self._fd).st_size
        valid_end = 0
        for position, header in self._valid_batches(file_size):
            self._track(position, header.base_offset, header.next_offset, header.max_timestamp,
                        header.total_size)
            valid_end = position + header.total_size
        self._size = valid_end
        if valid_end < file_size:
            if self.corruption is not None:
                self._quarantine_tail(valid_end, file_size)
            os.ftruncate(self._fd, valid_end)
        try:
            self.offset_index.write_pending()
            self.time_index.write_pending()
        except OSError as exc:
            # The rebuilt indexes are whole in memory; on a full disk they reach their files with the next
            # write that succeeds. The log must still open, so that its records can be read.
            log.warning("segment %d: rebuilt indexes not written yet: %s", self.base_offset, exc)
        return file_size - valid_end

    def _valid_batches(self, file_size: int) -> Iterator[tuple[int, BatchHeader]]:
        position, expected_offset = 0, self.base_offset
        buf, buf_start = b"", 0
        while file_size - position >= BATCH_HEADER_SIZE:
            offset_in_buf = position - buf_start
            if len(buf) - offset_in_buf < BATCH_HEADER_SIZE:
                buf, buf_start, offset_in_buf = self._read_chunk(position, file_size, 0), position, 0
            header = parse_header(buf, offset_in_buf)
            size = header.total_size
            if header.magic != MAGIC_V2 or size < BATCH_HEADER_SIZE or size > file_size - position:
                return
            if len(buf) - offset_in_buf < size:
                buf, buf_start, offset_in_buf = self._read_chunk(position, file_size, size), position, 0
            view = memoryview(buf)[offset_in_buf : offset_in_buf + size]
            if (header.base_offset < expected_offset or header.last_offset_delta < 0
                    or not self.can_hold_offset(header.last_offset) or not crc_matches(view, header)):
                return
            try:
                # Whole and CRC-valid, but do its records hold together? An older Moldau stored such batches
                # unchecked, and a consumer would stop at one for good.
                validate_batch_records(view, header, from_client=False)
            except InvalidBatch as exc:
                self.corruption = f"batch at offset {header.base_offset} (byte {position}): {exc.message}"
                return
            yield position, header
            position += size
            expected_offset = header.next_offset

    def _quarantine_tail(self, position: int, file_size: int) -> None:
        """Keep the bytes recovery cuts for a corrupt batch in `<segment>.log.corrupt-<position>`, for a person
        to inspect: recovery must not serve them, but it need not destroy them either."""
        path = f"{segment_path(self.directory, self.base_offset, LOG_SUFFIX)}{QUARANTINE_INFIX}{position}"
        with open(path, "wb") as out:
            for start in range(position, file_size, _RECOVERY_CHUNK_BYTES):
                out.write(read_exactly(self._fd, start, min(_RECOVERY_CHUNK_BYTES, file_size - start)))
        log.error("segment %d: %s; %d bytes from byte %d on moved to %s", self.base_offset, self.corruption,
                  file_size - position, position, path)

    def quarantine(self) -> None:
        """Set this whole segment aside (after a corrupt batch in an earlier one): its log file is kept as
        `<segment>.log.corrupt-0`, its indexes are deleted."""
        log_path = segment_path(self.directory, self.base_offset, LOG_SUFFIX)
        os.rename(log_path, f"{log_path}{QUARANTINE_INFIX}0")
        self.delete()

    def _read_chunk(self, position: int, file_size: int, at_least: int) -> bytes:
        return read_exactly(self._fd, position, min(max(_RECOVERY_CHUNK_BYTES, at_least),
                                                    file_size - position))

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns the bytes removed."""
        self._ensure_tail()
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        removed = self._size - position
        self._changes += 1
        os.ftruncate(self._fd, position)
        self._size = position
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self._next_offset = None
        self._max_timestamp_offset = None
        self._ensure_tail()
        return removed

    # -- durability and lifetime ---------------------------------------------------------------------

    @property
    def changes(self) -> int:
        """A count of this segment's changes, for `mark_durable`."""
        return self._changes

    def mark_durable(self, changes: int) -> None:
        """The log file and its offset and time indexes were fsynced elsewhere (the worker thread, after a roll)
        as they were at `changes`: `flush` has nothing to do for them unless the segment changed since."""
        self._durable_changes = changes

    def flush(self) -> None:
        """fsync the log file and persist the indexes, unless they are durable as they are (`mark_durable`)."""
        if self._durable_changes != self._changes:
            changes = self._changes
            os.fsync(self._fd)
            if self.offset_index.loaded:
                self.offset_index.flush()
            if self.time_index.loaded:
                self.time_index.flush()
            self._durable_changes = changes
        self.txn_index.flush()

    def close(self) -> None:
        self.retired = True
        if self.offset_index.loaded:
            self.offset_index.write_pending()
        if self.time_index.loaded:
            self.time_index.write_pending()
        if os.fstat(self._fd).st_size > self._size:
            self._cut_garbage()
        _close_quietly(self._fd)

    def mark_deleted(self) -> list[str]:
        """Rename the segment's files to `<name>.deleted` and return their new paths, for the caller to unlink
        later, off the event loop (with the fd's close, when the blocks are freed). A crash before then leaves
        `.deleted` files, which the next open removes."""
        self.retired = True
        renamed = []
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            path = segment_path(self.directory, self.base_offset, suffix)
            with contextlib.suppress(FileNotFoundError):
                os.rename(path, path + DELETED_SUFFIX)
                renamed.append(path + DELETED_SUFFIX)
        self.txn_index.forget()
        return renamed

    def delete(self, close_fd: Callable[[int], None] = os.close) -> None:
        """Remove the files now; the fd is handed to `close_fd` (which may close it later)."""
        self.retired = True
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            _remove_quietly(segment_path(self.directory, self.base_offset, suffix))
        self.txn_index.delete()
        close_fd(self._fd)

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size_bytes={self._size})"


def write_all(fd: int, pieces: Sequence[bytes | memoryview], position: int, total_bytes: int) -> None:
    """Write `pieces` contiguously at `position` with as few `pwritev` calls as the kernel allows."""
    if len(pieces) <= _IOV_MAX and os.pwritev(fd, pieces, position) == total_bytes:
        return
    _write_all_slow(fd, pieces, position)


def _write_all_slow(fd: int, pieces: Sequence[bytes | memoryview], position: int) -> None:
    # A short write or more pieces than IOV_MAX: rare, so joining is acceptable here.
    data = memoryview(b"".join(pieces))
    while data:
        written = os.pwrite(fd, data, position)
        data, position = data[written:], position + written


def read_exactly(fd: int, position: int, size: int) -> bytes:
    data = os.pread(fd, size, position)
    if len(data) == size:
        return data
    parts = [data]
    got = len(data)
    while got < size:
        more = os.pread(fd, size - got, position + got)
        if not more:
            raise OSError(f"unexpected end of file at {position + got}")
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
