"""Fetch-based replication: divergence and truncation, and the commit rule of §5.4.2 (Figure 8)."""

from __future__ import annotations

from moldau.raft import FetchRequest, FetchResponse, NotLeader, Role, Send, Truncate
from tests.unit.raft.harness import LATE_MS, elect, exchange, fetch_round, make_nodes


def test_divergent_follower_truncates_exactly_its_divergent_suffix() -> None:
    nodes = make_nodes({1: (3, [1, 1, 3, 3]), 2: (2, [1, 1, 2, 2, 2]), 3: (3, [1, 1, 3])})
    elect(nodes, 1)
    assert nodes[1].role is Role.LEADER and nodes[1].term == 4
    nodes[2].tick(LATE_MS)
    fetch = next(a.message for a in nodes[2].drain() if isinstance(a, Send))
    assert fetch == FetchRequest(2, 1, 4, 5, 2)
    nodes[1].on_message(fetch, LATE_MS)
    answer = next(a.message for a in nodes[1].drain() if isinstance(a, Send))
    assert isinstance(answer, FetchResponse) and answer.diverging_end == 2  # epoch 1 ends at offset 2
    nodes[2].on_message(answer, LATE_MS)
    actions = nodes[2].drain()
    assert actions[0] == Truncate(2)
    for a in actions:
        if isinstance(a, Send):
            nodes[a.message.dst].on_message(a.message, LATE_MS)
    exchange(nodes, LATE_MS)
    assert nodes[2].log.entries == nodes[1].log.entries
    assert [e.epoch for e in nodes[2].log.entries] == [1, 1, 3, 3, 4]


def test_entries_of_an_older_epoch_commit_only_with_one_of_the_current_epoch() -> None:
    """Figure 8: a term-2 entry on a majority is not committed until the term-4 record also is."""
    nodes = make_nodes({1: (3, [1, 2]), 2: (3, [1, 2]), 3: (3, [1])})
    elect(nodes, 1)
    leader = nodes[1]
    assert leader.term == 4 and [e.epoch for e in leader.log.entries] == [1, 2, 4]
    leader.drain()
    leader.on_message(FetchRequest(2, 1, 4, 2, 2), LATE_MS)  # node 2 holds offsets 0..1
    assert leader.high_watermark == 0  # offset 1 (epoch 2) is on a majority, but not of epoch 4
    leader.on_message(FetchRequest(2, 1, 4, 3, 4), LATE_MS)  # node 2 now holds the epoch-4 record
    assert leader.high_watermark == 3


def test_followers_learn_the_high_watermark_and_proposals_commit() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    assert nodes[1].propose(["x"], LATE_MS) == 1
    assert isinstance(nodes[2].propose(["y"], LATE_MS), NotLeader)
    fetch_round(nodes, LATE_MS + 60)
    fetch_round(nodes, LATE_MS + 120)
    assert nodes[1].high_watermark == 2
    assert all(n.high_watermark == 2 and n.log.entries[1].value == "x" for n in nodes.values())


def test_stale_leader_learns_the_new_term_from_a_fetch_answer() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[2].on_message(FetchRequest(3, 2, 5, 0, 0), LATE_MS)  # a higher term reaches node 2
    assert nodes[2].term == 5 and nodes[2].role is Role.FOLLOWER
