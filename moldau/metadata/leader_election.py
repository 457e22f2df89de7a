"""Leader and ISR changes when brokers come and go: pure functions from an image to PartitionRecords.

The controller calls these before committing a fence, an unfence or a preferred-leader election and commits the
records they return with it. Only changed partitions get a record. The rules are Kafka's (PartitionChangeBuilder)
with unclean leader election off:

- a leader is always a replica that is in the ISR and live (registered and unfenced); if there is none, the
  partition has no leader (-1) rather than one that may have lost committed records;
- a fenced broker leaves the ISR, except the last member, which stays so the partition can elect it again when it
  comes back (it is the only replica known to have every committed record);
- leader_epoch grows when the leader changes, partition_epoch on any change.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection

from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage
from moldau.metadata.records import PartitionRecord

Eligible = Callable[[int], bool]


def fence_changes(image: MetadataImage, broker_id: int) -> list[PartitionRecord]:
    """Take the broker out of every ISR it is in (unless it is the last member) and out of leadership."""
    eligible = _live_except(image, broker_id)
    changes = []
    for topic, partition in image.partitions_of(broker_id):
        if broker_id not in partition.isr and partition.leader != broker_id:
            continue
        isr = tuple(b for b in partition.isr if b != broker_id) or partition.isr
        leader = partition.leader
        if leader in (broker_id, NO_LEADER) or leader not in isr:
            leader = _elect(partition.replicas, isr, eligible)
        changes += _change(topic.topic_id, partition, isr, leader)
    return changes


def unfence_changes(image: MetadataImage, broker_id: int) -> list[PartitionRecord]:
    """Give leaderless partitions whose ISR holds the broker a leader again, now that the broker is back.

    The image is the one before the broker's UnfenceBrokerRecord applies, so the broker counts as live here.
    """
    live = _live_except(image, broker_id)

    def eligible(b: int) -> bool:
        return b == broker_id or live(b)

    changes = []
    for topic, partition in image.partitions_of(broker_id):
        if partition.leader == NO_LEADER and broker_id in partition.isr:
            leader = _elect(partition.replicas, partition.isr, eligible)
            changes += _change(topic.topic_id, partition, partition.isr, leader)
    return changes


def preferred_leader_changes(image: MetadataImage,
                             topic_ids: Collection[uuid.UUID] | None = None) -> list[PartitionRecord]:
    """Move leadership back to each partition's first replica where it is in the ISR and live (all topics if None).

    Placement spreads first replicas evenly, so this undoes the imbalance that failovers leave behind.
    """
    changes = []
    for _, topic in sorted(image.topics_by_name.items()):
        if topic_ids is not None and topic.topic_id not in topic_ids:
            continue
        for _, partition in sorted(topic.partitions.items()):
            preferred = partition.replicas[0] if partition.replicas else NO_LEADER
            if partition.leader != preferred and preferred in partition.isr and image.is_live(preferred):
                changes += _change(topic.topic_id, partition, partition.isr, preferred)
    return changes


def _live_except(image: MetadataImage, broker_id: int) -> Eligible:
    def eligible(b: int) -> bool:
        return b != broker_id and image.is_live(b)

    return eligible


def _elect(replicas: tuple[int, ...], isr: tuple[int, ...], eligible: Eligible) -> int:
    # Replica order, not ISR order: the first replica is the preferred leader, so ties go its way.
    return next((b for b in replicas if b in isr and eligible(b)), NO_LEADER)


def _change(topic_id: uuid.UUID, partition: PartitionImage, isr: tuple[int, ...], leader: int) -> list[PartitionRecord]:
    if isr == partition.isr and leader == partition.leader:
        return []
    leader_epoch = partition.leader_epoch + (leader != partition.leader)
    return [PartitionRecord(topic_id, partition.partition, partition.replicas, isr, leader, leader_epoch,
                            partition.partition_epoch + 1)]
