"""`leader_partition`'s errors are Kafka's: a partition the metadata knows but this broker does not host is
NOT_LEADER_OR_FOLLOWER (a client refreshes its metadata and goes to the leader), one the metadata does not know
is UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import START_MS

HERE, ELSEWHERE = 1, 2


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    clock = ManualClock(START_MS)
    manager = ReplicaManager(HERE, LogManager([str(tmp_path)], clock, LogConfig()),
                             lambda image, topic: LogConfig(), clock=clock)
    topic_id = uuid.uuid4()
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(b, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),), None)
        for b in (HERE, ELSEWHERE)]
    records += [TopicRecord("t", topic_id),
                PartitionRecord(topic_id, 0, (HERE,), (HERE,), HERE, 0, 0),
                PartitionRecord(topic_id, 1, (ELSEWHERE,), (ELSEWHERE,), ELSEWHERE, 0, 0)]
    manager.apply_image(None, MetadataImage().apply(records, len(records) - 1))
    yield manager
    manager.close()
    manager.log_manager.close()


def code_of(replicas: ReplicaManager, topic: str, partition: int) -> ErrorCode:
    try:
        replicas.leader_partition(topic, partition)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


def test_known_but_hosted_elsewhere_is_not_leader_and_unknown_is_unknown(replicas: ReplicaManager) -> None:
    assert code_of(replicas, "t", 0) == ErrorCode.none
    assert code_of(replicas, "t", 1) == ErrorCode.not_leader_or_follower
    assert code_of(replicas, "t", 2) == ErrorCode.unknown_topic_or_partition
    assert code_of(replicas, "nope", 0) == ErrorCode.unknown_topic_or_partition
