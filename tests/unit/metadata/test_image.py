"""Replaying broker records into the image, and snapshots of the image as records."""

from __future__ import annotations

import uuid

from moldau.metadata.image import MetadataImage
from moldau.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
)
from tests.unit.metadata.builders import build, partition, registration


def apply(image: MetadataImage, *records: MetadataRecord) -> MetadataImage:
    return image.apply(records, image.offset + len(records))


def test_fence_and_unfence_with_the_current_epoch() -> None:
    image = build([registration(1, epoch=3, fenced=True), registration(2, epoch=4)])
    assert image.live_brokers() == [2]
    image = apply(image, UnfenceBrokerRecord(1, 3))
    assert image.live_brokers() == [1, 2] and image.is_live(1)
    image = apply(image, FenceBrokerRecord(2, 4))
    assert image.live_brokers() == [1] and not image.is_live(2)
    assert image.brokers[2].endpoints == registration(2).endpoints  # the rest of the registration is kept


def test_stale_epochs_are_ignored() -> None:
    image = build([registration(1, epoch=3, fenced=True)])
    image = apply(image, registration(1, epoch=9, fenced=False))  # a newer incarnation
    for stale in (FenceBrokerRecord(1, 3), UnregisterBrokerRecord(1, 3)):
        assert apply(image, stale).brokers == image.brokers
    fenced = apply(image, FenceBrokerRecord(1, 9))
    assert apply(fenced, UnfenceBrokerRecord(1, 3)).brokers[1].fenced
    assert apply(image, FenceBrokerRecord(7, 9)).brokers == image.brokers  # unknown broker


def test_unregister_drops_the_registration() -> None:
    image = apply(build([registration(1, epoch=3), registration(2)]), UnregisterBrokerRecord(1, 3))
    assert list(image.brokers) == [2]
    assert not image.is_live(1)


def test_registration_replaces_the_old_incarnation() -> None:
    image = apply(build([registration(1, epoch=3)]), registration(1, epoch=8, fenced=True, rack="r"))
    assert image.brokers[1].broker_epoch == 8 and image.brokers[1].fenced and image.brokers[1].rack == "r"


def test_partitions_of() -> None:
    image = build([registration(1), registration(2)],
                  [partition(1, [2, 1]), partition(0, [1]), partition(2, [2])])
    assert [p.partition for _, p in image.partitions_of(1)] == [0, 1]
    assert image.partitions_of(3) == []


def test_removing_every_config_leaves_no_empty_entry() -> None:
    image = apply(MetadataImage(), ConfigRecord(RESOURCE_BROKER, "", "a", "1"))
    image = apply(image, ConfigRecord(RESOURCE_BROKER, "", "a", None))
    assert dict(image.configs) == {} and dict(image.broker_configs()) == {}


def test_snapshot_recreates_a_rich_image() -> None:
    t1, t2, gone = uuid.UUID(int=11), uuid.UUID(int=12), uuid.UUID(int=13)
    history: list[MetadataRecord] = [
        registration(1, epoch=0), registration(2, epoch=1, rack="b"), registration(3, epoch=2, fenced=True),
        registration(4, epoch=3), UnfenceBrokerRecord(3, 2), FenceBrokerRecord(1, 0), UnregisterBrokerRecord(4, 3),
        TopicRecord("orders", t1), ConfigRecord(RESOURCE_TOPIC, "orders", "retention.ms", "1000"),
        ConfigRecord(RESOURCE_TOPIC, "orders", "cleanup.policy", "compact"),
        PartitionRecord(t1, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0), PartitionRecord(t1, 1, (2, 3, 1), (2, 3, 1), 2, 0, 0),
        PartitionRecord(t1, 0, (1, 2, 3), (2, 3), 2, 1, 1),
        TopicRecord("__consumer_offsets", t2), PartitionRecord(t2, 0, (3,), (3,), -1, 4, 7),
        TopicRecord("gone", gone), ConfigRecord(RESOURCE_TOPIC, "gone", "x", "y"), RemoveTopicRecord(gone),
        ConfigRecord(RESOURCE_BROKER, "", "log.retention.ms", "5"), ConfigRecord(RESOURCE_BROKER, "2", "z", "1"),
        ConfigRecord(RESOURCE_BROKER, "2", "z", None), ConfigRecord(RESOURCE_BROKER, "3", "k", "v"),
        ProducerIdsRecord(1, 1000), ProducerIdsRecord(2, 2000),
    ]
    image = MetadataImage().apply(history, 99)
    assert image.live_brokers() == [2, 3] and image.brokers[1].fenced

    snapshot = image.to_records()
    rebuilt = MetadataImage().apply(snapshot, image.offset)
    assert rebuilt == image
    assert len(snapshot) < len(history)


def test_snapshot_of_an_empty_image() -> None:
    assert MetadataImage().to_records() == []
    assert MetadataImage().apply([], -1) == MetadataImage()
