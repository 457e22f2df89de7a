"""log.drop.behind.bytes: appended bytes leave the page cache once written back, and stay readable."""

from __future__ import annotations

import ctypes
import mmap
import os

import pytest

from moldau.storage import drop_behind
from moldau.storage.drop_behind import WRITEBACK_STEP_BYTES
from moldau.storage.log import PartitionLog
from tests.unit.storage.batches import batches_of, decode, make_batch
from tests.unit.storage.conftest import OpenLog

pytestmark = pytest.mark.skipif(not drop_behind.available(), reason="no sync_file_range on this platform")

_PAGE = mmap.PAGESIZE
_VALUE_BYTES = 64 * 1024
_APPENDS = 8 * WRITEBACK_STEP_BYTES // _VALUE_BYTES  # 32 MiB in 64 KiB records


def _cached_bytes(path: str, start: int = 0) -> int:
    """Bytes of the file from `start` on in the page cache now (mincore on a private mapping of it)."""
    size = os.path.getsize(path)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as file, mmap.mmap(file.fileno(), size, access=mmap.ACCESS_COPY) as mapped:
        pages = (size + _PAGE - 1) // _PAGE
        vector = ctypes.create_string_buffer(pages)
        address = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
        assert libc.mincore(address, size, vector) == 0, os.strerror(ctypes.get_errno())
        return sum(byte & 1 for byte in vector.raw[start // _PAGE:]) * _PAGE


def _fill(log: PartitionLog) -> list[bytes]:
    written = []
    for i in range(_APPENDS):
        value = bytes([i % 251]) * _VALUE_BYTES
        log.append(batches_of(make_batch([value])), 0)
        written.append(value)
    return written


def _active_path(log: PartitionLog) -> str:
    return os.path.join(log.directory, f"{log.segments[-1].base_offset:020d}.log")


def test_bytes_behind_the_kept_window_leave_the_cache_and_read_back(open_log: OpenLog) -> None:
    keep = WRITEBACK_STEP_BYTES
    log = open_log(drop_behind_bytes=keep)
    written = _fill(log)
    path = _active_path(log)
    size = os.path.getsize(path)
    # Write-back of the last steps may still run, so their pages may stay: at most the kept bytes, the step
    # being written and the one before it (advised again at the next step) remain.
    assert _cached_bytes(path) <= keep + 3 * WRITEBACK_STEP_BYTES < size
    assert [value for _, value in decode(log.read(0, 10**9, True).read_bytes())] == written


def test_minus_one_keeps_everything_cached(open_log: OpenLog) -> None:
    log = open_log()
    assert log.config.drop_behind_bytes == -1
    _fill(log)
    path = _active_path(log)
    assert _cached_bytes(path) >= os.path.getsize(path) - _PAGE


def test_a_truncated_segment_goes_on_dropping_after_new_appends(open_log: OpenLog) -> None:
    log = open_log(drop_behind_bytes=0)
    _fill(log)
    log.truncate_to(_APPENDS // 2)
    path = _active_path(log)
    cut = os.path.getsize(path)  # finding the cut read pages back in: what reads bring back stays, as it would
    written = _fill(log)
    assert _cached_bytes(path, cut) <= 3 * WRITEBACK_STEP_BYTES < os.path.getsize(path) - cut
    values = [value for _, value in decode(log.read(_APPENDS // 2, 10**9, True).read_bytes())]
    assert values == written
