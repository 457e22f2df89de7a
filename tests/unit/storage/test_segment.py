from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from moldau.protocol.record_batch import assign_offsets, parse_header, split_batches
from moldau.storage.segment import AppendedBatch, LogSegment, segment_path
from tests.unit.storage.batches import START_MS, decode, make_batch, values


def _segment_with(tmp_path: Path, batches: int, interval: int = 0) -> tuple[LogSegment, list[int]]:
    segment = LogSegment.create(str(tmp_path), 100, 1 << 20, START_MS)
    segment.index_interval_bytes = interval
    positions, offset = [], 100
    for i in range(batches):
        [(header, view)] = split_batches(make_batch(values(3, size=20), timestamp_ms=START_MS + i))
        positions.append(segment.size_bytes)
        segment.append(assign_offsets(view, offset, 0, None),
                       [AppendedBatch(offset, offset + 3, header.max_timestamp, header.total_size)],
                       header.total_size)
        offset += 3
    return segment, positions


def test_file_names_and_append(tmp_path: Path) -> None:
    segment, _ = _segment_with(tmp_path, 5)
    assert segment_path(str(tmp_path), 100, ".log").endswith("00000000000000000100.log")
    assert os.path.getsize(tmp_path / "00000000000000000100.log") == segment.size_bytes
    assert segment.next_offset == 115 and segment.largest_timestamp == START_MS + 4
    assert segment.offset_index.entries == 4  # every batch but the first, with interval 0


def test_read_slices_can_be_sent_with_sendfile(tmp_path: Path) -> None:
    segment, positions = _segment_with(tmp_path, 5)
    found = segment.read(107, max_bytes=10**6, max_position=positions[4], min_one_batch=False)
    assert found is not None and found.position == positions[2] and found.size == positions[4] - positions[2]
    target = tmp_path / "out"
    with open(target, "wb") as out:
        assert os.sendfile(out.fileno(), found.fd, found.position, found.size) == found.size
    assert target.read_bytes() == found.read_bytes() == segment.read_bytes(found.position, found.size)
    assert [o for o, _ in decode(target.read_bytes())] == list(range(106, 112))
    assert segment.read(115, 100, segment.size_bytes, True) is None


def test_recover_rebuilds_indexes_and_cuts_the_tail(tmp_path: Path) -> None:
    segment, positions = _segment_with(tmp_path, 6, interval=1)
    entries = segment.offset_index.entries
    segment.close()
    with open(tmp_path / "00000000000000000100.log", "ab") as f:
        f.write(b"\x00" * 30)
    reopened = LogSegment.open(str(tmp_path), 100, 1 << 20, START_MS)
    reopened.index_interval_bytes = 1
    assert reopened.recover() == 30
    assert reopened.offset_index.entries == entries
    assert reopened.next_offset == 118
    assert reopened.find_batch(110) == (positions[3], parse_header(reopened.read_bytes(positions[3], 61)))


def test_truncate_to(tmp_path: Path) -> None:
    segment, positions = _segment_with(tmp_path, 6)
    size = segment.size_bytes
    assert segment.truncate_to(110) == size - positions[3]  # the batch 109..111 goes whole
    assert segment.size_bytes == positions[3] == os.path.getsize(tmp_path / "00000000000000000100.log")
    assert segment.next_offset == 109
    assert segment.largest_timestamp == START_MS + 2
    assert segment.offset_index.lookup(10**9)[0] == 106


def _fsynced_during(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> int:
    count = 0
    fsync = os.fsync

    def counting(fd: int) -> None:
        nonlocal count
        count += 1
        fsync(fd)

    monkeypatch.setattr(os, "fsync", counting)
    action()
    monkeypatch.setattr(os, "fsync", fsync)
    return count


def test_flush_skips_what_was_made_durable_elsewhere_unless_it_changed_since(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    segment, _ = _segment_with(tmp_path, 4)
    segment.seal()
    segment.mark_durable(segment.changes)  # as the worker thread's fsyncs after a roll tell the log
    assert _fsynced_during(monkeypatch, segment.flush) == 0
    segment.mark_durable(segment.changes - 1)  # fsyncs handed over before the last change
    assert _fsynced_during(monkeypatch, segment.flush) == 3  # the log file and both indexes
    assert _fsynced_during(monkeypatch, segment.flush) == 0  # nothing changed since


def test_a_segment_cut_and_refilled_after_its_fsync_is_fsynced_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Same size, same offsets, other bytes (a follower replacing a divergent batch): not the durable state."""
    segment, _ = _segment_with(tmp_path, 4)
    segment.seal()
    durable = segment.changes
    size, end = segment.size_bytes, segment.next_offset
    segment.truncate_to(109)
    [(header, view)] = split_batches(make_batch(values(3, size=20), timestamp_ms=START_MS + 9))
    segment.append(assign_offsets(view, 109, 1, None), [AppendedBatch(109, 112, header.max_timestamp,
                                                                      header.total_size)], header.total_size)
    assert (segment.size_bytes, segment.next_offset) == (size, end)
    segment.mark_durable(durable)
    assert _fsynced_during(monkeypatch, segment.flush) >= 1
