"""A replica manager following an image built here: brokers registered, one topic `t` with the given partitions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import START_MS

TOPIC = "t"


def hosting(tmp_path: Path, node_id: int, brokers: Iterable[int],
            partitions: Callable[[uuid.UUID], list[PartitionRecord]]) -> ReplicaManager:
    """The replica manager of broker `node_id`, after the image with `partitions(topic_id)` of topic `t`."""
    clock = ManualClock(START_MS)
    manager = ReplicaManager(node_id, LogManager([str(tmp_path)], clock, LogConfig()),
                             lambda image, topic: LogConfig(), clock=clock)
    topic_id = uuid.uuid4()
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(b, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),), None) for b in brokers]
    records += [TopicRecord(TOPIC, topic_id), *partitions(topic_id)]
    manager.apply_image(None, MetadataImage().apply(records, len(records) - 1))
    return manager


def close(manager: ReplicaManager) -> None:
    manager.close()
    manager.log_manager.close()
