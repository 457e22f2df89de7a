"""The ordered segments of one partition directory, and the operations on them as a set.

`PartitionLog` decides what happens to its segments (roll, retention, truncation, compaction, close); this
class carries it out on the list and the files: it keeps the segments sorted by base offset with a parallel
list of base offsets for lookups, creates new ones, deletes the oldest or the newest, and replaces
compacted ones. It holds no offsets of the log (start, end, high watermark), so it never decides anything
about them. Retention deletes a segment by renaming its files to `.deleted`; its fd is closed and the files
unlinked through the shared `DeferredCloser`, after file_delete_delay_ms and off the event loop, so fetches
already holding a slice of it can finish.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from moldau.storage.log_common import segment_index
from moldau.storage.log_config import LogConfig
from moldau.storage.segment import DeferredCloser, LogSegment

__all__ = ["SegmentList"]


class SegmentList:
    """A partition's segments, oldest first; the last one (the active segment) takes appends."""

    def __init__(self, directory: str, config: LogConfig, closer: DeferredCloser) -> None:
        self.directory = directory
        self.closer = closer
        self._config = config
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []

    # -- lookups -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    @property
    def items(self) -> Sequence[LogSegment]:
        return self._segments

    @property
    def bases(self) -> Sequence[int]:
        return self._bases

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    def holding(self, offset: int) -> LogSegment:
        """The segment holding `offset` (the first one for an offset below them all)."""
        return self._segments[segment_index(self._bases, offset)]

    def from_offset(self, offset: int, end_index: int | None = None) -> list[LogSegment]:
        """The segments from the one holding `offset` on (to `end_index`, exclusive)."""
        return self._segments[segment_index(self._bases, offset) : end_index]

    @property
    def size_bytes(self) -> int:
        return sum(segment.size_bytes for segment in self._segments)

    # -- changes -------------------------------------------------------------------------------------

    def set_config(self, config: LogConfig) -> None:
        self._config = config
        for segment in self._segments:
            segment.index_interval_bytes = config.index_interval_bytes

    def add(self, segment: LogSegment) -> None:
        segment.index_interval_bytes = self._config.index_interval_bytes
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def create(self, base_offset: int, now_ms: int) -> None:
        """Add a new, empty segment at `base_offset` (it becomes the active one)."""
        self.add(LogSegment.create(self.directory, base_offset, self._config.segment_index_bytes, now_ms))

    def replace_active(self, base_offset: int, now_ms: int) -> None:
        """Swap the (empty) active segment for a new one at `base_offset`."""
        replacement = LogSegment.create(self.directory, base_offset, self._config.segment_index_bytes, now_ms)
        self._segments[-1].delete(self.close_later(now_ms))
        self._segments[-1], self._bases[-1] = replacement, base_offset
        replacement.index_interval_bytes = self._config.index_interval_bytes

    def take_first(self, count: int) -> list[LogSegment]:
        """Remove the `count` oldest segments from the list; the caller deletes them (`delete_files`)."""
        taken = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        return taken

    def delete_files(self, segments: Sequence[LogSegment], now_ms: int) -> None:
        """Retention and DeleteRecords: the files are renamed to `.deleted` now and unlinked with the fd's
        close, after file_delete_delay_ms and off the event loop."""
        for segment in segments:
            self.closer.close_later(segment.fd, now_ms, segment.mark_deleted())

    def keep_first(self, count: int, now_ms: int) -> None:
        """Delete every segment after the `count` oldest."""
        for segment in self._segments[count:]:
            segment.delete(self.close_later(now_ms))
        self.forget_after(count)

    def forget_after(self, count: int) -> None:
        """Drop the segments after the `count` oldest from the list only (their files were dealt with)."""
        del self._segments[count:]
        del self._bases[count:]

    def delete_all(self, now_ms: int) -> None:
        for segment in self._segments:
            segment.delete(self.close_later(now_ms))
        self._segments, self._bases = [], []

    def replace(self, old: Sequence[LogSegment], new: LogSegment, now_ms: int) -> None:
        """Put `new` in the place of `old`, consecutive non-active segments whose files were already swapped
        on disk (compaction). Raises ValueError when `old` is not such a run of this list's segments."""
        first = next((i for i, s in enumerate(self._segments) if s is old[0]), -1)
        end = first + len(old)
        if first < 0 or end >= len(self._segments) or \
                any(a is not b for a, b in zip(self._segments[first:end], old, strict=True)):
            raise ValueError("segments to replace are not consecutive non-active segments of this log")
        new.index_interval_bytes = self._config.index_interval_bytes
        self._segments[first:end] = [new]
        self._bases[first:end] = [new.base_offset]
        for segment in old:
            segment.retired = True
            self.closer.close_later(segment.fd, now_ms)

    def rename(self, directory: str) -> None:
        """Follow a rename of the directory (done by the caller); open fds stay valid."""
        self.directory = directory
        for segment in self._segments:
            segment.directory = directory

    def close_later(self, now_ms: int) -> Callable[[int], None]:
        """How a deleted segment closes its fd: after file_delete_delay_ms, so fetches in flight finish."""
        return lambda fd: self.closer.close_later(fd, now_ms)
