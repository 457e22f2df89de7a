"""Leader and ISR changes on fencing, unfencing and preferred-leader election."""

from __future__ import annotations

from collections.abc import Sequence

from moldau.metadata.image import MetadataImage
from moldau.metadata.leader_election import (
    fence_changes,
    imbalanced_brokers,
    preferred_leader_change,
    preferred_leader_changes,
    unclean_leader_changes,
    unfence_changes,
)
from moldau.metadata.records import FenceBrokerRecord, MetadataRecord, PartitionRecord, UnfenceBrokerRecord
from tests.unit.metadata.builders import TOPIC_ID, build, part, partition, registration

THREE = [registration(1, epoch=1), registration(2, epoch=2), registration(3, epoch=3)]


def commit(image: MetadataImage, records: Sequence[MetadataRecord]) -> MetadataImage:
    return image.apply(records, image.offset + len(records))


def test_fencing_the_leader_elects_the_next_live_replica_in_replica_order() -> None:
    image = build(THREE, [partition(0, [1, 3, 2], leader_epoch=4, partition_epoch=6)])
    assert fence_changes(image, 1) == [PartitionRecord(TOPIC_ID, 0, (1, 3, 2), (3, 2), 3, 5, 7)]


def test_fencing_a_follower_keeps_the_leader_and_epoch() -> None:
    image = build(THREE, [partition(0, [1, 2, 3], leader_epoch=4, partition_epoch=6)])
    assert fence_changes(image, 2) == [PartitionRecord(TOPIC_ID, 0, (1, 2, 3), (1, 3), 1, 4, 7)]


def test_fencing_the_last_isr_member_keeps_it_in_the_isr_without_leader() -> None:
    image = build(THREE, [partition(0, [1, 2], isr=[1], leader_epoch=2, partition_epoch=3)])
    assert fence_changes(image, 1) == [PartitionRecord(TOPIC_ID, 0, (1, 2), (1,), -1, 3, 4)]


def test_no_unclean_election_of_a_replica_outside_the_isr() -> None:
    image = build(THREE, [partition(0, [1, 2, 3], isr=[1, 2])])
    image = commit(image, [FenceBrokerRecord(2, 2), *fence_changes(image, 2)])
    assert part(image, 0).isr == (1,)
    changes = fence_changes(image, 1)
    assert [(c.isr, c.leader) for c in changes] == [((1,), -1)]  # 3 is live but not in the ISR


def test_fenced_replicas_in_the_isr_are_not_elected() -> None:
    image = build([registration(1), registration(2, fenced=True), registration(3)],
                  [partition(0, [1, 2, 3])])
    assert fence_changes(image, 1)[0].leader == 3


def test_partitions_without_the_broker_are_untouched() -> None:
    image = build(THREE, [partition(0, [2, 3]), partition(1, [1, 2], isr=[2])])
    assert fence_changes(image, 1) == []


def test_unfencing_restores_leadership_of_leaderless_partitions() -> None:
    image = build(THREE, [partition(0, [1, 2], isr=[1], leader_epoch=2, partition_epoch=3),
                          partition(1, [2, 1], isr=[2, 1]), partition(2, [1, 3], isr=[3])])
    image = commit(image, [FenceBrokerRecord(1, 1), *fence_changes(image, 1)])
    assert part(image, 0).leader == -1 and part(image, 1).isr == (2,)

    changes = unfence_changes(image, 1)
    assert changes == [PartitionRecord(TOPIC_ID, 0, (1, 2), (1,), 1, 4, 5)]
    image = commit(image, [UnfenceBrokerRecord(1, 1), *changes])
    assert part(image, 0).leader == 1
    assert part(image, 1).isr == (2,)  # rejoining the ISR is the leader's decision once broker 1 catches up


def test_unfencing_prefers_replica_order_among_returning_isr_members() -> None:
    brokers = [registration(1, fenced=True), registration(2, fenced=True), registration(3)]
    image = build(brokers, [partition(0, [1, 2, 3], isr=[2, 1], leader=-1)])
    assert [c.leader for c in unfence_changes(image, 2)] == [2]  # broker 1 is still fenced


def test_preferred_leader_election() -> None:
    image = build([registration(1), registration(2), registration(3, fenced=True)],
                  [partition(0, [1, 2], leader=2, leader_epoch=3, partition_epoch=5),
                   partition(1, [3, 1], leader=1), partition(2, [2, 1], isr=[1], leader=1),
                   partition(3, [1, 2])])
    assert preferred_leader_changes(image) == [PartitionRecord(TOPIC_ID, 0, (1, 2), (1, 2), 1, 4, 6)]
    assert preferred_leader_changes(image, topic_ids=set()) == []


def test_unclean_election_when_the_topic_allows_it() -> None:
    image = build(THREE, [partition(0, [1, 2, 3], isr=[1, 2])])
    image = commit(image, [FenceBrokerRecord(2, 2), *fence_changes(image, 2)])
    changes = fence_changes(image, 1, allow_unclean=lambda topic: topic == "t")
    assert [(c.isr, c.leader) for c in changes] == [((3,), 3)], "3 leads alone, out of sync but live"


def test_a_returning_out_of_sync_replica_leads_a_leaderless_partition_only_if_unclean_is_allowed() -> None:
    image = build([registration(1, fenced=True), registration(2), registration(3, fenced=True)],
                  [partition(0, [1, 2, 3], isr=[1], leader=-1)])
    assert unfence_changes(image, 3) == []
    changes = unfence_changes(image, 3, allow_unclean=lambda topic: True)
    assert [(c.isr, c.leader) for c in changes] == [((2,), 2)], "the first live replica in replica order"


def test_unclean_leader_changes_prefer_a_live_isr_member() -> None:
    image = build([registration(1, fenced=True), registration(2), registration(3)],
                  [partition(0, [1, 2, 3], isr=[1, 3], leader=-1)])
    (change,) = unclean_leader_changes(image, TOPIC_ID, part(image, 0))
    assert (change.leader, change.isr) == (3, (1, 3))
    dead = build([registration(1, fenced=True), registration(2, fenced=True)],
                 [partition(0, [1, 2], isr=[1], leader=-1)])
    assert unclean_leader_changes(dead, TOPIC_ID, part(dead, 0)) == []


def test_preferred_election_of_one_partition_only() -> None:
    image = build(THREE, [partition(0, [1, 2, 3], leader=2), partition(1, [1, 2, 3], leader=3),
                          partition(2, [1, 2, 3], leader=1)])
    assert [c.partition for c in preferred_leader_change(image, TOPIC_ID, part(image, 1))] == [1]
    assert preferred_leader_change(image, TOPIC_ID, part(image, 2)) == [], "already led by its first replica"


def test_imbalance_counts_preferred_leaderships_held_elsewhere() -> None:
    image = build(THREE, [partition(0, [1, 2], leader=2), partition(1, [1, 2], leader=1),
                          partition(2, [2, 1], leader=2), partition(3, [3, 1], leader=3)])
    assert imbalanced_brokers(image, 10) == {1}, "broker 1 leads 1 of its 2 preferred partitions"
    assert imbalanced_brokers(image, 50) == set(), "50% is not more than 50%"
