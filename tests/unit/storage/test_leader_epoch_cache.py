from __future__ import annotations

import os
from pathlib import Path

import pytest

from moldau.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def _entries(cache: LeaderEpochCache) -> tuple[EpochEntry, ...]:
    """The cache's entries, read anew (mypy would keep what an earlier assert narrowed the attribute to)."""
    return cache.entries


def _cache(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache.load(str(tmp_path))
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


def _file(tmp_path: Path) -> str:
    return (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_assign_keeps_newer_epochs_only(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    assert cache.latest_epoch == -1 and _entries(cache) == ()
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)  # the same epoch again
    assert not cache.assign(0, 7)  # an older one
    assert not cache.assign(-1, 9)  # a batch without a leader
    assert cache.assign(3, 10)
    assert _entries(cache) == (EpochEntry(1, 0), EpochEntry(3, 10)) and cache.latest_epoch == 3


def test_a_newer_epoch_below_existing_start_offsets_drops_them(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.assign(5, 10)
    assert _entries(cache) == (EpochEntry(1, 0), EpochEntry(5, 10))
    with pytest.raises(ValueError):
        cache.assign(6, -1)


def test_file_is_kafkas_text_format_and_written_only_on_change(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    assert not (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    cache.assign(0, 0)
    cache.assign(4, 150)
    assert _file(tmp_path) == "0\n2\n0 0\n4 150\n"
    mtime = os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).st_mtime_ns
    os.utime(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE, ns=(0, 0))
    assert not cache.assign(4, 200)
    assert not cache.truncate_from_end(151)
    assert not cache.truncate_from_start(0)
    assert os.stat(tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).st_mtime_ns == 0 != mtime
    assert not any(name.endswith(".tmp") for name in os.listdir(tmp_path))
    loaded = LeaderEpochCache.load(str(tmp_path))
    assert loaded.entries == _entries(cache) and loaded.loaded_from_file


@pytest.mark.parametrize("content", [
    "", "garbage", "1\n1\n0 0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n2\n3 0\n2 10\n", "0\n1\n-1 0\n", "\xff\n",
])
def test_unreadable_file_loads_empty(tmp_path: Path, content: str) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(content.encode("latin-1"))
    cache = LeaderEpochCache.load(str(tmp_path))
    assert _entries(cache) == () and not cache.loaded_from_file


def test_missing_file_loads_empty(tmp_path: Path) -> None:
    cache = LeaderEpochCache.load(str(tmp_path))
    assert _entries(cache) == () and not cache.loaded_from_file
    cache.write()
    assert _file(tmp_path) == "0\n0\n"
    assert LeaderEpochCache.load(str(tmp_path)).loaded_from_file


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    assert _cache(tmp_path).end_offset_for(0, 100) == UNDEFINED  # empty
    cache = _cache(tmp_path, (2, 10), (4, 30), (7, 60))
    log_end = 90
    assert cache.end_offset_for(-1, log_end) == UNDEFINED
    assert cache.end_offset_for(7, log_end) == (7, 90)  # the latest epoch: the log end offset
    assert cache.end_offset_for(4, log_end) == (4, 60)  # ends where the next one starts
    assert cache.end_offset_for(2, log_end) == (2, 30)
    assert cache.end_offset_for(3, log_end) == (2, 30)  # unknown epoch: the largest below it
    assert cache.end_offset_for(6, log_end) == (4, 60)
    assert cache.end_offset_for(1, log_end) == (1, 10)  # below every entry: the first start offset
    assert cache.end_offset_for(0, log_end) == (0, 10)
    assert cache.end_offset_for(8, log_end) == UNDEFINED  # newer than anything known


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.truncate_from_end(11)
    assert _entries(cache) == (EpochEntry(1, 0), EpochEntry(2, 10))
    assert cache.truncate_from_end(10)
    assert _entries(cache) == (EpochEntry(1, 0),)
    assert not cache.truncate_from_end(-1)
    assert cache.truncate_from_end(0)
    assert _entries(cache) == () and _file(tmp_path) == "0\n0\n"


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert cache.truncate_from_start(5)
    assert _entries(cache) == (EpochEntry(1, 5), EpochEntry(2, 10), EpochEntry(3, 20))
    assert cache.truncate_from_start(15)  # epoch 2 still covers 15..19
    assert _entries(cache) == (EpochEntry(2, 15), EpochEntry(3, 20))
    assert not cache.truncate_from_start(15)
    assert cache.truncate_from_start(20)
    assert _entries(cache) == (EpochEntry(3, 20),)
    assert cache.truncate_from_start(100)
    assert _entries(cache) == (EpochEntry(3, 100),)
    assert LeaderEpochCache.load(str(tmp_path)).entries == _entries(cache)


def test_assign_all_writes_once_and_clear(tmp_path: Path) -> None:
    cache = _cache(tmp_path)
    assert cache.assign_all([(0, 0), (0, 3), (2, 5), (1, 6), (4, 9)])
    assert _entries(cache) == (EpochEntry(0, 0), EpochEntry(2, 5), EpochEntry(4, 9))
    assert not cache.assign_all([(4, 12), (3, 15)])
    assert cache.clear() and not cache.clear()
    assert LeaderEpochCache.load(str(tmp_path)).entries == ()


def test_an_epoch_kept_in_memory_is_written_by_the_next_writing_assign(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0))
    assert cache.assign(2, 5, write=False)
    assert cache.unwritten and _file(tmp_path) == "0\n1\n1 0\n"
    assert cache.end_offset_for(1, 9) == (1, 5)  # answered from memory at once
    assert not cache.assign(2, 7)  # the first append in epoch 2: no new entry, but the file catches up
    assert not cache.unwritten and _file(tmp_path) == "0\n2\n1 0\n2 5\n"


def test_a_cut_kept_in_memory_at_load_is_made_again_by_the_next_load(tmp_path: Path) -> None:
    _cache(tmp_path, (1, 0), (2, 5))
    cache = LeaderEpochCache.load(str(tmp_path))
    assert cache.truncate_from_end(5, write=False)
    assert _file(tmp_path) == "0\n2\n1 0\n2 5\n" and _entries(cache) == (EpochEntry(1, 0),)
    again = LeaderEpochCache.load(str(tmp_path))
    again.truncate_from_end(5, write=False)
    assert again.entries == _entries(cache)
    # The next append writes it, though: it may write offsets at and after 5 in epoch 1, which the file would
    # still give to epoch 2 (and the next load would no longer cut).
    assert cache.unwritten
    assert not cache.assign(1, 5)
    assert _file(tmp_path) == "0\n1\n1 0\n"


def test_a_cut_to_a_log_start_retention_moved_waits_for_the_next_write(tmp_path: Path) -> None:
    cache = _cache(tmp_path, (1, 0), (2, 5))
    assert cache.truncate_from_start(7, write=False)
    assert not cache.assign(2, 9)  # an append in epoch 2 writes nothing for the cut
    assert _file(tmp_path) == "0\n2\n1 0\n2 5\n"
    assert cache.assign(3, 12)  # a new epoch's entry writes the cut too
    assert _file(tmp_path) == "0\n2\n2 7\n3 12\n"
