"""The replica a consumer is sent to read from (KIP-392): Kafka's RackAwareReplicaSelector rules and the
candidates a leader offers it."""

from __future__ import annotations

from moldau.replication.leader_state import LeaderState
from moldau.replication.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    preferred_read_replica,
    read_candidates,
    select_rack_aware,
)

LEADER = ReplicaView(1, "a", 100, 0)


def test_a_consumer_without_a_rack_reads_from_the_leader() -> None:
    follower = ReplicaView(2, "b", 100, 0)
    assert select_rack_aware("", LEADER, [follower]) is LEADER
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "", LEADER, [follower]) is None


def test_a_consumer_in_the_leaders_rack_reads_from_the_leader_even_with_a_follower_there() -> None:
    follower = ReplicaView(2, "a", 100, 0)
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "a", LEADER, [follower]) is None


def test_a_consumer_is_sent_to_the_follower_of_its_rack() -> None:
    followers = [ReplicaView(2, "b", 100, 0), ReplicaView(3, "c", 100, 0)]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "c", LEADER, followers) == 3
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "b", LEADER, followers) == 2


def test_a_consumer_in_a_rack_without_replicas_reads_from_the_leader() -> None:
    followers = [ReplicaView(2, "b", 100, 0), ReplicaView(3, None, 100, 0)]
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "z", LEADER, followers) is None


def test_among_followers_of_its_rack_the_most_caught_up_wins_then_the_most_recently_caught_up() -> None:
    behind, ahead = ReplicaView(2, "b", 90, 0), ReplicaView(3, "b", 100, 50)
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "b", LEADER, [behind, ahead]) == 3
    stale, fresh = ReplicaView(2, "b", 100, 500), ReplicaView(3, "b", 100, 5)
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "b", LEADER, [stale, fresh]) == 3
    assert preferred_read_replica(RACK_AWARE_SELECTOR, "b", LEADER, [fresh, stale]) == 3


def test_the_leader_selector_and_no_selector_keep_consumers_on_the_leader() -> None:
    followers = [ReplicaView(2, "b", 100, 0)]
    assert preferred_read_replica(LEADER_SELECTOR, "b", LEADER, followers) is None
    assert preferred_read_replica(None, "b", LEADER, followers) is None


def _leader_state(isr: tuple[int, ...]) -> LeaderState:
    state = LeaderState(node_id=1, replicas=(1, 2, 3, 4), isr=isr, leader_epoch=3, partition_epoch=1,
                        epoch_start_offset=0, lag_max_ms=30_000, now_ms=1_000)
    for broker, end in ((2, 100), (3, 100), (4, 40)):
        state.on_follower_fetch(broker, end, 100, now_ms=2_000)
    return state


def test_candidates_are_in_sync_followers_on_live_brokers_that_hold_the_offset() -> None:
    racks = {1: "a", 2: "b", 3: "c", 4: "d"}
    state = _leader_state(isr=(1, 2, 4))
    at_50 = read_candidates(state, 50, 0, 2_500, racks)
    assert [c.broker_id for c in at_50] == [2]  # 3 is out of the ISR, 4 is at offset 40
    assert at_50[0] == ReplicaView(2, "b", 100, 500)
    assert [c.broker_id for c in read_candidates(state, 30, 0, 2_500, racks)] == [2, 4]
    assert [c.broker_id for c in read_candidates(state, 30, 0, 2_500, {1: "a", 4: "d"})] == [4]  # 2 fenced


def test_an_offset_below_the_log_start_has_no_candidates() -> None:
    state = _leader_state(isr=(1, 2, 3, 4))
    assert read_candidates(state, 5, 10, 2_500, {1: "a", 2: "b", 3: "c", 4: "d"}) == []
