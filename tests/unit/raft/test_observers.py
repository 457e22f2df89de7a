"""Observers (non-voting fetchers), leader redirects, and single-voter start-up."""

from __future__ import annotations

import random

from moldau.raft import (
    FetchRequest,
    FetchResponse,
    PersistedState,
    RaftNode,
    Role,
    VoteRequest,
    VoteResponse,
)
from tests.unit.raft.harness import CONFIG, LATE_MS, add_observer, elect, exchange, fetch_round, make_nodes, sent


def test_observer_never_stands_for_election_nor_votes() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    observer = add_observer(nodes, 4)
    assert observer.is_observer and not nodes[1].is_observer
    observer.tick(LATE_MS)
    out = sent(observer)
    assert observer.role is Role.FOLLOWER and observer.term == 0
    assert len(out) == 1 and isinstance(out[0], FetchRequest) and out[0].dst in {1, 2, 3}
    for pre_vote in (True, False):
        observer.on_message(VoteRequest(1, 4, 1, 0, 0, pre_vote), LATE_MS)
        answer = sent(observer)[0]
        assert isinstance(answer, VoteResponse) and not answer.granted


def test_observer_rotates_through_voters_until_one_names_the_leader() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    observer = add_observer(nodes, 4)
    targets = set()
    for step in range(3):  # no leader yet: each fetch goes to the next voter
        observer.tick(step * CONFIG.fetch_interval_ms)
        fetch = sent(observer)[0]
        assert isinstance(fetch, FetchRequest)
        targets.add(fetch.dst)
    assert targets == {1, 2, 3}
    elect(nodes, 1)
    fetch_round(nodes, LATE_MS + 100)
    assert observer.leader_id == 1 and observer.term == 1
    assert nodes[1].propose(["x"], LATE_MS + 100) == 1
    fetch_round(nodes, LATE_MS + 200)
    fetch_round(nodes, LATE_MS + 300)
    assert observer.high_watermark == 2 and observer.log.entries == nodes[1].log.entries


def test_leader_counts_observers_neither_toward_the_hw_nor_check_quorum() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    add_observer(nodes, 4)
    elect(nodes, 1)
    voters_cut = frozenset({2, 3})
    now = LATE_MS
    nodes[1].propose(["x"], now)
    for step in range(1, 20):
        now = LATE_MS + step * CONFIG.fetch_interval_ms
        fetch_round(nodes, now, cut=voters_cut)
        if now - LATE_MS < CONFIG.check_quorum_ms:
            assert nodes[1].role is Role.LEADER
    assert nodes[4].log.end_offset == 2  # the observer replicated everything...
    assert nodes[1].high_watermark == 0  # ...but only voters commit
    assert nodes[1].role is Role.FOLLOWER  # and only voters keep the leader in office


def test_non_leader_redirects_a_fetch_to_the_leader_it_knows() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    nodes[2].on_message(FetchRequest(3, 2, 1, 0, 0), LATE_MS)
    assert sent(nodes[2]) == [FetchResponse(2, 3, 1, False, 0, (), 0, leader_id=1)]


def test_fetcher_follows_a_redirect_with_a_higher_term_at_once() -> None:
    node = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})[3]
    node.on_message(FetchResponse(2, 3, 5, False, 0, (), 0, leader_id=1), 100)
    assert node.term == 5 and node.leader_id == 1 and node.role is Role.FOLLOWER
    assert sent(node) == [FetchRequest(3, 1, 5, 0, 0)]


def test_fetcher_follows_a_redirect_to_a_leader_of_its_term_it_did_not_know() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    elect(nodes, 1)
    observer = add_observer(nodes, 4)
    observer.on_message(FetchResponse(2, 4, 1, False, 0, (), 0, leader_id=None), LATE_MS)  # adopts term 1
    assert observer.term == 1 and observer.leader_id is None
    observer.on_message(FetchResponse(3, 4, 1, False, 0, (), 0, leader_id=1), LATE_MS)
    assert observer.leader_id == 1 and sent(observer)[-1] == FetchRequest(4, 1, 1, 0, 0)


def test_single_voter_is_leader_on_its_first_tick() -> None:
    node = RaftNode(1, frozenset({1}), PersistedState(), random.Random(0), 500, CONFIG)
    node.tick(500)
    assert node.role is Role.LEADER and node.term == 1 and node.high_watermark == 1
    restarted = RaftNode(1, frozenset({1}), PersistedState(1, 1, list(node.log.entries)), random.Random(1), 900, CONFIG)
    restarted.tick(900)
    assert restarted.role is Role.LEADER and restarted.term == 2 and restarted.high_watermark == 2


def test_observer_forgets_a_silent_leader_and_looks_again() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    observer = add_observer(nodes, 4)
    elect(nodes, 1)
    fetch_round(nodes, LATE_MS + 100)
    assert observer.leader_id == 1
    now = LATE_MS + 100 + CONFIG.election_timeout_ms_max
    observer.tick(now)  # nothing heard from the leader for an election timeout
    assert observer.leader_id is None
    exchange(nodes, now, cut=frozenset({1}))
