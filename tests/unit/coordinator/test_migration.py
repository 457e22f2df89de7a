"""Groups moving between the classic and the consumer (KIP-848) protocol while they have members, through the
coordinator over real partition logs: upgrade, classic members inside a consumer group, downgrade, the
migration policy, and offsets and state kept across conversions and restarts."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.coordinator.group.classic import GroupState
from moldau.coordinator.group.consumer import HeartbeatRequest, HeartbeatResult
from moldau.coordinator.group.consumer_protocol import assigned_partitions, encode_assignment
from moldau.coordinator.group.member import JoinRequest, ProtocolMetadata
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator import test_coordinator
from tests.unit.coordinator.harness import SESSION_MS, START_MS, state_of, subscription
from tests.unit.coordinator.test_coordinator import Node

PARTITIONS = 4


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def open_node(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Node]]:
    opened: list[Node] = []

    def open_(policy: str = "bidirectional") -> Node:
        settings = test_coordinator.SETTINGS
        consumer = replace(settings.shard.consumer, migration_policy=policy)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(test_coordinator, "SETTINGS", replace(settings, shard=replace(settings.shard,
                                                                                         consumer=consumer)))
            node = Node(tmp_path, clock)
        opened.append(node)
        return node

    yield open_
    for node in opened:
        with contextlib.suppress(Exception):
            node.close()


def beat(node: Node, member: str, epoch: int, **fields: object) -> HeartbeatResult:
    request = HeartbeatRequest(member, epoch, **fields)  # type: ignore[arg-type]
    return node.coordinator.consumer_heartbeat("g", request, node.clock.time_ms())


def classic_member(node: Node) -> tuple[str, int]:
    """A classic member of "g" holding every partition of t, as its leader assigned them."""
    member_id = node.join("g").member_id
    joined = node.join("g", member_id)
    assert joined.error == ErrorCode.none
    everything = encode_assignment(frozenset(("t", p) for p in range(PARTITIONS)))
    assert node.sync("g", member_id, joined.generation_id, everything).error == ErrorCode.none
    return member_id, joined.generation_id


def rejoin(node: Node, member_id: str) -> tuple[int, frozenset[tuple[str, int]]]:
    """A classic member's rejoin and sync on a consumer group: its generation and its partitions."""
    joined = node.join("g", member_id)
    assert (joined.error, joined.protocol_name, joined.leader) == (ErrorCode.none, "range", "")
    synced = node.sync("g", member_id, joined.generation_id, b"ignored: the broker assigns")
    assert synced.error == ErrorCode.none
    owned = assigned_partitions(synced.assignment)
    assert owned is not None
    return joined.generation_id, owned


def committed(node: Node) -> int:
    error, ((_, [(_, value)]),) = node.coordinator.fetch_offsets("g", [("t", [0])])
    assert error == ErrorCode.none and value is not None and not isinstance(value, ErrorCode)
    return value.offset


def heartbeat(node: Node, member_id: str, generation: int) -> ErrorCode:
    return node.coordinator.heartbeat("g", member_id, None, generation, node.now_ms())


def test_a_consumer_member_upgrades_a_classic_group_and_both_kinds_share_it(open_node: Callable[..., Node]) -> None:
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, generation = classic_member(node)
    assert node.commit("g", classic, generation, 7) == [ErrorCode.none]

    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert first.error == ErrorCode.none and first.assignment == frozenset()  # all still held by the classic one
    assert node.coordinator.find_group("g") is None
    group = node.coordinator.find_consumer_group("g")
    assert group is not None and set(group.members) == {classic, "new"}
    # The classic member is told to rejoin; its old generation still commits until it does.
    assert heartbeat(node, classic, generation) == ErrorCode.rebalance_in_progress
    assert node.commit("g", classic, generation, 8) == [ErrorCode.none]
    # First it gives up what the assignor moved away (same epoch), then it rejoins into the new epoch.
    epoch, owned = rejoin(node, classic)
    assert epoch == generation and len(owned) == PARTITIONS // 2
    assert heartbeat(node, classic, epoch) == ErrorCode.rebalance_in_progress
    epoch, kept = rejoin(node, classic)
    assert epoch > generation and kept == owned
    assert node.commit("g", classic, generation, 9) == [ErrorCode.illegal_generation]
    assert heartbeat(node, classic, epoch) == ErrorCode.none
    taken = beat(node, "new", first.member_epoch, owned=frozenset())
    assert taken.assignment is not None and taken.assignment.isdisjoint(owned)
    assert taken.assignment | owned == frozenset(("t", p) for p in range(PARTITIONS))

    # A restart replays the records: the classic member is still one, with its session and generation.
    node.close()
    node = open_node()
    assert heartbeat(node, classic, epoch) == ErrorCode.none
    assert committed(node) == 8


def test_the_last_consumer_member_leaving_downgrades_the_group(open_node: Callable[..., Node]) -> None:
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, _ = classic_member(node)
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    rejoin(node, classic)
    epoch, _ = rejoin(node, classic)
    beat(node, "new", first.member_epoch, owned=frozenset())
    assert node.commit("g", classic, epoch, 11) == [ErrorCode.none]

    assert beat(node, "new", -1).error == ErrorCode.none
    assert node.coordinator.find_consumer_group("g") is None
    downgraded = node.coordinator.find_group("g")
    assert downgraded is not None and state_of(downgraded) == GroupState.PREPARING_REBALANCE
    assert set(downgraded.members) == {classic}
    assert heartbeat(node, classic, epoch) == ErrorCode.rebalance_in_progress
    joined = node.join("g", classic)
    assert joined.error == ErrorCode.none and joined.leader == classic
    assert node.sync("g", classic, joined.generation_id, b"all mine").error == ErrorCode.none
    assert state_of(downgraded) == GroupState.STABLE
    assert committed(node) == 11


def test_the_migration_policy_decides_which_way_a_group_with_members_converts(
        open_node: Callable[..., Node]) -> None:
    node = open_node("downgrade")
    node.controller.create_topic("t", PARTITIONS, {})
    classic_member(node)
    refused = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert refused.error == ErrorCode.group_id_not_found
    assert node.coordinator.find_group("g") is not None


def test_without_downgrade_the_classic_members_stay_in_the_consumer_group(open_node: Callable[..., Node]) -> None:
    node = open_node("upgrade")
    node.controller.create_topic("t", PARTITIONS, {})
    classic, _ = classic_member(node)
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert first.error == ErrorCode.none and beat(node, "new", -1).error == ErrorCode.none
    group = node.coordinator.find_consumer_group("g")
    assert group is not None and set(group.members) == {classic}
    epoch, owned = rejoin(node, classic)
    assert owned == frozenset(("t", p) for p in range(PARTITIONS))
    assert heartbeat(node, classic, epoch) == ErrorCode.none


def test_a_join_group_turns_an_empty_consumer_group_into_a_classic_one(open_node: Callable[..., Node]) -> None:
    node = open_node("disabled")
    node.controller.create_topic("t", PARTITIONS, {})
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert node.coordinator.commit_offsets("g", "new", None, first.member_epoch,
                                           [OffsetCommit("t", 0, 3, 1, "")], 9, node.now_ms()) == [ErrorCode.none]
    beat(node, "new", -1)
    member_id, generation = node.member("g")
    assert node.coordinator.find_group("g") is not None and node.coordinator.find_consumer_group("g") is None
    assert committed(node) == 3
    assert heartbeat(node, member_id, generation) == ErrorCode.none


def test_a_classic_member_silent_after_the_upgrade_is_expired(open_node: Callable[..., Node],
                                                              clock: ManualClock) -> None:
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, _ = classic_member(node)
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    for _ in range(4):  # the newcomer keeps heartbeating; the classic member never comes back
        clock.advance(SESSION_MS // 3)
        node.coordinator.tick(clock.time_ms())
        beat(node, "new", first.member_epoch, owned=frozenset())
    group = node.coordinator.find_consumer_group("g")
    assert group is not None and classic not in group.members
    taken = beat(node, "new", group.current["new"].member_epoch, owned=frozenset())
    assert taken.assignment == frozenset(("t", p) for p in range(PARTITIONS))


def test_a_rejoin_gives_the_member_its_rebalance_timeout_again(open_node: Callable[..., Node],
                                                               clock: ManualClock) -> None:
    """Giving partitions up takes two rejoins; each JoinGroup restarts the time the member has for the next."""
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, generation = classic_member(node)
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())

    def wait(ms: int) -> None:  # both members stay alive meanwhile; the classic one keeps being told to rejoin
        for _ in range(ms // 5_000):
            clock.advance(5_000)
            node.coordinator.tick(clock.time_ms())
            beat(node, "new", first.member_epoch, owned=frozenset())
            assert heartbeat(node, classic, generation) == ErrorCode.rebalance_in_progress

    wait(25_000)
    epoch, _ = rejoin(node, classic)  # gives up half, same generation, must rejoin once more
    assert epoch == generation
    wait(20_000)  # 45 s after it was first told to rejoin: beyond the 30 s of the first deadline
    epoch, _ = rejoin(node, classic)
    assert epoch > generation


def test_a_classic_member_that_never_rejoins_is_removed_and_the_log_says_why(
        open_node: Callable[..., Node], clock: ManualClock, caplog: pytest.LogCaptureFixture) -> None:
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, generation = classic_member(node)
    first = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    with caplog.at_level(logging.INFO, logger="moldau.coordinator.group.coordinator"):
        for _ in range(7):  # 35 s of heartbeats told to rejoin, and no JoinGroup
            clock.advance(5_000)
            node.coordinator.tick(clock.time_ms())
            beat(node, "new", first.member_epoch, owned=frozenset())
            if heartbeat(node, classic, generation) == ErrorCode.unknown_member_id:
                break
    assert heartbeat(node, classic, generation) == ErrorCode.unknown_member_id
    assert f"member {classic} removed: it did not rejoin within its rebalance timeout" in caplog.text


def test_a_rebalancing_classic_group_is_upgraded_once_stable(open_node: Callable[..., Node]) -> None:
    node = open_node()
    node.controller.create_topic("t", PARTITIONS, {})
    classic, generation = classic_member(node)
    newcomer_id = node.join("g").member_id  # KIP-394: a second classic member gets its id...
    request = JoinRequest(newcomer_id, None, "c", "/h", SESSION_MS, 30_000, "consumer",
                          (ProtocolMetadata("range", subscription("t")),))
    assert node.coordinator.join("g", 999, request, node.now_ms()) == []  # ...and its join starts a rebalance
    group = node.coordinator.find_group("g")
    assert group is not None and state_of(group) == GroupState.PREPARING_REBALANCE
    waiting = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert waiting.error == ErrorCode.coordinator_load_in_progress  # retriable, unlike GROUP_ID_NOT_FOUND
    assert node.coordinator.find_consumer_group("g") is None

    # The old member rejoins, the leader assigns: Stable again, and the same join now upgrades the group.
    joined = node.join("g", classic)
    everything = encode_assignment(frozenset(("t", p) for p in range(PARTITIONS)))
    assert node.sync("g", classic, joined.generation_id, everything).error == ErrorCode.none
    assert state_of(group) == GroupState.STABLE
    upgraded = beat(node, "new", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())
    assert upgraded.error == ErrorCode.none and node.coordinator.find_consumer_group("g") is not None
    assert generation < joined.generation_id
