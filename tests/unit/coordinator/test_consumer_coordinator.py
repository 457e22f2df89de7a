"""Consumer (KIP-848) groups through the coordinator over real partition logs: durable before answered,
rebuilt by replay after a restart, and expired by the deadline heap."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.coordinator.group.consumer import HeartbeatRequest, HeartbeatResult
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import START_MS
from tests.unit.coordinator.test_coordinator import Node

SESSION_MS = 45_000  # the default of group.consumer.session.timeout.ms


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
        with contextlib.suppress(Exception):
            node.close()


def beat(node: Node, member: str, epoch: int, **fields: object) -> HeartbeatResult:
    request = HeartbeatRequest(member, epoch, **fields)  # type: ignore[arg-type]
    return node.coordinator.consumer_heartbeat("cg", request, node.clock.time_ms())


def join(node: Node, member: str) -> HeartbeatResult:
    return beat(node, member, 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset())


def test_restart_replays_consumer_groups_and_members_carry_on(open_node: Callable[[], Node],
                                                              clock: ManualClock) -> None:
    node = open_node()
    node.controller.create_topic("t", 4, {})
    first = join(node, "a")
    assert (first.error, first.member_epoch, len(first.assignment or ())) == (ErrorCode.none, 1, 4)
    commit = [OffsetCommit("t", 0, 5, -1, "")]
    now = clock.time_ms()
    assert node.coordinator.commit_offsets("cg", "a", None, 0, commit, 9, now) == [ErrorCode.stale_member_epoch]
    assert node.coordinator.commit_offsets("cg", "a", None, 1, commit, 9, now) == [ErrorCode.none]
    before = node.coordinator.find_consumer_group("cg")
    assert before is not None
    state = (before.epoch, before.members, before.targets, before.current)
    node.close()

    node = open_node()
    after = node.coordinator.find_consumer_group("cg")
    assert after is not None and (after.epoch, after.members, after.targets, after.current) == state
    assert node.coordinator.fetch_offsets("cg", None, "a", 1)[0] == ErrorCode.none
    assert node.coordinator.fetch_offsets("cg", None, "a", 7)[0] == ErrorCode.stale_member_epoch
    assert beat(node, "a", 1, owned=first.assignment).error == ErrorCode.none
    listed = [(g.group_id, g.group_type, g.state) for g in node.coordinator.list_groups()]
    assert listed == [("cg", "consumer", "Stable")]


def test_silent_member_is_removed_by_the_timer(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.controller.create_topic("t", 2, {})
    join(node, "a")
    join(node, "b")
    for _ in range(4):
        clock.advance(SESSION_MS // 3)
        node.coordinator.tick(clock.time_ms())
        group = node.coordinator.find_consumer_group("cg")
        assert group is not None
        beat(node, "b", group.current["b"].member_epoch, owned=frozenset())
    group = node.coordinator.find_consumer_group("cg")
    assert group is not None and set(group.members) == {"b"}
    assert beat(node, "a", 1).error == ErrorCode.unknown_member_id


def test_classic_requests_for_a_consumer_group(open_node: Callable[[], Node]) -> None:
    """A classic member may join a consumer group with members (as in Kafka); it stays a consumer group."""
    node = open_node()
    node.controller.create_topic("t", 1, {})
    join(node, "a")
    assert node.join("cg").error == ErrorCode.member_id_required
    assert node.coordinator.find_group("cg") is None  # DescribeGroups: not a classic group
