"""Partition reassignment (KIP-455): pure functions from a partition's state to its next PartitionRecord.

A reassignment moves a partition to a *target* replica list without stopping it:

1. *Start*: the replicas become the target followed by the current replicas that are not in it (target first, as
   in Kafka, so the preferred leader is the target's first broker); `adding_replicas` are the target replicas the
   partition does not have yet, `removing_replicas` the current ones the target drops. The ISR is unchanged: the
   new replicas start empty, create their logs and fetch from the leader like any follower.
2. *Catch-up*: the leader adds each new replica to the ISR once it has caught up (AlterPartition), as always.
3. *Completion*: once every target replica is in the ISR, the replicas become the target, the ISR keeps only
   target replicas and both lists empty. If the leader is being removed, the first target replica that is in the
   ISR and live leads instead (a new leader epoch). Brokers no longer listed delete their copy.

A reassignment is cancelled by reverting to the original replicas (the current ones without those being added),
with the added replicas out of the ISR and a new leader if the leader was one of them. A new target given during
a reassignment replaces the old target the same way: it starts from the original replicas.

Every change increases the partition epoch; a change of leader increases the leader epoch.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from moldau.metadata.image import NO_LEADER, PartitionImage
from moldau.metadata.leader_election import elect
from moldau.metadata.records import PartitionRecord
from moldau.protocol.errors import ErrorCode, KafkaError

# Whether a broker may lead and be in an ISR (registered and unfenced).
IsLive = Callable[[int], bool]


def original_replicas(partition: PartitionImage) -> tuple[int, ...]:
    """The replicas the partition had before its reassignment started (its replicas if none is in progress)."""
    return tuple(b for b in partition.replicas if b not in partition.adding_replicas)


def start(topic_id: uuid.UUID, partition: PartitionImage, target: Sequence[int],
          is_live: IsLive) -> PartitionRecord | None:
    """The record that starts moving the partition to `target` (completed at once if the target is already in
    sync), or None if the partition already has exactly these replicas and no reassignment.

    Raises KafkaError INVALID_REPLICA_ASSIGNMENT if no replica in sync would remain.
    """
    target = tuple(target)
    original = original_replicas(partition)
    adding = tuple(b for b in target if b not in original)
    removing = tuple(b for b in original if b not in target)
    replicas = target + removing
    if replicas == partition.replicas and adding == partition.adding_replicas \
            and removing == partition.removing_replicas:
        return None
    changed = _with_replicas(partition, replicas, adding, removing, is_live)
    # One change, one partition epoch: a target already in sync completes in the same record.
    done = _completed(changed, is_live)
    return _record(topic_id, done or changed)


def cancel(topic_id: uuid.UUID, partition: PartitionImage, is_live: IsLive) -> PartitionRecord:
    """The record that reverts a reassignment in progress to the original replicas.

    Raises KafkaError NO_REASSIGNMENT_IN_PROGRESS, or INVALID_REPLICA_ASSIGNMENT if only added replicas are in
    sync (reverting would lose their records).
    """
    if not partition.reassigning:
        raise KafkaError(ErrorCode.no_reassignment_in_progress, f"partition {partition.partition} is not being "
                         "reassigned")
    return _record(topic_id, _with_replicas(partition, original_replicas(partition), (), (), is_live))


def complete_if_in_sync(record: PartitionRecord, is_live: IsLive) -> PartitionRecord:
    """`record` (a change to a partition, not yet committed), completing its reassignment if that is now possible.
    The partition epoch stays the record's: the completion is part of the same change."""
    image = PartitionImage(record.partition, record.replicas, record.isr, record.leader, record.leader_epoch,
                           record.partition_epoch, record.adding_replicas, record.removing_replicas)
    done = _completed(image, is_live)
    return record if done is None else _record(record.topic_id, done)


def _with_replicas(partition: PartitionImage, replicas: tuple[int, ...], adding: tuple[int, ...],
                   removing: tuple[int, ...], is_live: IsLive) -> PartitionImage:
    """The partition with new replica lists: the ISR keeps only listed replicas, the leader is re-elected if it is
    no longer listed."""
    isr = tuple(b for b in partition.isr if b in replicas)
    if not isr:
        raise KafkaError(ErrorCode.invalid_replica_assignment,
                         f"partition {partition.partition}: none of {list(replicas)} is in sync "
                         f"(ISR {list(partition.isr)}); the change would lose committed records")
    leader = partition.leader
    if leader not in isr:
        leader = elect(replicas, isr, is_live)
    return PartitionImage(partition.partition, replicas, isr, leader,
                          partition.leader_epoch + (leader != partition.leader), partition.partition_epoch + 1,
                          adding, removing)


def _completed(partition: PartitionImage, is_live: IsLive) -> PartitionImage | None:
    """The partition with its reassignment completed, if every target replica is in sync; the partition epoch is
    left as it is (a completion is always part of another change that already counted it)."""
    if not partition.reassigning:
        return None
    target = partition.target_replicas
    if any(b not in partition.isr for b in target):
        return None
    isr = tuple(b for b in partition.isr if b in target)
    leader = partition.leader
    if leader not in target:
        leader = elect(target, isr, is_live)
        if leader == NO_LEADER:
            return None  # no target replica could lead: keep the current leader until one can
    return PartitionImage(partition.partition, target, isr, leader,
                          partition.leader_epoch + (leader != partition.leader), partition.partition_epoch)


def _record(topic_id: uuid.UUID, p: PartitionImage) -> PartitionRecord:
    return PartitionRecord(topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                           p.adding_replicas, p.removing_replicas)
