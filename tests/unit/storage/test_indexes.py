from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from moldau.storage.offset_index import CorruptIndexError, OffsetIndex
from moldau.storage.time_index import TimeIndex


def _offset_index(tmp_path: Path, base: int = 100, max_bytes: int = 1024) -> OffsetIndex:
    index = OffsetIndex(str(tmp_path / "x.index"), base, max_bytes)
    index.reset()
    return index


def test_offset_lookup_returns_greatest_entry_at_or_below(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    for i in range(1, 50):
        index.append(100 + i * 10, i * 1000)
    assert index.lookup(99) == (100, 0)
    assert index.lookup(105) == (100, 0)
    assert index.lookup(110) == (110, 1000)
    assert index.lookup(119) == (110, 1000)
    assert index.lookup(10**12) == (590, 49000)
    assert index.lookup_position(4500) == 4000
    assert index.lookup_position(5) == 0


def test_offset_index_file_format_and_reload(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    index.append(103, 400)
    index.append(110, 900)
    index.flush()
    data = (tmp_path / "x.index").read_bytes()
    assert data == struct.pack(">IIII", 3, 400, 10, 900)  # Kafka's layout: relative offset, position
    again = OffsetIndex(str(tmp_path / "x.index"), 100, 1024)
    again.load(log_size_bytes=1000)
    assert again.entries == 2 and again.lookup(111) == (110, 900)


def test_offset_index_truncate(tmp_path: Path) -> None:
    index = _offset_index(tmp_path)
    for i in range(1, 6):
        index.append(100 + i * 10, i * 100)
    index.flush()
    index.truncate_to(130)
    assert index.entries == 2 and index.lookup(1000) == (120, 200)
    assert os.path.getsize(tmp_path / "x.index") == 16
    index.append(125, 250)
    index.write_pending()
    assert os.path.getsize(tmp_path / "x.index") == 24


@pytest.mark.parametrize("damage", ["ragged", "decreasing", "beyond_log"])
def test_offset_index_sanity_check(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "x.index"
    entries = {"ragged": struct.pack(">III", 1, 2, 3),
               "decreasing": struct.pack(">IIII", 5, 100, 3, 200),
               "beyond_log": struct.pack(">II", 5, 5000)}[damage]
    path.write_bytes(entries)
    with pytest.raises(CorruptIndexError):
        OffsetIndex(str(path), 0, 1024).load(log_size_bytes=1000)


def test_offset_index_full(tmp_path: Path) -> None:
    index = _offset_index(tmp_path, max_bytes=16)
    index.append(101, 10)
    assert not index.is_full
    index.append(102, 20)
    assert index.is_full


def test_time_index_lookup_never_skips_a_match(tmp_path: Path) -> None:
    index = TimeIndex(str(tmp_path / "x.timeindex"), 100, 1200)
    index.reset()
    # (T, B): every batch before offset B has timestamps <= T.
    index.maybe_append(1000, 110)
    index.maybe_append(1000, 120)  # not news: ignored
    index.maybe_append(2000, 130)
    assert index.entries == 2
    assert index.lookup(500) == 100
    assert index.lookup(1000) == 100  # a batch before 110 may hold exactly 1000
    assert index.lookup(1001) == 110
    assert index.lookup(5000) == 130
    assert index.first_offset_reaching(2000) == 130
    assert index.first_offset_reaching(2001) is None
    assert index.last_timestamp() == 2000


def test_time_index_format_reload_and_truncate(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    index = TimeIndex(str(path), 100, 1200)
    index.reset()
    index.maybe_append(1000, 110)
    index.maybe_append(2000, 130)
    index.flush()
    assert path.read_bytes() == struct.pack(">qIqI", 1000, 10, 2000, 30)
    again = TimeIndex(str(path), 100, 1200)
    again.load()
    assert again.lookup(3000) == 130
    again.truncate_to(120)
    assert again.entries == 1 and os.path.getsize(path) == 12
    path.write_bytes(struct.pack(">qIqI", 2000, 10, 1000, 30))
    with pytest.raises(CorruptIndexError):
        TimeIndex(str(path), 100, 1200).load()
