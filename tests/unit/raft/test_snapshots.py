"""Snapshots: taking one, serving it to a fetcher below the log start, and installing it."""

from __future__ import annotations

import random

from moldau.raft import (
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    InstallSnapshot,
    PersistedState,
    RaftNode,
    SaveSnapshot,
    Send,
    Snapshot,
    VoteRequest,
)
from tests.unit.raft.harness import CONFIG, LATE_MS, add_observer, elect, exchange, fetch_round, make_nodes, sent


def committed_cluster() -> dict[int, RaftNode]:
    """Three voters with leader 1 in term 1 and offsets 0..3 committed everywhere."""
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[1].propose(["a", "b", "c"], LATE_MS)
    for step in (1, 2, 3):
        fetch_round(nodes, LATE_MS + step * CONFIG.fetch_interval_ms)
    assert all(n.high_watermark == 4 for n in nodes.values())
    return nodes


def test_snapshot_of_the_committed_prefix_drops_it_from_the_log() -> None:
    leader = committed_cluster()[1]
    leader.drain()
    assert not leader.snapshot(5, "too far")  # beyond the HW
    assert not leader.snapshot(0, "nothing")  # not beyond the log start
    assert leader.snapshot(3, "abc")
    snap = Snapshot(3, 1, "abc")
    assert leader.drain() == [SaveSnapshot(snap)]
    assert leader.latest_snapshot == snap and leader.log_start_offset == 3
    assert leader.log.entries == [Entry(1, "c")] and leader.log.end_offset == 4
    assert leader.log.epoch_at(2) == 1  # answered from the snapshot
    assert not leader.snapshot(3, "again")


def test_restart_from_a_snapshot_starts_the_hw_at_its_end() -> None:
    state = PersistedState(1, 1, [Entry(1, "c")], Snapshot(3, 1, "abc"))
    node = RaftNode(2, frozenset({1, 2, 3}), state, random.Random(0), 0, CONFIG)
    assert node.high_watermark == 3 and node.log_start_offset == 3 and node.log.end_offset == 4
    assert node.latest_snapshot == state.snapshot
    node.tick(CONFIG.election_timeout_ms_max)
    requests = sent(node)
    assert requests and all(isinstance(m, VoteRequest) and (m.last_epoch, m.end_offset) == (1, 4) for m in requests)


def test_fetch_below_the_log_start_is_answered_with_the_snapshot() -> None:
    nodes = committed_cluster()
    leader = nodes[1]
    leader.propose(["d"], LATE_MS + 200)
    leader.snapshot(4, "abc+")
    observer = add_observer(nodes, 4)
    observer.on_message(FetchResponse(2, 4, 1, False, 0, (), 0, leader_id=1), LATE_MS + 200)
    fetch = sent(observer)[-1]
    assert fetch == FetchRequest(4, 1, 1, 0, 0)
    leader.drain()
    leader.on_message(fetch, LATE_MS + 200)
    answer = sent(leader)[0]
    assert isinstance(answer, FetchResponse) and answer.ok and answer.snapshot_id == (4, 1)
    observer.on_message(answer, LATE_MS + 200)
    request = sent(observer)[0]
    assert request == FetchSnapshotRequest(4, 1, 1, 4, 1)
    leader.on_message(request, LATE_MS + 200)
    response = sent(leader)[0]
    assert response == FetchSnapshotResponse(1, 4, 1, True, Snapshot(4, 1, "abc+"))
    observer.on_message(response, LATE_MS + 200)
    actions = observer.drain()
    assert actions[0] == InstallSnapshot(Snapshot(4, 1, "abc+"))
    assert observer.log_start_offset == 4 and observer.high_watermark == 4 and observer.log.entries == []
    assert [m for m in sent(observer)] == [] and len(actions) == 2  # then fetches on from the snapshot's end
    assert actions[1] == Send(FetchRequest(4, 1, 1, 4, 1))
    fetch_round(nodes, LATE_MS + 300)
    fetch_round(nodes, LATE_MS + 400)
    assert observer.log.entries == leader.log.entries and observer.high_watermark == leader.high_watermark == 5


def test_divergence_below_the_log_start_is_answered_with_the_snapshot() -> None:
    nodes = make_nodes({1: (3, [1, 1, 3, 3]), 2: (2, [1, 1, 2, 2, 2]), 3: (3, [1, 1, 3])})
    elect(nodes, 1)
    fetch_round(nodes, LATE_MS + 50, cut=frozenset({2}))
    fetch_round(nodes, LATE_MS + 100, cut=frozenset({2}))
    leader = nodes[1]
    assert leader.term == 4 and leader.high_watermark == 5
    assert leader.snapshot(4, "s")
    leader.drain()
    leader.on_message(FetchRequest(2, 1, 4, 5, 2), LATE_MS + 100)  # node 2 diverges from offset 2 on
    answer = sent(leader)[0]
    assert isinstance(answer, FetchResponse) and answer.snapshot_id == (4, 3) and answer.diverging_end is None
    nodes[2].tick(LATE_MS + 150)
    exchange(nodes, LATE_MS + 150)
    assert nodes[2].latest_snapshot == Snapshot(4, 3, "s")
    assert nodes[2].log_start_offset == 4 and [e.epoch for e in nodes[2].log.entries] == [4]


def test_a_replaced_snapshot_makes_the_fetcher_fetch_again() -> None:
    nodes = committed_cluster()
    leader, follower = nodes[1], nodes[2]
    follower.drain()
    follower.on_message(FetchResponse(1, 2, 1, True, 4, (), 4, snapshot_id=(6, 1)), LATE_MS + 200)
    assert sent(follower) == [FetchSnapshotRequest(2, 1, 1, 6, 1)]
    follower.on_message(FetchSnapshotResponse(1, 2, 1, True, None), LATE_MS + 200)
    assert sent(follower) == [FetchRequest(2, 1, 1, 4, 1)]
    follower.on_message(FetchSnapshotResponse(1, 2, 1, True, Snapshot(6, 1, "late")), LATE_MS + 200)
    assert follower.drain() == [] and follower.latest_snapshot is None  # not asked for any more
    assert leader.latest_snapshot is None
