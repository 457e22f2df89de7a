"""Log directories in the cluster metadata (KIP-858): which directory holds each replica, and what the controller
does when a broker reports one offline. Pure functions from an image to records; the controller commits them.

A broker lists its online directories (`directory.id`s) when it registers, assigns each replica it hosts to a
directory (AssignReplicasToDirs), and names failed directories in its heartbeats (OfflineLogDirs). A replica
assigned to a directory its broker no longer lists is offline: it leaves its ISR (unless it is the last member)
and, if it led, another online ISR member takes over with a new leader epoch, as when the whole broker is fenced.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable

from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.leader_election import AllowUnclean, replica_leave_changes
from moldau.metadata.records import BrokerRegistrationChangeRecord, MetadataRecord, PartitionRecord
from moldau.protocol.errors import ErrorCode

# One replica assignment: (directory.id, topic id, partition).
Assignment = tuple[str, uuid.UUID, int]


def _never(topic: str) -> bool:
    return False


def offline_dir_changes(image: MetadataImage, broker_id: int, offline_dirs: Collection[str],
                        allow_unclean: AllowUnclean = _never) -> list[MetadataRecord]:
    """Records taking these directories out of the broker's online ones and its replicas in them out of their
    ISRs and leadership; empty if none of them is listed online (already handled, or never announced), or if
    none would be left (the broker is then fenced instead: see `all_offline`)."""
    registration = image.brokers.get(broker_id)
    if registration is None or not registration.log_dirs:
        return []
    lost = set(offline_dirs) & set(registration.log_dirs)
    if not lost:
        return []
    online = tuple(d for d in registration.log_dirs if d not in lost)
    if not online:
        return []
    records: list[MetadataRecord] = [BrokerRegistrationChangeRecord(broker_id, registration.broker_epoch, online)]
    records += replica_leave_changes(image, broker_id, replicas_in(image, broker_id, lost), allow_unclean)
    return records


def all_offline(image: MetadataImage, broker_id: int, offline_dirs: Collection[str]) -> bool:
    """Whether every directory the broker registered is now offline: it can serve nothing, so it is fenced (an
    empty list of online directories would read as "not reported", every replica online)."""
    registration = image.brokers.get(broker_id)
    return registration is not None and bool(registration.log_dirs) and set(registration.log_dirs) <= set(
        offline_dirs)


def replicas_in(image: MetadataImage, broker_id: int,
                directories: Collection[str]) -> list[tuple[TopicImage, PartitionImage]]:
    """The broker's replicas assigned to any of these directories."""
    return [(t, p) for t, p in image.partitions_of(broker_id) if p.directory_of(broker_id) in directories]


def assignment_changes(image: MetadataImage, broker_id: int, assignments: Iterable[Assignment],
                       allow_unclean: AllowUnclean = _never
                       ) -> tuple[list[MetadataRecord], dict[tuple[uuid.UUID, int], ErrorCode]]:
    """Record where the broker's replicas are (AssignReplicasToDirs): the records to commit and each
    assignment's outcome. A replica assigned to a directory the broker does not list as online is offline, so
    it also leaves its ISR and leadership. Partition epochs stay: only the placement on disk changed."""
    registration = image.brokers.get(broker_id)
    online = registration.log_dirs if registration is not None else ()
    outcomes: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    records: list[MetadataRecord] = []
    moved_offline: list[tuple[TopicImage, PartitionImage]] = []
    for directory, topic_id, index in assignments:
        topic = image.topics_by_id.get(topic_id)
        partition = topic.partitions.get(index) if topic is not None else None
        if topic is None:
            outcomes[(topic_id, index)] = ErrorCode.unknown_topic_id
        elif partition is None:
            outcomes[(topic_id, index)] = ErrorCode.unknown_topic_or_partition
        elif broker_id not in partition.replicas:
            outcomes[(topic_id, index)] = ErrorCode.not_leader_or_follower
        else:
            outcomes[(topic_id, index)] = ErrorCode.none
            if partition.directory_of(broker_id) == directory:
                continue
            records.append(_assigned(topic_id, partition, broker_id, directory))
            if online and directory not in online:
                moved_offline.append((topic, partition))
    if moved_offline:
        assigned = image.apply(records, image.offset)
        lost = [(assigned.topics_by_id[t.topic_id], assigned.topics_by_id[t.topic_id].partitions[p.partition])
                for t, p in moved_offline]
        records += replica_leave_changes(assigned, broker_id, lost, allow_unclean)
    return records, outcomes


def _assigned(topic_id: uuid.UUID, partition: PartitionImage, broker_id: int, directory: str) -> PartitionRecord:
    directories = tuple(directory if b == broker_id else partition.directory_of(b) for b in partition.replicas)
    p = partition
    return PartitionRecord(topic_id, p.partition, p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                           p.adding_replicas, p.removing_replicas, directories)
