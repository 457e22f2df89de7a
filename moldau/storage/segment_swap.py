"""Replacing segments by a cleaned segment on disk, atomically, and finishing an interrupted replacement.

The protocol follows Kafka's segment replacement. A cleaned segment replacing the consecutive segments
with base offsets `replaced` takes the first one's base offset `base`:

1. the cleaner writes `<base>.log.cleaned`, `<base>.index.cleaned`, `<base>.timeindex.cleaned` and
   `<base>.txnindex.cleaned` (the aborted transactions whose markers stay, possibly none: an empty file)
   and fsyncs them (`write` side, in `moldau.storage.compactor`);
2. commit point: `<base>.log.cleaned` is renamed to `<base>.log.swap` and the directory fsynced;
3. the replaced segments' files are deleted (open fds keep their data readable for fetches in flight);
4. the index files take their final names (an empty transaction index goes: no file is an empty index),
   then `<base>.log.swap` becomes `<base>.log`; directory fsync.

A crash before step 2 leaves only `.cleaned` files: the old segments are intact and the leftovers are
removed at start-up. From step 2 on, `complete_interrupted_swaps` (run before a log loads its segments)
rolls the swap forward: every `.log` whose base offset lies in [swap base, swap next offset) - replaced
segments not deleted yet, including the one named like the swap - goes with its offset and time indexes,
the cleaned transaction index takes its final name unless step 4 already did that, the swap file takes
its final name, and the caller rebuilds that segment's offset and time indexes from the log. The
transaction index cannot be rebuilt from the cleaned log (the records of aborted transactions are gone,
and with them what recovery would index), which is why it is written before the commit point. The other
replaced segments' `.txnindex` files are left without a `.log` and removed when the log loads. A replaced
segment that lies wholly beyond the swap's last batch (all its records were compacted away) may survive a
crash; it holds only superseded records at offsets the swap does not cover, with its own transaction
index, so the log stays ordered and the next cleaning removes them again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

from moldau.protocol.record_batch import BATCH_HEADER_SIZE, MAGIC_V2, parse_header
from moldau.storage.producer_state import fsync_directory
from moldau.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_log_base,
    segment_path,
)

__all__ = [
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "cleaned_path",
    "complete_interrupted_swaps",
    "remove_cleaned",
    "swap_in",
]

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


def cleaned_path(directory: str, base_offset: int, suffix: str) -> str:
    """Where the cleaner writes the new segment's file with `suffix` (.log, .index, .timeindex, .txnindex)."""
    return segment_path(directory, base_offset, suffix) + CLEANED_SUFFIX


def remove_cleaned(directory: str, base_offset: int) -> None:
    """Discard a cleaned segment that will not be swapped in."""
    for suffix in (*_SEGMENT_SUFFIXES, TXN_INDEX_SUFFIX):
        _unlink_quietly(cleaned_path(directory, base_offset, suffix))


def swap_in(directory: str, base_offset: int, replaced: Sequence[int]) -> None:
    """Steps 2-4: make the cleaned segment at `base_offset` replace the segments based at `replaced`.

    Raises OSError; after the commit point a crash or error leaves work for `complete_interrupted_swaps`.
    """
    _commit(directory, base_offset)
    _delete_replaced(directory, replaced)
    _install(directory, base_offset)


def _commit(directory: str, base_offset: int) -> None:
    os.replace(cleaned_path(directory, base_offset, LOG_SUFFIX), _swap_path(directory, base_offset))
    fsync_directory(directory)


def _delete_replaced(directory: str, replaced: Sequence[int]) -> None:
    for old_base in replaced:
        for suffix in _SEGMENT_SUFFIXES:
            _unlink_quietly(segment_path(directory, old_base, suffix))


def _install(directory: str, base_offset: int) -> None:
    _install_txn_index(directory, base_offset)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        os.replace(cleaned_path(directory, base_offset, suffix), segment_path(directory, base_offset, suffix))
    os.replace(_swap_path(directory, base_offset), segment_path(directory, base_offset, LOG_SUFFIX))
    fsync_directory(directory)


def complete_interrupted_swaps(directory: str) -> set[int]:
    """Roll forward every committed swap in `directory`; returns the base offsets of the segments installed,
    whose index files are gone and must be rebuilt from the log."""
    swaps = sorted(_swap_bases(directory))
    if not swaps:
        return set()
    log_bases = _log_bases(directory)
    for base in swaps:
        end = max(_next_offset(_swap_path(directory, base), base), base + 1)
        _delete_replaced(directory, [b for b in log_bases if base <= b < end])
        _delete_replaced(directory, [base])  # indexes may be stale or new: rebuilt either way
        _install_txn_index(directory, base)
        os.replace(_swap_path(directory, base), segment_path(directory, base, LOG_SUFFIX))
    fsync_directory(directory)
    return set(swaps)


def _install_txn_index(directory: str, base_offset: int) -> None:
    """Give the cleaned transaction index its final name; a no-op once done (or for a swap committed before
    the cleaner wrote one: the first replaced segment's index then holds every replaced segment's entries)."""
    cleaned = cleaned_path(directory, base_offset, TXN_INDEX_SUFFIX)
    final = segment_path(directory, base_offset, TXN_INDEX_SUFFIX)
    try:
        empty = os.stat(cleaned).st_size == 0
    except FileNotFoundError:
        return
    if empty:
        _unlink_quietly(final)
        os.unlink(cleaned)  # last: a crash before it repeats the whole step
    else:
        os.replace(cleaned, final)


def _swap_path(directory: str, base_offset: int) -> str:
    return segment_path(directory, base_offset, LOG_SUFFIX) + SWAP_SUFFIX


def _swap_bases(directory: str) -> list[int]:
    return _bases(directory, LOG_SUFFIX + SWAP_SUFFIX)


def _log_bases(directory: str) -> list[int]:
    return _bases(directory, LOG_SUFFIX)


def _bases(directory: str, suffix: str) -> list[int]:
    return [base for name in os.listdir(directory) if (base := segment_log_base(name, suffix)) is not None]


def _next_offset(path: str, base_offset: int) -> int:
    """One past the last offset of the well-formed batches at the start of the file at `path`."""
    next_offset = base_offset
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        position = 0
        while size - position >= BATCH_HEADER_SIZE:
            header = parse_header(os.pread(f.fileno(), BATCH_HEADER_SIZE, position))
            if header.magic != MAGIC_V2 or header.total_size < BATCH_HEADER_SIZE or \
                    header.total_size > size - position:
                break
            next_offset = header.next_offset
            position += header.total_size
    return next_offset


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
