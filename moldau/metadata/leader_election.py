"""Leader and ISR changes when brokers come and go: pure functions from an image to PartitionRecords.

The controller calls these before committing a fence, an unfence or a preferred-leader election and commits the
records they return with it. Only changed partitions get a record. The rules are Kafka's (PartitionChangeBuilder):

- a leader is always a replica that is in the ISR and online (its broker registered and unfenced, and the log
  directory holding it not reported offline, KIP-858); if there is none, the
  partition has no leader (-1) rather than one that may have lost committed records — unless the topic has
  `unclean.leader.election.enable=true`: then any live replica may lead, with an ISR of itself alone, accepting
  the loss of whatever it lacks (availability over durability, the operator's explicit choice);
- a fenced broker leaves the ISR, except the last member, which stays so the partition can elect it again when it
  comes back (it is the only replica known to have every committed record);
- leader_epoch grows when the leader changes, partition_epoch on any change.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable

from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import PartitionRecord

Eligible = Callable[[int], bool]
# Whether a topic (by name) allows unclean leader election.
AllowUnclean = Callable[[str], bool]


def _never(topic: str) -> bool:
    return False


def _once_per_topic(allow_unclean: AllowUnclean) -> AllowUnclean:
    """`allow_unclean` asked once per topic: resolving a config is not free, and a topic may have 10,000
    partitions."""
    answers: dict[str, bool] = {}

    def cached(topic: str) -> bool:
        if topic not in answers:
            answers[topic] = allow_unclean(topic)
        return answers[topic]

    return cached


def fence_changes(image: MetadataImage, broker_id: int, allow_unclean: AllowUnclean = _never, *,
                  keep_sole_leaderships: bool = False) -> list[PartitionRecord]:
    """Take the broker out of every ISR it is in (unless it is the last member) and out of leadership.

    `keep_sole_leaderships`: a broker that stopped cleanly, and registers again before anyone took over from it,
    keeps leading the partitions nobody else could lead (they would only become leaderless until it is back, and
    then be elected to it again, two records each, with nothing in its log changed), at the same leader epoch."""
    return replica_leave_changes(image, broker_id, image.partitions_of(broker_id), allow_unclean,
                                 keep_sole_leaderships=keep_sole_leaderships)


def replica_leave_changes(image: MetadataImage, broker_id: int,
                          partitions: Iterable[tuple[TopicImage, PartitionImage]],
                          allow_unclean: AllowUnclean = _never, *,
                          keep_sole_leaderships: bool = False) -> list[PartitionRecord]:
    """Take the broker's replicas of these partitions out of their ISR (unless it is the last member) and out of
    leadership, electing another online ISR member where the broker led: a fenced broker, or a log directory of
    the broker gone offline. `keep_sole_leaderships`: see `fence_changes`."""
    allow_unclean = _once_per_topic(allow_unclean)
    changes = []
    for topic, partition in partitions:
        if broker_id not in partition.isr and partition.leader != broker_id:
            continue
        eligible = _online_except(image, broker_id, partition)
        isr = tuple(b for b in partition.isr if b != broker_id) or partition.isr
        leader = partition.leader
        if leader in (broker_id, NO_LEADER) or leader not in isr:
            leader = elect(partition.replicas, isr, eligible)
        if leader == NO_LEADER and allow_unclean(topic.name):
            leader, isr = _elect_unclean(partition.replicas, eligible, isr)
        if keep_sole_leaderships and leader == NO_LEADER and partition.leader == broker_id and isr == partition.isr:
            continue
        changes += _change(topic.topic_id, partition, isr, leader)
    return changes


def unfence_changes(image: MetadataImage, broker_id: int,
                    allow_unclean: AllowUnclean = _never) -> list[PartitionRecord]:
    """Give leaderless partitions whose ISR holds the broker a leader again, now that the broker is back (or, for
    topics allowing unclean election, any leaderless partition the broker is a replica of).

    The image is the one before the broker's UnfenceBrokerRecord applies, so the broker counts as live here
    (for the replicas in its online directories).
    """
    registration = image.brokers.get(broker_id)
    online_dirs = registration.log_dirs if registration is not None else ()
    allow_unclean = _once_per_topic(allow_unclean)
    changes = []
    for topic, partition in image.partitions_of(broker_id):
        directory = partition.directory_of(broker_id)
        if directory and online_dirs and directory not in online_dirs:
            continue  # this replica's directory is offline: it cannot lead

        def eligible(b: int, partition: PartitionImage = partition) -> bool:
            return b == broker_id or image.replica_online(b, partition)

        if partition.leader == NO_LEADER and broker_id in partition.isr:
            leader = elect(partition.replicas, partition.isr, eligible)
            changes += _change(topic.topic_id, partition, partition.isr, leader)
        elif partition.leader == NO_LEADER and allow_unclean(topic.name):
            leader, isr = _elect_unclean(partition.replicas, eligible, partition.isr)
            changes += _change(topic.topic_id, partition, isr, leader)
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
            changes += preferred_leader_change(image, topic.topic_id, partition)
    return changes


def preferred_leader_change(image: MetadataImage, topic_id: uuid.UUID,
                            partition: PartitionImage) -> list[PartitionRecord]:
    """The record making one partition's first replica its leader, if it is not already and is live and in
    the ISR; else nothing."""
    preferred = partition.replicas[0] if partition.replicas else NO_LEADER
    if partition.leader != preferred and preferred in partition.isr and image.replica_online(preferred, partition):
        return _change(topic_id, partition, partition.isr, preferred)
    return []


def unclean_leader_changes(image: MetadataImage, topic_id: uuid.UUID,
                           partition: PartitionImage) -> list[PartitionRecord]:
    """Elect a leaderless partition's leader: a live ISR member if any, else any live replica (with an ISR of
    itself alone). Empty if no replica is live."""
    def live(b: int) -> bool:
        return image.replica_online(b, partition)

    leader = elect(partition.replicas, partition.isr, live)
    if leader != NO_LEADER:
        return _change(topic_id, partition, partition.isr, leader)
    leader, isr = _elect_unclean(partition.replicas, live, partition.isr)
    return _change(topic_id, partition, isr, leader) if leader != NO_LEADER else []


def _online_except(image: MetadataImage, broker_id: int, partition: PartitionImage) -> Eligible:
    def eligible(b: int) -> bool:
        return b != broker_id and image.replica_online(b, partition)

    return eligible


def elect(replicas: tuple[int, ...], isr: tuple[int, ...], eligible: Eligible) -> int:
    """The first replica, in replica order, that is in the ISR and eligible (live); NO_LEADER if none."""
    # Replica order, not ISR order: the first replica is the preferred leader, so ties go its way.
    return next((b for b in replicas if b in isr and eligible(b)), NO_LEADER)


def _elect_unclean(replicas: tuple[int, ...], eligible: Eligible,
                   isr: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    leader = next((b for b in replicas if eligible(b)), NO_LEADER)
    return (leader, (leader,)) if leader != NO_LEADER else (NO_LEADER, isr)


def _change(topic_id: uuid.UUID, partition: PartitionImage, isr: tuple[int, ...], leader: int) -> list[PartitionRecord]:
    if isr == partition.isr and leader == partition.leader:
        return []
    leader_epoch = partition.leader_epoch + (leader != partition.leader)
    return [PartitionRecord(topic_id, partition.partition, partition.replicas, isr, leader, leader_epoch,
                            partition.partition_epoch + 1, partition.adding_replicas, partition.removing_replicas)]


def imbalanced_brokers(image: MetadataImage, max_imbalance_percent: int) -> set[int]:
    """Live brokers that lead less than they should: more than `max_imbalance_percent` of the partitions they are
    the preferred (first) replica of are led by another broker (Kafka's leader.imbalance.per.broker.percentage)."""
    preferred: dict[int, int] = {}
    elsewhere: dict[int, int] = {}
    for topic in image.topics_by_id.values():
        for partition in topic.partitions.values():
            if not partition.replicas:
                continue
            first = partition.replicas[0]
            preferred[first] = preferred.get(first, 0) + 1
            if partition.leader != first:
                elsewhere[first] = elsewhere.get(first, 0) + 1
    return {b for b, n in preferred.items()
            if image.is_live(b) and elsewhere.get(b, 0) * 100 > max_imbalance_percent * n}
