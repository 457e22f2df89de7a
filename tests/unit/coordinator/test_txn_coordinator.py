"""Transactional offset commits over real partition logs: transactional batches, markers, and reload."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock, SystemClock
from moldau.coordinator.group.coordinator import Producer
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.coordinator.group.records import OFFSETS_TOPIC, partition_for
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import START_MS
from tests.unit.coordinator.test_coordinator import PARTITIONS, Node

PRODUCER = Producer(42, 0)


OPENED: list[Node] = []


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    OPENED.clear()
    opened = Node(tmp_path, ManualClock(START_MS))
    OPENED.append(opened)
    yield opened
    for each in OPENED:
        with contextlib.suppress(Exception):  # most were closed by the test already
            each.close()


def txn_commit(node: Node, group: str, offset: int, producer: Producer = PRODUCER,
               verified: bool = True) -> list[ErrorCode]:
    """A simple TxnOffsetCommit; `verified`: as if the transaction coordinator confirmed the partition."""
    node.coordinator.ensure_topic()
    check = node.coordinator.txn_verification(group, producer)
    guard = check[1] if check is not None and verified else None
    return node.coordinator.txn_commit_offsets(group, producer, "", None, -1, [OffsetCommit("t", 0, offset, 1, "md")],
                                               node.clock.time_ms(), guard)


def committed(node: Node, group: str, stable: bool = False) -> object:
    error, fetched = node.coordinator.fetch_offsets(group, [("t", [0])], require_stable=stable)
    assert error == ErrorCode.none
    value = fetched[0][1][0][1]
    return value if isinstance(value, ErrorCode) or value is None else value.offset


def end(node: Node, group: str, commit: bool, producer: Producer = PRODUCER) -> None:
    partition = partition_for(group, PARTITIONS)
    hosted = node.replicas.leader_partition(OFFSETS_TOPIC, partition)
    node.replicas.append_marker(hosted, producer.producer_id, producer.producer_epoch, commit, 0)
    node.coordinator.complete_transaction(partition, producer.producer_id, commit, node.clock.time_ms())


def reopen(node: Node, tmp_path: Path) -> Node:
    node.close()
    OPENED.append(Node(tmp_path, node.clock))
    return OPENED[-1]


def test_commit_marker_makes_offsets_visible_and_survives_reload(node: Node, tmp_path: Path) -> None:
    assert node.commit("g", "", -1, 5) == [ErrorCode.none]
    assert txn_commit(node, "g", 10) == [ErrorCode.none]
    assert committed(node, "g") == 5
    assert committed(node, "g", stable=True) == ErrorCode.unstable_offset_commit
    reopened = reopen(node, tmp_path)  # open transaction: still pending after the reload
    assert committed(reopened, "g", stable=True) == ErrorCode.unstable_offset_commit
    end(reopened, "g", commit=True)
    assert committed(reopened, "g", stable=True) == 10
    again = reopen(reopened, tmp_path)
    assert committed(again, "g", stable=True) == 10


def test_abort_marker_drops_offsets_across_reload(node: Node, tmp_path: Path) -> None:
    node.commit("g", "", -1, 5)
    txn_commit(node, "g", 10)
    end(node, "g", commit=False)
    assert committed(node, "g", stable=True) == 5
    reopened = reopen(node, tmp_path)
    assert committed(reopened, "g", stable=True) == 5


def test_fenced_producer_epoch_is_refused(node: Node) -> None:
    assert txn_commit(node, "g", 10, Producer(42, 3)) == [ErrorCode.none]
    end(node, "g", commit=True, producer=Producer(42, 3))
    assert txn_commit(node, "g", 11, Producer(42, 2)) == [ErrorCode.invalid_producer_epoch]
    assert committed(node, "g", stable=True) == 10


def test_no_producer_id_is_refused(node: Node) -> None:
    assert txn_commit(node, "g", 10, Producer(-1, -1)) == [ErrorCode.invalid_producer_id_mapping]
    assert committed(node, "g") is None


def test_the_first_commit_of_a_transaction_needs_verification(node: Node) -> None:
    assert txn_commit(node, "g", 10, verified=False) == [ErrorCode.invalid_txn_state]
    assert txn_commit(node, "g", 10) == [ErrorCode.none]
    assert node.coordinator.txn_verification("g", PRODUCER) is None  # the transaction is open here now
    assert txn_commit(node, "g", 11, verified=False) == [ErrorCode.none]
    end(node, "g", commit=True)
    assert node.coordinator.txn_verification("g", PRODUCER) is not None  # the next transaction needs it again
    assert committed(node, "g") == 11


def test_runtime_verifies_the_first_commit_with_the_transaction_coordinator(tmp_path: Path) -> None:
    node = Node(tmp_path, SystemClock())
    asked: list[tuple[str, int, int, tuple[str, int]]] = []
    answer = ErrorCode.invalid_txn_state

    async def verify(transactional_id: str, producer_id: int, epoch: int, partition: tuple[str, int]) -> ErrorCode:
        asked.append((transactional_id, producer_id, epoch, partition))
        return answer

    async def scenario() -> None:
        nonlocal answer
        runtime = GroupRuntime(node.coordinator, SystemClock())
        runtime.start(node.controller.image)
        try:
            node.coordinator.ensure_topic()
            commits = [OffsetCommit("t", 0, 10, -1, None)]
            assert await runtime.txn_commit_offsets("g", "tx", 42, 0, "", None, -1, commits, verify) == \
                [ErrorCode.invalid_txn_state]
            answer = ErrorCode.none
            assert await runtime.txn_commit_offsets("g", "tx", 42, 0, "", None, -1, commits, verify) == \
                [ErrorCode.none]
            assert await runtime.txn_commit_offsets("g", "tx", 42, 0, "", None, -1, commits, verify) == \
                [ErrorCode.none]
            assert asked == [("tx", 42, 0, (OFFSETS_TOPIC, partition_for("g", PARTITIONS)))] * 2  # not the third
            runtime.complete_transaction(partition_for("g", PARTITIONS), 42, True)  # no marker: state only
            assert runtime.fetch_offsets("g", [("t", [0])], require_stable=True)[1][0][1][0][1].offset == 10  # type: ignore[union-attr]
        finally:
            runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()
