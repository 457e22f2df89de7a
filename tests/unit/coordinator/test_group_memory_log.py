"""The group coordinator over the in-memory record log: membership, commits and fetches, reload by replay, and
answers that wait for durability."""

from __future__ import annotations

import asyncio
import dataclasses

from moldau.clock import ManualClock
from moldau.coordinator.group.classic import GroupState
from moldau.coordinator.group.coordinator import GroupCoordinator, Producer
from moldau.coordinator.group.member import JoinRequest, ProtocolMetadata, SyncRequest
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.coordinator.group.records import OFFSETS_TOPIC, partition_for
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.group_client import GroupClient
from tests.unit.coordinator.harness import SESSION_MS, START_MS, SequentialIds, subscription
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with
from tests.unit.coordinator.test_coordinator import PARTITIONS, SETTINGS


class Node(GroupClient):
    """A group coordinator over a memory log; `reopen` builds a new one from the same log, by replay alone."""

    def __init__(self, log: MemoryLog | None = None, settings: CoordinatorSettings = SETTINGS) -> None:
        super().__init__()
        self.log = log or MemoryLog(OFFSETS_TOPIC, PARTITIONS)
        self.image = image_with(OFFSETS_TOPIC, PARTITIONS)
        self.now = START_MS
        self.coordinator = GroupCoordinator(NODE_ID, settings, lambda: self.image, self._no_topic, self.log,
                                            SequentialIds())
        self.coordinator.on_image(self.image, self.now)

    @staticmethod
    def _no_topic() -> None:
        raise AssertionError("the topic exists")

    def reopen(self) -> Node:
        self.coordinator.close()
        return Node(self.log)

    def now_ms(self) -> int:
        return int(self.now)

    def committed(self, group: str) -> int | None:
        error, fetched = self.coordinator.fetch_offsets(group, [("t", [0])])
        assert error == ErrorCode.none
        value = fetched[0][1][0][1]
        if value is None or isinstance(value, ErrorCode):
            return None
        return value.offset

    def state(self) -> dict[str, object]:
        shards = self.coordinator.shards.values()
        return {g.group_id: (g.to_record(), g.state, dict(s.offsets.of(g.group_id)))
                for s in shards for g in s.groups.values()}


def test_join_sync_commit_and_fetch() -> None:
    node = Node()
    member, generation = node.member("g")
    assert node.coordinator.find_group("g").state == GroupState.STABLE  # type: ignore[union-attr]
    assert node.commit("g", member, generation, 10) == [ErrorCode.none]
    assert node.committed("g") == 10
    assert node.commit("g", member, generation + 1, 11) == [ErrorCode.illegal_generation]
    assert node.commit("g", "stranger", generation, 11) == [ErrorCode.unknown_member_id]
    assert node.committed("g") == 10
    partition = partition_for("g", PARTITIONS)
    assert node.log.records_count(partition) == 2  # the group, then the offset
    assert all(node.log.records_count(p) == 0 for p in range(PARTITIONS) if p != partition)


def test_a_new_coordinator_rebuilds_the_same_state_by_replay() -> None:
    node = Node()
    member, generation = node.member("live")
    assert node.commit("live", member, generation, 10) == [ErrorCode.none]
    assert node.commit("live", member, generation, 20) == [ErrorCode.none]
    assert node.commit("simple", "", -1, 7) == [ErrorCode.none]
    assert node.commit("doomed", "", -1, 1) == [ErrorCode.none]
    assert node.coordinator.delete_groups(["doomed"], node.now) == [ErrorCode.none]
    before = node.state()

    reopened = node.reopen()
    assert reopened.state() == before
    assert set(before) == {"live", "simple"}
    assert reopened.committed("live") == 20
    assert reopened.coordinator.heartbeat("live", member, None, generation, reopened.now) == ErrorCode.none


def test_a_refused_append_changes_nothing() -> None:
    node = Node()
    member, generation = node.member("g")
    assert node.commit("g", member, generation, 10) == [ErrorCode.none]
    node.log.refuse = ErrorCode.not_enough_replicas
    assert node.commit("g", member, generation, 11) == [ErrorCode.coordinator_not_available]
    assert node.committed("g") == 10
    node.log.refuse = None
    assert node.reopen().committed("g") == 10


def test_a_transactional_commit_is_pending_until_its_marker_also_after_replay() -> None:
    node = Node()
    producer = Producer(500, 0)
    assert node.commit("g", "", -1, 5) == [ErrorCode.none]
    errors = node.coordinator.txn_commit_offsets("g", producer, "", None, -1, [OffsetCommit("t", 0, 9, 1, "")],
                                                 node.now)
    assert errors == [ErrorCode.none]
    assert node.committed("g") == 5
    assert node.reopen().committed("g") == 5, "pending after replay too"

    partition = partition_for("g", PARTITIONS)
    node = Node(node.log)
    node.log.append_marker(partition, producer.producer_id, producer.producer_epoch, commit=True)
    node.coordinator.complete_transaction(partition, producer.producer_id, True, node.now)
    assert node.committed("g") == 9
    assert node.reopen().committed("g") == 9


def test_an_unreplicated_commit_stays_hidden_and_is_answered_once_durable() -> None:
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = Node(log)
    partition = partition_for("g", PARTITIONS)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS))
        commit = asyncio.ensure_future(runtime.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 3, 1, "")],
                                                              8))
        await asyncio.sleep(0.01)
        assert not commit.done(), "answered only once every in-sync replica has it"
        assert node.committed("g") is None, "not visible to OffsetFetch above the high watermark"
        log.replicate(partition)
        assert await commit == [ErrorCode.none]
        assert node.committed("g") == 3

        lost = asyncio.ensure_future(runtime.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 4, 1, "")],
                                                            8))
        await asyncio.sleep(0.01)
        assert log.lose_unreplicated(partition) == 1
        assert await lost == [ErrorCode.not_coordinator]

    asyncio.run(scenario())
    assert node.reopen().committed("g") == 3, "the unacknowledged commit is gone with the lost suffix"


def test_partitions_follow_leadership() -> None:
    node = Node()
    node.member("g")
    partition = partition_for("g", PARTITIONS)
    elsewhere = image_with(OFFSETS_TOPIC, PARTITIONS, leader=2, image=MetadataImage())
    node.image = elsewhere
    node.coordinator.on_image(elsewhere, node.now)
    assert node.coordinator.shards == {}
    assert node.coordinator.join("g", 99, JoinRequest("", None, "c", "/h", SESSION_MS, 30_000, "consumer", ()),
                                 node.now)[0].result.error == ErrorCode.not_coordinator
    back = image_with(OFFSETS_TOPIC, PARTITIONS)
    node.image = back
    node.coordinator.on_image(back, node.now)
    assert "g" in node.coordinator.shards[partition].groups


def test_join_and_sync_are_answered_once_the_group_partition_is_durable() -> None:
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = Node(log)
    partition = partition_for("g", PARTITIONS)
    request = JoinRequest("", None, "c", "/h", SESSION_MS, 30_000, "consumer",
                          (ProtocolMetadata("range", subscription("t")),))

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS))
        first = await runtime.join("g", request)
        assert first.error == ErrorCode.member_id_required  # nothing written, answered at once
        member_id = first.member_id
        commit = asyncio.ensure_future(runtime.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 3, 1, "")],
                                                              8))
        joining = asyncio.ensure_future(runtime.join("g", dataclasses.replace(request, member_id=member_id)))
        await asyncio.sleep(0.01)
        assert not joining.done(), "answered once what the group's partition holds is committed, as in Kafka"
        log.replicate(partition)
        assert await commit == [ErrorCode.none]
        joined = await joining  # the generation itself is written with the leader's assignment, at SyncGroup
        assert joined.error == ErrorCode.none
        sync = SyncRequest(member_id, None, joined.generation_id, None, None, ((member_id, b"assigned"),))
        syncing = asyncio.ensure_future(runtime.sync("g", sync))
        await asyncio.sleep(0.01)
        assert not syncing.done(), "the assignment is told only once every in-sync replica has it"
        assert log.lose_unreplicated(partition) == 1
        assert (await syncing).error == ErrorCode.not_coordinator

    asyncio.run(scenario())
    reopened = node.reopen().coordinator.find_group("g")
    assert reopened is not None and reopened.state != GroupState.STABLE, "the lost assignment was never told"
