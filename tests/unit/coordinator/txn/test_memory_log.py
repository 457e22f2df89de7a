"""The transaction coordinator over the in-memory record log: init producer id, add partitions, end and complete a
transaction, reload by replay, and answers that wait for durability."""

from __future__ import annotations

import asyncio

from moldau.clock import ManualClock
from moldau.coordinator.txn.coordinator import MarkerJob, TransactionCoordinator
from moldau.coordinator.txn.records import TRANSACTION_STATE_TOPIC, TxnState, TxnValue
from moldau.coordinator.txn.runtime import TxnRuntime
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with
from tests.unit.coordinator.txn.test_coordinator import FENCED, SETTINGS, START_MS
from tests.unit.coordinator.txn.test_runtime import Markers, next_producer_id, until


class Node:
    """A transaction coordinator over a memory log; `reopen` builds a new one from the same log, by replay."""

    def __init__(self, log: MemoryLog | None = None) -> None:
        self.log = log or MemoryLog(TRANSACTION_STATE_TOPIC, SETTINGS.num_partitions)
        self.image = image_with(TRANSACTION_STATE_TOPIC, SETTINGS.num_partitions)
        self.now = START_MS
        self.coordinator = TransactionCoordinator(NODE_ID, SETTINGS, lambda: self.image, self._no_topic, self.log)
        self.resumed: list[MarkerJob] = self.coordinator.on_image(self.image)

    @staticmethod
    def _no_topic() -> None:
        raise AssertionError("the topic exists")

    def reopen(self) -> Node:
        self.coordinator.close()
        return Node(self.log)

    def transactions(self) -> dict[str, TxnValue]:
        return {txn_id: value for shard in self.coordinator.shards.values()
                for txn_id, value in shard.transactions.items()}


def test_init_add_end_complete_then_replay() -> None:
    node = Node()
    c = node.coordinator
    init = c.init_producer_id("tx", 60_000, 100, (-1, -1), FENCED, node.now)
    assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.none, 100, 0)
    assert init.wait == (c.partition_of("tx"), 1)
    added = c.add_partitions("tx", 100, 0, [("out", 0), ("out", 1)], FENCED, node.now)
    assert added.error == ErrorCode.none and added.wait == (c.partition_of("tx"), 2)
    assert c.add_partitions("tx", 100, 1, [("out", 2)], FENCED, node.now).error == FENCED
    ended = c.end_transaction("tx", 100, 0, True, FENCED, node.now)
    assert ended.error == ErrorCode.none and ended.job is not None
    assert ended.job.partitions == {("out", 0), ("out", 1)}

    before = node.transactions()
    halfway = node.reopen()
    assert halfway.transactions() == before
    assert [(j.transactional_id, j.commit, j.partitions) for j in halfway.resumed] == [
        ("tx", True, frozenset({("out", 0), ("out", 1)}))]
    resumed = halfway.resumed[0]
    done = halfway.coordinator.complete(resumed, halfway.now)
    assert done is not None and done.error == ErrorCode.none
    assert halfway.coordinator.describe("tx")[1].state == TxnState.COMPLETE_COMMIT  # type: ignore[union-attr]

    before = halfway.transactions()
    final = halfway.reopen()
    assert final.transactions() == before and final.resumed == []
    again = final.coordinator.init_producer_id("tx", 60_000, -1, (-1, -1), FENCED, final.now)
    assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.none, 100, 1)


def test_a_refused_append_answers_a_retriable_error_and_changes_nothing() -> None:
    node = Node()
    node.coordinator.init_producer_id("tx", 60_000, 100, (-1, -1), FENCED, node.now)
    node.log.refuse = ErrorCode.not_enough_replicas
    assert node.coordinator.add_partitions("tx", 100, 0, [("out", 0)], FENCED, node.now).error == \
        ErrorCode.coordinator_not_available
    assert node.coordinator.describe("tx")[1].state == TxnState.EMPTY  # type: ignore[union-attr]


def test_a_new_leader_epoch_reloads_with_the_new_coordinator_epoch() -> None:
    node = Node()
    node.coordinator.init_producer_id("tx", 60_000, 100, (-1, -1), FENCED, node.now)
    partition = node.coordinator.partition_of("tx")
    assert node.coordinator.shards[partition].coordinator_epoch == 0
    node.image = image_with(TRANSACTION_STATE_TOPIC, SETTINGS.num_partitions, leader_epoch=3, image=MetadataImage())
    node.coordinator.on_image(node.image)
    assert node.coordinator.shards[partition].coordinator_epoch == 3
    assert node.coordinator.describe("tx")[1].producer_id == 100  # type: ignore[union-attr]


def test_the_runtime_answers_once_durable_and_completes_over_the_memory_log() -> None:
    log = MemoryLog(TRANSACTION_STATE_TOPIC, SETTINGS.num_partitions, auto_replicate=False)
    node = Node(log)
    partition = node.coordinator.partition_of("tx")
    markers = Markers()

    async def scenario() -> None:
        runtime = TxnRuntime(node.coordinator, ManualClock(START_MS), next_producer_id, markers)
        runtime.start(node.image)
        init = asyncio.ensure_future(runtime.init_producer_id("tx", 60_000, (-1, -1), FENCED))
        await asyncio.sleep(0.01)
        assert not init.done(), "answered once the record is on every in-sync replica"
        log.replicate(partition)
        assert (await init).producer_id == 500
        log.auto_replicate = True
        assert await runtime.add_partitions("tx", 500, 0, [("a", 0)], FENCED) == ErrorCode.none
        assert await runtime.end_transaction("tx", 500, 0, False, FENCED) == ErrorCode.none
        await until(lambda: node.coordinator.describe("tx")[1].state == TxnState.COMPLETE_ABORT)  # type: ignore[union-attr]
        assert markers.written == [(("a", 0), False, 0)]
        runtime.close()

    asyncio.run(scenario())
    assert node.reopen().coordinator.describe("tx")[1].state == TxnState.COMPLETE_ABORT  # type: ignore[union-attr]
