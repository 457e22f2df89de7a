"""`leader_partition`'s errors are Kafka's: a partition the metadata knows but this broker does not host is
NOT_LEADER_OR_FOLLOWER (a client refreshes its metadata and goes to the leader), one the metadata does not know
is UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.metadata.records import PartitionRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from tests.unit.replication.hosting import TOPIC, close, hosting

HERE, ELSEWHERE = 1, 2


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    manager = hosting(tmp_path, HERE, (HERE, ELSEWHERE), lambda topic_id: [
        PartitionRecord(topic_id, 0, (HERE,), (HERE,), HERE, 0, 0),
        PartitionRecord(topic_id, 1, (ELSEWHERE,), (ELSEWHERE,), ELSEWHERE, 0, 0)])
    yield manager
    close(manager)


def code_of(replicas: ReplicaManager, topic: str, partition: int) -> ErrorCode:
    try:
        replicas.leader_partition(topic, partition)
    except KafkaError as exc:
        return exc.code
    return ErrorCode.none


def test_known_but_hosted_elsewhere_is_not_leader_and_unknown_is_unknown(replicas: ReplicaManager) -> None:
    assert code_of(replicas, TOPIC, 0) == ErrorCode.none
    assert code_of(replicas, TOPIC, 1) == ErrorCode.not_leader_or_follower
    assert code_of(replicas, TOPIC, 2) == ErrorCode.unknown_topic_or_partition
    assert code_of(replicas, "nope", 0) == ErrorCode.unknown_topic_or_partition
