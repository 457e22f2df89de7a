"""The quorum's durable state: term and vote, the log with torn tails, snapshots and the log behind them."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from moldau.metadata.quorum_store import QuorumStore, encode_records
from moldau.metadata.records import TopicRecord
from moldau.raft import Entry, Snapshot


def topic(name: str) -> tuple[TopicRecord, ...]:
    return (TopicRecord(name, uuid.UUID(int=len(name))),)


def test_term_vote_and_entries_survive_a_reopen(tmp_path: Path) -> None:
    store = QuorumStore(str(tmp_path))
    assert store.load().term == 0
    store.set_term_vote(3, 2)
    store.append(0, [Entry(3, None), Entry(3, topic("a")), Entry(3, topic("bb"))])
    store.sync()
    store.close()
    state = QuorumStore(str(tmp_path)).load()
    assert (state.term, state.voted_for) == (3, 2)
    assert state.entries == [Entry(3, None), Entry(3, topic("a")), Entry(3, topic("bb"))]


def test_truncation_is_durable(tmp_path: Path) -> None:
    store = QuorumStore(str(tmp_path))
    store.load()
    store.append(0, [Entry(1, topic("a")), Entry(1, topic("b")), Entry(2, topic("c"))])
    store.truncate(1)
    store.append(1, [Entry(3, topic("d"))])
    store.close()
    assert QuorumStore(str(tmp_path)).load().entries == [Entry(1, topic("a")), Entry(3, topic("d"))]


def test_a_torn_or_corrupt_tail_is_dropped(tmp_path: Path) -> None:
    store = QuorumStore(str(tmp_path))
    store.load()
    store.append(0, [Entry(1, topic("a")), Entry(1, topic("b"))])
    store.close()
    path = tmp_path / "raft.log"
    data = path.read_bytes()
    path.write_bytes(data[:-3])  # the last entry torn
    assert QuorumStore(str(tmp_path)).load().entries == [Entry(1, topic("a"))]
    assert os.path.getsize(path) < len(data) - 3  # cut on load, so appends continue from a clean end
    store = QuorumStore(str(tmp_path))
    store.load()
    store.append(1, [Entry(2, topic("c"))])
    store.close()
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # a flipped bit in the last entry fails its CRC
    path.write_bytes(bytes(raw))
    assert QuorumStore(str(tmp_path)).load().entries == [Entry(1, topic("a"))]


def test_a_snapshot_replaces_the_log_below_it(tmp_path: Path) -> None:
    store = QuorumStore(str(tmp_path))
    store.load()
    entries = [Entry(1, topic(n)) for n in ("a", "b", "c", "d")]
    store.append(0, entries)
    snapshot = Snapshot(3, 1, encode_records([r for e in entries[:3] for r in e.value]))  # type: ignore[attr-defined]
    store.save_snapshot(snapshot, entries[3:])
    store.append(4, [Entry(2, topic("e"))])
    store.close()
    state = QuorumStore(str(tmp_path)).load()
    assert state.snapshot == snapshot
    assert state.entries == [Entry(1, topic("d")), Entry(2, topic("e"))]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "raft.log", "snapshot-00000000000000000003-0000000001.checkpoint", "space-reserve"]  # no vote cast yet


def test_an_installed_snapshot_discards_the_whole_log(tmp_path: Path) -> None:
    store = QuorumStore(str(tmp_path))
    store.load()
    store.append(0, [Entry(1, topic("a")), Entry(1, topic("b"))])
    store.install_snapshot(Snapshot(10, 4, encode_records(list(topic("z")))))
    store.append(10, [Entry(4, topic("k"))])
    store.close()
    state = QuorumStore(str(tmp_path)).load()
    assert state.snapshot is not None and state.snapshot.end_offset == 10
    assert state.entries == [Entry(4, topic("k"))]
