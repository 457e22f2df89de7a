"""Voter-set changes (KIP-853) in the Raft core: going dynamic, adding a caught-up observer, removing a
voter, one change at a time, and the set following the log through truncation and snapshots."""

from __future__ import annotations

import random

from moldau.raft import (
    Entry,
    FetchResponse,
    PersistedState,
    RaftNode,
    Role,
    Snapshot,
    VoterChangeError,
    VoterChangeRefused,
    VoterInfo,
    VotersRecord,
)
from tests.unit.raft.harness import CONFIG, LATE_MS, add_observer, elect, exchange, fetch_round, make_nodes


def dynamic_quorum() -> tuple[dict[int, RaftNode], int]:
    """Three voters led by 1, with the first VotersRecord committed, and an observer 4 caught up."""
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    add_observer(nodes, 4)
    elect(nodes, 1)
    now = LATE_MS
    for _ in range(3):
        now += CONFIG.fetch_interval_ms
        fetch_round(nodes, now)
    offset = nodes[1].enable_dynamic_voters(VotersRecord.of({1, 2, 3}), now)
    assert isinstance(offset, int)
    for _ in range(3):
        now += CONFIG.fetch_interval_ms
        fetch_round(nodes, now)
    assert nodes[1].high_watermark > offset and all(n.history.dynamic for n in nodes.values())
    return nodes, now


def settle(nodes: dict[int, RaftNode], now: int, rounds: int = 3) -> int:
    for _ in range(rounds):
        now += CONFIG.fetch_interval_ms
        fetch_round(nodes, now)
    return now


def test_a_static_quorum_refuses_voter_changes() -> None:
    nodes = make_nodes({1: (0, []), 2: (0, []), 3: (0, [])})
    add_observer(nodes, 4)
    elect(nodes, 1)
    now = settle(nodes, LATE_MS)
    refused = nodes[1].add_voter(VoterInfo(4), now)
    assert isinstance(refused, VoterChangeRefused) and refused.error is VoterChangeError.STATIC_QUORUM
    refused = nodes[1].enable_dynamic_voters(VotersRecord.of({1, 2}), now)
    assert isinstance(refused, VoterChangeRefused) and refused.error is VoterChangeError.INVALID


def test_added_observer_votes_and_counts_from_the_moment_the_record_is_appended() -> None:
    nodes, now = dynamic_quorum()
    now = settle(nodes, now)
    leader = nodes[1]
    offset = leader.add_voter(VoterInfo(4), now)
    assert isinstance(offset, int) and leader.voters == {1, 2, 3, 4}  # in effect on append, before commit
    assert leader.voter_change_pending()
    again = leader.remove_voter(2, now)
    assert isinstance(again, VoterChangeRefused) and again.error is VoterChangeError.CHANGE_PENDING
    now = settle(nodes, now)
    assert not leader.voter_change_pending() and not nodes[4].is_observer
    assert {s.node_id for s in leader.replica_states(now) if s.is_voter} == {1, 2, 3, 4}
    # Four voters: the leader needs two followers now, so with 2 and 3 cut off nothing commits...
    hw = leader.high_watermark
    leader.propose(["x"], now)
    step = CONFIG.fetch_interval_ms
    fetch_round(nodes, now + step, cut=frozenset({2, 3}))
    fetch_round(nodes, now + 2 * step, cut=frozenset({2, 3}))
    assert leader.high_watermark == hw
    # ...and with only 3 cut off, 2 and 4 make the majority.
    fetch_round(nodes, now + 3 * step, cut=frozenset({3}))
    fetch_round(nodes, now + 4 * step, cut=frozenset({3}))
    assert leader.high_watermark > hw


def test_duplicate_unknown_and_lagging_voters_are_refused() -> None:
    nodes, now = dynamic_quorum()
    now = settle(nodes, now)
    leader = nodes[1]
    duplicate = leader.add_voter(VoterInfo(2), now)
    assert isinstance(duplicate, VoterChangeRefused) and duplicate.error is VoterChangeError.DUPLICATE_VOTER
    missing = leader.remove_voter(9, now)
    assert isinstance(missing, VoterChangeRefused) and missing.error is VoterChangeError.VOTER_NOT_FOUND
    stranger = leader.add_voter(VoterInfo(5), now)  # never fetched
    assert isinstance(stranger, VoterChangeRefused) and stranger.error is VoterChangeError.NOT_CAUGHT_UP


def test_removed_voter_no_longer_counts_and_becomes_an_observer() -> None:
    nodes, now = dynamic_quorum()
    now = settle(nodes, now)
    leader = nodes[1]
    assert isinstance(leader.remove_voter(3, now), int)
    now = settle(nodes, now)
    assert leader.voters == {1, 2} and nodes[3].is_observer and nodes[3].role is Role.FOLLOWER
    hw = leader.high_watermark
    leader.propose(["y"], now)
    step = CONFIG.fetch_interval_ms
    fetch_round(nodes, now + step, cut=frozenset({2}))  # 3 still fetches, but its fetch no longer commits
    fetch_round(nodes, now + 2 * step, cut=frozenset({2}))
    assert leader.high_watermark == hw and nodes[3].log.end_offset == leader.log.end_offset
    nodes[3].tick(now + LATE_MS)
    assert nodes[3].role is Role.FOLLOWER  # an observer never stands for election


def test_a_leader_asked_to_remove_itself_hands_over_instead() -> None:
    nodes, now = dynamic_quorum()
    now = settle(nodes, now)
    refused = nodes[1].remove_voter(1, now)
    assert isinstance(refused, VoterChangeRefused) and refused.error is VoterChangeError.NOT_LEADER
    assert nodes[1].role is Role.FOLLOWER and nodes[1].voters == {1, 2, 3}
    exchange(nodes, now)


def test_truncating_a_voter_record_restores_the_previous_set() -> None:
    record = VotersRecord.of({1, 2})
    state = PersistedState(2, None, [Entry(1, None), Entry(1, VotersRecord.of({1, 2, 3})), Entry(2, record)])
    node = RaftNode(3, frozenset({1, 2, 3}), state, random.Random(0), 0, CONFIG)
    assert node.is_observer and node.voters == {1, 2}
    # The leader of epoch 3 never had the entry at 2: the follower truncates it and is a voter again.
    node.on_message(FetchResponse(1, 3, 3, True, 3, (), 2, diverging_end=2, last_epoch=2), 0)
    assert node.log.end_offset == 2 and node.voters == {1, 2, 3} and not node.is_observer


def test_a_snapshot_carries_the_voter_set() -> None:
    nodes, now = dynamic_quorum()
    now = settle(nodes, now)
    leader = nodes[1]
    assert isinstance(leader.add_voter(VoterInfo(4), now), int)
    now = settle(nodes, now)
    assert leader.snapshot(leader.high_watermark, "state")
    snap = leader.latest_snapshot
    assert isinstance(snap, Snapshot) and snap.voters is not None and snap.voters.ids == {1, 2, 3, 4}
    restarted = RaftNode(1, frozenset({1, 2, 3}), PersistedState(leader.term, None, [], snap), random.Random(1), 0,
                         CONFIG)
    assert restarted.voters == {1, 2, 3, 4} and restarted.history.dynamic


def test_a_voter_removed_while_cut_off_learns_it_when_it_comes_back() -> None:
    nodes, now = dynamic_quorum()
    leader = nodes[1]
    assert isinstance(leader.remove_voter(3, now), int)
    cut = frozenset({3})
    for _ in range(3):
        now += CONFIG.fetch_interval_ms
        fetch_round(nodes, now, cut)
    assert leader.voters == {1, 2} and not leader.voter_change_pending()
    assert nodes[3].voters == {1, 2, 3}  # it never got the record
    now += 2 * CONFIG.election_timeout_ms_max  # it gives up on the leader and asks for votes, in vain
    fetch_round(nodes, now, cut=frozenset({3}))
    nodes[3].tick(now)
    assert nodes[3].role is Role.PROSPECTIVE and nodes[3].leader_id is None
    for _ in range(4):  # reconnected: the leader's answers (its vote answer, its announcement) lead it back
        now += CONFIG.fetch_interval_ms
        fetch_round(nodes, now)
    (current,) = [n.node_id for n in nodes.values() if n.role is Role.LEADER]
    assert current in {1, 2} and nodes[3].is_observer and nodes[3].leader_id == current


def test_a_voter_whose_set_lacks_the_leader_finds_it_through_a_voters_answer() -> None:
    """A node whose log holds a voter record the leader never had (here {2, 3, 5}, in an epoch the leader's log
    does not have) asks 2 and 3 for votes, never the leader. Their answers name the leader: the node fetches
    from it once, and follows it only on the leader's own answer, which truncates the record away."""
    nodes, now = dynamic_quorum()
    leader = nodes[1]
    stray = stray_voter(leader, now)
    assert stray.voters == {2, 3, 5} and not stray.is_observer
    nodes[5] = stray
    now += LATE_MS
    stray.tick(now)
    assert stray.role is Role.PROSPECTIVE
    delivered = exchange(nodes, now)
    probes = [m for m in delivered if m.src == 5 and m.dst == 1]
    assert probes, "the stray node never reached the leader"
    assert (stray.role, stray.leader_id) == (Role.FOLLOWER, 1)
    now = settle(nodes, now)
    assert stray.is_observer and stray.voters == {1, 2, 3}
    assert stray.log.end_offset == leader.log.end_offset and stray.high_watermark == leader.high_watermark


def test_a_hint_naming_a_dead_leader_is_not_followed() -> None:
    """The same node, with the leader gone: the fetch goes unanswered and the node stays a candidate for election
    rather than pointing at the dead leader (which would hold back its election, and lead others to it)."""
    nodes, now = dynamic_quorum()
    leader = nodes[1]
    stray = stray_voter(leader, now)
    nodes[5] = stray
    now += LATE_MS
    stray.tick(now)
    exchange(nodes, now, cut=frozenset({1}))
    assert stray.role is Role.PROSPECTIVE and stray.leader_id is None


def stray_voter(leader: RaftNode, now: int) -> RaftNode:
    """Node 5, in the leader's term, whose log holds only a voter record {2, 3, 5} of an epoch the leader never had."""
    state = PersistedState(leader.term, None, [Entry(0, VotersRecord.of({2, 3, 5}))])
    return RaftNode(5, frozenset({1, 2, 3}), state, random.Random(5), now, CONFIG)
