"""Small images for the metadata tests: brokers and partitions of one topic, by hand."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from moldau.metadata.image import MetadataImage, PartitionImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord

TOPIC_ID = uuid.UUID(int=1)


def registration(broker_id: int, epoch: int = 10, fenced: bool = False,
                 rack: str | None = None) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(broker_id, uuid.UUID(int=100 + broker_id),
                                (Endpoint("PLAINTEXT", f"host{broker_id}", 9092),), rack, epoch, fenced)


def partition(p: int, replicas: Sequence[int], isr: Sequence[int] | None = None, leader: int | None = None,
              leader_epoch: int = 0, partition_epoch: int = 0) -> PartitionRecord:
    isr = tuple(replicas) if isr is None else tuple(isr)
    leader = (isr[0] if isr else -1) if leader is None else leader
    return PartitionRecord(TOPIC_ID, p, tuple(replicas), isr, leader, leader_epoch, partition_epoch)


def build(brokers: Iterable[RegisterBrokerRecord], partitions: Iterable[PartitionRecord] = ()) -> MetadataImage:
    records: list[MetadataRecord] = [*brokers, TopicRecord("t", TOPIC_ID), *partitions]
    return MetadataImage().apply(records, len(records) - 1)


def part(image: MetadataImage, p: int) -> PartitionImage:
    return image.topics_by_id[TOPIC_ID].partitions[p]
