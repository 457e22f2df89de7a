"""Leader election with pre-vote (Raft §5.2, thesis §9.6) and check-quorum."""

from __future__ import annotations

import random

from moldau.raft import BeginEpoch, Entry, PersistedState, RaftNode, Role, Send, SetTermVote, VoteRequest
from tests.unit.raft.harness import CONFIG, LATE_MS, elect, exchange, fetch_round, make_nodes


def role_of(node: RaftNode) -> Role:
    """The node's role, read through a call so that mypy does not narrow it across steps."""
    return node.role


def test_pre_vote_then_vote_elects_a_leader_that_appends_a_leader_change_record() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    nodes[1].tick(LATE_MS)
    pre = [a.message for a in nodes[1].drain() if isinstance(a, Send)]
    assert role_of(nodes[1]) is Role.PROSPECTIVE and nodes[1].term == 0
    assert all(isinstance(m, VoteRequest) and m.pre_vote and m.term == 1 for m in pre)
    for m in pre:
        nodes[m.dst].on_message(m, LATE_MS)
    for i in (2, 3):
        nodes[1].on_message(next(a.message for a in nodes[i].drain() if isinstance(a, Send)), LATE_MS)
    actions = nodes[1].drain()
    assert actions[0] == SetTermVote(1, 1)  # persisted before asking
    for a in actions[1:]:
        assert isinstance(a, Send)
        nodes[a.message.dst].on_message(a.message, LATE_MS)
    exchange(nodes, LATE_MS)
    assert role_of(nodes[1]) is Role.LEADER and nodes[1].term == 1
    assert nodes[1].log.entries == [Entry(1, None)]
    assert {n.leader_id for n in nodes.values()} == {1}


def test_vote_is_persisted_before_the_answer() -> None:
    node = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})[2]
    node.on_message(VoteRequest(1, 2, 1, 0, 0, pre_vote=False), 0)
    actions = node.drain()
    assert actions[0] == SetTermVote(1, None) and actions[1] == SetTermVote(1, 1)
    assert isinstance(actions[2], Send) and actions[2].message.granted  # type: ignore[union-attr]


def test_pre_vote_keeps_a_partitioned_node_from_disrupting_the_leader() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    now = LATE_MS + 100
    fetch_round(nodes, now)
    assert nodes[1].high_watermark == 1
    for step in range(1, 30):  # node 3 is cut off and times out again and again
        now = LATE_MS + 100 + step * 50
        fetch_round(nodes, now, cut=frozenset({3}))
    assert role_of(nodes[3]) is Role.PROSPECTIVE and nodes[3].term == 1  # never bumped its term
    fetch_round(nodes, now + 50)  # reconnected: its pre-votes are refused, the leader re-announces
    fetch_round(nodes, now + 100)
    assert role_of(nodes[1]) is Role.LEADER and nodes[1].term == 1
    assert role_of(nodes[3]) is Role.FOLLOWER and nodes[3].leader_id == 1


def test_pre_vote_is_refused_while_the_leader_is_heard() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    fetch_round(nodes, LATE_MS + 10)
    nodes[2].on_message(VoteRequest(3, 2, 2, 1, 1, pre_vote=True), LATE_MS + 20)
    answer = nodes[2].drain()[0]
    assert isinstance(answer, Send) and not answer.message.granted  # type: ignore[union-attr]
    assert nodes[2].term == 1


def test_leader_steps_down_without_a_quorum() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[1].drain()
    nodes[1].tick(LATE_MS + CONFIG.check_quorum_ms - 1)
    assert role_of(nodes[1]) is Role.LEADER
    nodes[1].tick(LATE_MS + CONFIG.check_quorum_ms)
    assert role_of(nodes[1]) is Role.FOLLOWER and nodes[1].term == 1


def test_single_voter_elects_itself_and_commits_alone() -> None:
    node = RaftNode(1, frozenset({1}), PersistedState(), random.Random(0), 0, CONFIG)
    node.tick(LATE_MS)
    assert node.role is Role.LEADER and node.high_watermark == 1
    assert node.propose(["a", "b"], LATE_MS) == 1
    assert node.high_watermark == 3


def test_new_leader_announces_itself_to_voters_it_has_not_heard_from() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[1].tick(LATE_MS + 3 * CONFIG.begin_epoch_interval_ms)
    sent = [a.message for a in nodes[1].drain() if isinstance(a, Send)]
    assert {m.dst for m in sent if isinstance(m, BeginEpoch)} == {2, 3}
