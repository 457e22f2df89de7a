"""Graceful resignation (EndEpoch) and the leader's view of its replicas (DescribeQuorum)."""

from __future__ import annotations

from moldau.raft import EndEpoch, FetchRequest, ReplicaState, Role
from tests.unit.raft.harness import CONFIG, LATE_MS, add_observer, elect, exchange, fetch_round, make_nodes, sent


def test_resigning_leader_hands_over_within_a_fetch_interval() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    now = LATE_MS + 100
    fetch_round(nodes, now)
    assert nodes[2].leader_id == 1
    assert nodes[1].resign(now)
    assert not nodes[2].resign(now)  # only a leader resigns
    out = sent(nodes[1])
    assert out == [EndEpoch(1, 2, 1), EndEpoch(1, 3, 1)]
    assert nodes[1].role is Role.FOLLOWER and nodes[1].leader_id is None and nodes[1].term == 1
    for m in out:
        nodes[m.dst].on_message(m, now)
    assert nodes[2].leader_id is None and nodes[3].leader_id is None
    fetch_round(nodes, now + CONFIG.fetch_interval_ms)  # every short delay has expired: a new election
    leaders = [i for i, n in nodes.items() if n.role is Role.LEADER]
    assert len(leaders) == 1 and leaders[0] in {2, 3} and nodes[leaders[0]].term == 2
    assert {n.leader_id for n in nodes.values()} == {leaders[0]}


def test_end_epoch_from_an_older_term_is_ignored() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[2].on_message(EndEpoch(3, 2, 0), LATE_MS)
    assert nodes[2].leader_id == 1


def test_replica_states_on_the_leader() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    add_observer(nodes, 4)
    elect(nodes, 1)
    leader = nodes[1]
    assert leader.replica_states(LATE_MS) == [
        ReplicaState(1, 1, LATE_MS, LATE_MS, True), ReplicaState(2), ReplicaState(3)]
    fetch_round(nodes, LATE_MS + 100, cut=frozenset({3}))  # 2 fetches offset 0, then 1
    fetch_round(nodes, LATE_MS + 200, cut=frozenset({3}))  # the observer finds the leader
    fetch_round(nodes, LATE_MS + 300, cut=frozenset({3}))
    leader.propose(["x"], LATE_MS + 300)
    leader.on_message(FetchRequest(2, 1, 1, 1, 1), LATE_MS + 310)  # behind the leader's end (2)
    states = leader.replica_states(LATE_MS + 320)
    assert states[0] == ReplicaState(1, 2, LATE_MS + 320, LATE_MS + 320, True)
    assert states[1] == ReplicaState(2, 1, LATE_MS + 310, LATE_MS + 300, True)
    assert states[2] == ReplicaState(3, -1, None, None, True)
    assert states[3] == ReplicaState(4, 1, LATE_MS + 300, LATE_MS + 300, False)
    assert nodes[2].replica_states(LATE_MS) == [ReplicaState(1), ReplicaState(2), ReplicaState(3)]


def test_resign_then_redirect_points_fetchers_nowhere() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[1].resign(LATE_MS)
    nodes[1].drain()
    nodes[1].on_message(FetchRequest(2, 1, 1, 1, 1), LATE_MS)
    answer = sent(nodes[1])[0]
    assert not answer.ok and answer.leader_id is None  # type: ignore[union-attr]
    nodes[2].on_message(answer, LATE_MS)
    assert nodes[2].leader_id is None  # its leader said it no longer leads
    exchange(nodes, LATE_MS)
