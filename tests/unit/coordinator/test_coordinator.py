"""The coordinator over real partition logs: topic creation, durable writes, and recovery by replay."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from moldau.clock import Clock, ManualClock
from moldau.coordinator.group.classic import GroupState
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.records import OFFSETS_TOPIC, partition_for
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.group.shard import ShardSettings
from moldau.metadata.image import MetadataImage
from moldau.metadata.log import LocalMetadataLog
from moldau.metadata.records import (
    RESOURCE_TOPIC,
    ConfigRecord,
    Endpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from moldau.protocol.errors import ErrorCode
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.coordinator.group_client import GroupClient
from tests.unit.coordinator.harness import LIMITS, SESSION_MS, START_MS, SequentialIds

PARTITIONS = 4
SETTINGS = CoordinatorSettings(ShardSettings(LIMITS, 4096, 60_000), PARTITIONS, 1, 600_000)


class Metadata:
    """The metadata a single node needs here: records appended durably to a file and replayed into an image.

    Creating the offsets topic happens at once, inside the coordinator's request, as a one-voter quorum would.
    """

    def __init__(self, path: str) -> None:
        self.log = LocalMetadataLog(path)
        self.image = MetadataImage().apply((r for _, r in self.log.entries), self.log.next_offset - 1)
        self.listeners: list[Callable[[MetadataImage], None]] = []

    def commit(self, records: list[MetadataRecord]) -> None:
        self.image = self.image.apply(records, self.log.append(records))
        for listener in self.listeners:
            listener(self.image)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        topic_id = uuid.uuid4()
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += [ConfigRecord(RESOURCE_TOPIC, name, k, v) for k, v in configs.items()]
        records += [PartitionRecord(topic_id, p, (1,), (1,), 1, 0, 0) for p in range(partitions)]
        self.commit(records)

    def create_offsets_topic(self) -> None:
        if OFFSETS_TOPIC not in self.image.topics_by_name:
            self.create_topic(OFFSETS_TOPIC, PARTITIONS, {"cleanup.policy": "compact"})


class Node(GroupClient):
    """Just enough of a broker for the coordinator: metadata, logs, replicas. Reopening replays everything."""

    def __init__(self, root: Path, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.controller = Metadata(str(root / "meta" / "metadata.log"))
        self.controller.commit(
            [RegisterBrokerRecord(1, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9092),), None)])
        self.logs = LogManager([str(root / "logs")], clock, LogConfig())
        self.replicas = ReplicaManager(1, self.logs, lambda image, topic: LogConfig())
        self.controller.listeners.append(lambda image: self.replicas.apply_image(None, image))
        self.replicas.apply_image(None, self.controller.image)
        self.coordinator = GroupCoordinator(1, SETTINGS, lambda: self.controller.image,
                                            self.controller.create_offsets_topic, self.replicas, SequentialIds())
        self.controller.listeners.append(lambda image: self._take(self.coordinator.on_image(image, clock.time_ms())))
        self.coordinator.on_image(self.controller.image, clock.time_ms())

    def close(self) -> None:
        self.coordinator.close()
        self.logs.close()
        self.controller.log.close()

    def now_ms(self) -> int:
        return int(self.clock.time_ms())


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def open_node(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[[], Node]]:
    opened: list[Node] = []

    class Opened(Node):
        def __init__(self) -> None:
            super().__init__(tmp_path, clock)
            opened.append(self)

    yield Opened
    for node in opened:
        with contextlib.suppress(Exception):  # most were closed by the test already
            node.close()


def test_first_use_creates_the_compacted_offsets_topic(open_node: Callable[[], Node]) -> None:
    node = open_node()
    assert OFFSETS_TOPIC not in node.controller.image.topics_by_name
    node.member("g")
    topic = node.controller.image.topics_by_name[OFFSETS_TOPIC]
    assert len(topic.partitions) == PARTITIONS and topic.is_internal
    assert node.controller.image.topic_configs(OFFSETS_TOPIC)["cleanup.policy"] == "compact"
    group_partition = partition_for("g", PARTITIONS)
    assert set(node.coordinator.shards) == set(range(PARTITIONS))
    assert "g" in node.coordinator.shards[group_partition].groups
    assert node.replicas.partitions[(OFFSETS_TOPIC, group_partition)].log.log_end_offset == 1  # the group record


def test_restart_rebuilds_groups_and_offsets_exactly(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    member, generation = node.member("live")
    assert node.commit("live", member, generation, 10) == [ErrorCode.none]
    assert node.commit("live", member, generation, 20) == [ErrorCode.none]
    assert node.commit("simple", "", -1, 7) == [ErrorCode.none]
    assert node.commit("doomed", "", -1, 1) == [ErrorCode.none]
    assert node.coordinator.delete_groups(["doomed"], clock.time_ms()) == [ErrorCode.none]
    before = {g.group_id: (g.to_record(), g.state) for s in node.coordinator.shards.values() for g in s.groups.values()}
    offsets_before = {g: dict(s.offsets.of(g)) for s in node.coordinator.shards.values() for g in s.groups}
    node.close()

    clock.advance(1000)
    reopened = open_node()
    after = {g.group_id: (g.to_record(), g.state) for s in reopened.coordinator.shards.values()
             for g in s.groups.values()}
    offsets_after = {g: dict(s.offsets.of(g)) for s in reopened.coordinator.shards.values() for g in s.groups}
    assert after == before and offsets_after == offsets_before
    assert set(after) == {"live", "simple"}
    assert offsets_after["live"][("t", 0)].offset == 20
    # The member survived the restart, as with Kafka: it carries on with its generation.
    assert reopened.coordinator.heartbeat("live", member, None, generation, clock.time_ms()) == ErrorCode.none
    assert reopened.coordinator.find_group("live").state == GroupState.STABLE  # type: ignore[union-attr]


def _replicate_to_a_second_broker(node: Node, group: str) -> int:
    """Give the group's partition a second in-sync replica that has fetched nothing: from now on the high
    watermark moves only when broker 2 fetches (`ReplicaManager.on_replica_fetch`)."""
    partition = partition_for(group, PARTITIONS)
    image = node.controller.image
    topic = image.topics_by_name[OFFSETS_TOPIC]
    current = topic.partitions[partition]
    node.controller.commit([
        RegisterBrokerRecord(2, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9093),), None),
        PartitionRecord(topic.topic_id, partition, (1, 2), (1, 2), 1, current.leader_epoch,
                        current.partition_epoch + 1)])
    return partition


def _fetched(node: Node, group: str) -> int:
    error, fetched = node.coordinator.fetch_offsets(group, [("t", [0])])
    assert error == ErrorCode.none
    ((_, [(_, value)]),) = fetched
    return -1 if value is None else value.offset  # type: ignore[union-attr]


def test_offset_fetch_shows_a_commit_only_once_it_is_replicated(open_node: Callable[[], Node]) -> None:
    node = open_node()
    assert node.commit("g", "", -1, 7) == [ErrorCode.none]
    partition = _replicate_to_a_second_broker(node, "g")
    hosted = node.replicas.partitions[(OFFSETS_TOPIC, partition)]
    assert node.commit("g", "", -1, 8) == [ErrorCode.none]  # in the leader's log; broker 2 has not fetched it
    assert _fetched(node, "g") == 7
    node.close()

    # A restarted leader starts from its checkpointed high watermark: the tail above it stays hidden too.
    node = open_node()
    hosted = node.replicas.partitions[(OFFSETS_TOPIC, partition)]
    assert hosted.log.high_watermark < hosted.log.log_end_offset
    assert _fetched(node, "g") == 7
    node.replicas.on_replica_fetch(hosted, 2, hosted.log.log_end_offset)
    assert _fetched(node, "g") == 8


def test_members_that_do_not_return_after_a_restart_expire(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    member, generation = node.member("g")
    node.commit("g", member, generation, 5)
    node.close()
    reopened = open_node()
    assert reopened.coordinator.next_deadline_ms() == clock.time_ms() + SESSION_MS
    clock.advance(SESSION_MS)
    reopened._take(reopened.coordinator.tick(clock.time_ms()))
    group = reopened.coordinator.find_group("g")
    assert group is not None and group.state == GroupState.EMPTY
    fetched = reopened.coordinator.fetch_offsets("g", [("t", [0])])
    assert fetched[1][0][1][0][1].offset == 5  # type: ignore[union-attr]
    reopened.close()
    # The group became Empty durably.
    again = open_node()
    group = again.coordinator.find_group("g")
    assert group is not None and group.state == GroupState.EMPTY and group.generation_id == generation + 1


def test_failed_write_is_not_acknowledged(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.commit("g", "", -1, 1)
    hosted = node.replicas.partitions[(OFFSETS_TOPIC, partition_for("g", PARTITIONS))]
    hosted.log.config = replace(hosted.log.config, max_message_bytes=10)
    assert node.commit("g", "", -1, 2) == [ErrorCode.invalid_commit_offset_size]
    fetched = node.coordinator.fetch_offsets("g", [("t", [0])])
    assert fetched[1][0][1][0][1].offset == 1  # type: ignore[union-attr]
