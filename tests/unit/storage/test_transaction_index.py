"""The `.txnindex` file: Kafka's entry format, idempotent appends, truncation and the collection rule."""

from __future__ import annotations

import struct
from pathlib import Path

from moldau.storage.transaction_index import AbortedTxn, TransactionIndex, collect_aborted


def test_file_format_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(str(path))
    assert index.entries == [] and not path.exists()  # a missing file is an empty index
    assert index.append(AbortedTxn(7, 3, 9, 4))
    data = path.read_bytes()
    assert len(data) == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 3, 9, 4)
    assert TransactionIndex(str(path)).entries == [AbortedTxn(7, 3, 9, 4)]


def test_appends_are_idempotent_and_truncation_cuts_by_last_offset(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(str(path))
    for entry in (AbortedTxn(1, 0, 5, 1), AbortedTxn(2, 1, 8, 6), AbortedTxn(3, 6, 12, 13)):
        assert index.append(entry)
    assert not index.append(AbortedTxn(2, 1, 8, 6))  # replayed: already there
    assert not index.append(AbortedTxn(9, 0, 7, 8))
    index.truncate_to(8)
    assert [e.producer_id for e in index.entries] == [1]
    assert len(path.read_bytes()) == 34
    index.truncate_to(0)
    assert index.entries == [] and not path.exists()


def test_a_torn_last_entry_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    TransactionIndex(str(path)).append(AbortedTxn(1, 0, 5, 6))
    with open(path, "ab") as f:
        f.write(b"\x00" * 10)
    index = TransactionIndex(str(path))
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    index.append(AbortedTxn(2, 6, 9, 10))
    assert TransactionIndex(str(path)).entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 6, 9, 10)]


def test_collect_overlaps_and_stops_at_a_stable_offset_beyond_the_range() -> None:
    entries = [AbortedTxn(1, 0, 5, 2), AbortedTxn(2, 2, 9, 10), AbortedTxn(3, 10, 12, 13)]
    out: list[AbortedTxn] = []
    assert collect_aborted(entries, 6, 10, out)  # the second entry's stable offset 10 reaches the bound
    assert [e.producer_id for e in out] == [2]
    out.clear()
    assert not collect_aborted(entries, 0, 20, out)
    assert [e.producer_id for e in out] == [1, 2, 3]
