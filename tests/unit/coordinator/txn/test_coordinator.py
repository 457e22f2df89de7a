"""The transaction coordinator over real partition logs: writes before answers, reload, resumed completions,
timeouts, listing."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.coordinator.txn.coordinator import MarkerJob, TransactionCoordinator, TxnSettings
from moldau.coordinator.txn.records import TRANSACTION_STATE_TOPIC, TxnState
from moldau.metadata.records import Endpoint, RegisterBrokerRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.coordinator.test_coordinator import Metadata

START_MS = 1_700_000_000_000
SETTINGS = TxnSettings(num_partitions=3, replication_factor=1, min_isr=1)
FENCED = ErrorCode.producer_fenced


class Node:
    """Metadata, logs, replicas and a transaction coordinator; reopening replays everything."""

    def __init__(self, root: Path, clock: ManualClock) -> None:
        self.clock = clock
        self.metadata = Metadata(str(root / "meta" / "metadata.log"))
        self.metadata.commit([RegisterBrokerRecord(1, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9092),),
                                                   None)])
        self.logs = LogManager([str(root / "logs")], clock, LogConfig())
        self.replicas = ReplicaManager(1, self.logs, lambda image, topic: LogConfig())
        self.metadata.listeners.append(lambda image: self.replicas.apply_image(None, image))
        self.replicas.apply_image(None, self.metadata.image)
        self.coordinator = TransactionCoordinator(1, SETTINGS, lambda: self.metadata.image, self._create_topic,
                                                  self.replicas)
        self.resumed: list[MarkerJob] = []
        self.metadata.listeners.append(lambda image: self.resumed.extend(self.coordinator.on_image(image)))
        self.resumed += self.coordinator.on_image(self.metadata.image)
        self.closed = False

    def _create_topic(self) -> None:
        if TRANSACTION_STATE_TOPIC not in self.metadata.image.topics_by_name:
            self.metadata.create_topic(TRANSACTION_STATE_TOPIC, SETTINGS.num_partitions, SETTINGS.topic_configs(1))

    def init(self, txn_id: str, producer_id: int = 100, timeout_ms: int = 60_000) -> tuple[ErrorCode, int, int]:
        with contextlib.suppress(KafkaError):
            self.coordinator.ensure_topic()  # the first use creates the topic (at once, here)
        outcome = self.coordinator.init_producer_id(txn_id, timeout_ms, producer_id, (-1, -1), FENCED,
                                                    self.clock.time_ms())
        return outcome.error, outcome.producer_id, outcome.producer_epoch

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.coordinator.close()
        self.logs.close()
        self.metadata.log.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def open_node(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[[], Node]]:
    nodes: list[Node] = []

    class Opened(Node):
        def __init__(self) -> None:
            super().__init__(tmp_path, clock)
            nodes.append(self)

    yield Opened
    for node in nodes:
        node.close()


def test_first_use_creates_the_compacted_state_topic(open_node: Callable[[], Node]) -> None:
    node = open_node()
    assert node.init("tx") == (ErrorCode.none, 100, 0)
    topic = node.metadata.image.topics_by_name[TRANSACTION_STATE_TOPIC]
    assert len(topic.partitions) == SETTINGS.num_partitions
    assert dict(node.metadata.image.topic_configs(TRANSACTION_STATE_TOPIC))["cleanup.policy"] == "compact"


def test_a_whole_transaction_and_its_completion(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("tx")
    coordinator = node.coordinator
    added = coordinator.add_partitions("tx", 100, 0, [("out", 0), ("out", 1)], FENCED, clock.time_ms())
    assert added.error == ErrorCode.none and added.wait is not None and added.job is None
    assert coordinator.verify_partitions("tx", 100, 0, [("out", 1), ("out", 2)]) == {
        ("out", 1): ErrorCode.none, ("out", 2): ErrorCode.invalid_txn_state}
    ended = coordinator.end_transaction("tx", 100, 0, True, FENCED, clock.time_ms())
    assert ended.error == ErrorCode.none and ended.job is not None
    assert ended.job.commit and ended.job.partitions == {("out", 0), ("out", 1)}
    assert coordinator.describe("tx")[1].state == TxnState.PREPARE_COMMIT  # type: ignore[union-attr]
    done = coordinator.complete(ended.job, clock.time_ms())
    assert done is not None and done.error == ErrorCode.none
    assert coordinator.describe("tx")[1].state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]
    assert coordinator.complete(ended.job, clock.time_ms()) is None  # a second completion changes nothing


def test_restart_resumes_a_completion_from_the_log(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("tx")
    node.coordinator.add_partitions("tx", 100, 0, [("out", 0)], FENCED, clock.time_ms())
    node.coordinator.end_transaction("tx", 100, 0, False, FENCED, clock.time_ms())
    node.close()
    reopened = open_node()
    assert [(j.transactional_id, j.commit, j.partitions) for j in reopened.resumed] == [
        ("tx", False, frozenset({("out", 0)}))]
    error, value = reopened.coordinator.describe("tx")
    assert error == ErrorCode.none and value is not None and value.state == TxnState.PREPARE_ABORT
    # While it completes, the producer is told to retry.
    assert reopened.coordinator.init_producer_id("tx", 1000, -1, (-1, -1), FENCED, clock.time_ms()).error == \
        ErrorCode.concurrent_transactions


def test_a_zombie_is_fenced_by_the_next_incarnation(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("tx")
    node.coordinator.add_partitions("tx", 100, 0, [("out", 0)], FENCED, clock.time_ms())
    again = node.coordinator.init_producer_id("tx", 60_000, -1, (-1, -1), FENCED, clock.time_ms())
    assert again.error == ErrorCode.concurrent_transactions and again.job is not None
    assert (again.job.commit, again.job.producer_epoch) == (False, 1)  # aborted under the new epoch
    assert node.coordinator.end_transaction("tx", 100, 0, True, FENCED, clock.time_ms()).error == FENCED
    node.coordinator.complete(again.job, clock.time_ms())
    assert node.init("tx")[1:] == (100, 2)


def test_timed_out_transactions_are_aborted(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("slow", timeout_ms=1_000)
    node.coordinator.add_partitions("slow", 100, 0, [("out", 0)], FENCED, clock.time_ms())
    assert node.coordinator.abort_timed_out(clock.time_ms() + 1_000) == []
    clock.advance(1_001)
    outcomes = node.coordinator.abort_timed_out(clock.time_ms())
    assert len(outcomes) == 1 and outcomes[0].job is not None and not outcomes[0].job.commit
    assert node.coordinator.describe("slow")[1].producer_epoch == 1  # type: ignore[union-attr]


def test_timeouts_beyond_the_maximum_are_refused(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("tx")
    outcome = node.coordinator.init_producer_id("tx", SETTINGS.max_timeout_ms + 1, -1, (-1, -1), FENCED,
                                                clock.time_ms())
    assert outcome.error == ErrorCode.invalid_transaction_timeout


def test_listing_filters(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("a-1", producer_id=1)
    node.init("b-2", producer_id=2)
    node.coordinator.add_partitions("a-1", 1, 0, [("out", 0)], FENCED, clock.time_ms())
    clock.advance(5_000)
    listed = node.coordinator.list_transactions
    now = clock.time_ms()
    assert sorted(t.transactional_id for t in listed(None, None, -1, None, now)) == ["a-1", "b-2"]
    assert [t.transactional_id for t in listed(frozenset({TxnState.ONGOING}), None, -1, None, now)] == ["a-1"]
    assert [t.transactional_id for t in listed(None, frozenset({2}), -1, None, now)] == ["b-2"]
    assert [t.transactional_id for t in listed(None, None, 4_000, None, now)] == ["a-1"]
    assert [t.transactional_id for t in listed(None, None, 6_000, None, now)] == []
    assert [t.transactional_id for t in listed(None, None, -1, re.compile("b-.*"), now)] == ["b-2"]


def test_idle_ids_expire_with_a_tombstone(open_node: Callable[[], Node], clock: ManualClock) -> None:
    node = open_node()
    node.init("tx")
    clock.advance(SETTINGS.expiration_ms)
    assert node.coordinator.remove_expired(clock.time_ms()) == 1
    node.close()
    assert open_node().coordinator.describe("tx")[0] == ErrorCode.transactional_id_not_found
