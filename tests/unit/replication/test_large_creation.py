"""An image that brings thousands of new partitions to a broker has their logs made on first use, not all in the
turn of the event loop that applies it; a few new partitions (an internal topic's 50) are made at once."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from moldau.replication.replica_manager import EAGER_NEW_LOGS_MAX, ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import START_MS, batches_of, decode, make_batch

NODE = 1


class Node:
    """One broker's replica manager following images built here."""

    def __init__(self, root: Path) -> None:
        self.clock = ManualClock(START_MS)
        self.replicas = ReplicaManager(NODE, LogManager([str(root)], self.clock, LogConfig()),
                                       lambda image, topic: LogConfig(), clock=self.clock)
        registration = RegisterBrokerRecord(NODE, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9091),), None)
        self.image = MetadataImage().apply([registration], 0)

    def create_topic(self, name: str, partitions: int) -> None:
        topic_id = uuid.uuid4()
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += [PartitionRecord(topic_id, p, (NODE,), (NODE,), NODE, 0, 0) for p in range(partitions)]
        before, self.image = self.image, self.image.apply(records, self.image.offset + 1)
        self.replicas.apply_image(before, self.image)

    def made(self, topic: str) -> list[bool]:
        return [hosted.log.on_disk and os.path.isdir(hosted.log.directory)
                for (name, _), hosted in sorted(self.replicas.partitions.items()) if name == topic]

    def close(self) -> None:
        self.replicas.close()
        self.replicas.log_manager.close()


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    opened = Node(tmp_path)
    yield opened
    opened.close()


def test_a_large_creation_is_hosted_at_once_and_made_on_disk_on_first_use(node: Node) -> None:
    node.create_topic("big", EAGER_NEW_LOGS_MAX + 1)
    assert node.made("big") == [False] * (EAGER_NEW_LOGS_MAX + 1)
    hosted = node.replicas.partitions[("big", 3)]
    assert hosted.leader_state is not None  # led, and answering, before its directory exists
    node.replicas.append_as_leader(hosted, batches_of(make_batch([b"a", b"b"])))
    assert hosted.log.on_disk and [v for _, v in decode(hosted.log.read(0, 1 << 20, True).read_bytes())] == \
        [b"a", b"b"]
    assert node.made("big").count(True) == 1


def test_a_few_new_partitions_are_made_at_once(node: Node) -> None:
    node.create_topic("small", EAGER_NEW_LOGS_MAX)
    assert node.made("small") == [True] * EAGER_NEW_LOGS_MAX
