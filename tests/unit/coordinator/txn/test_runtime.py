"""The transaction runtime: completions write every marker (retrying failures) before the Complete record,
resume on load, and timed-out transactions are aborted by the timer."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from moldau.clock import ManualClock
from moldau.coordinator.txn.coordinator import MarkerJob, Outcome
from moldau.coordinator.txn.records import TopicPartition, TxnState
from moldau.coordinator.txn.runtime import TxnRuntime
from moldau.protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinator.txn.test_coordinator import FENCED, START_MS, Node


class Markers:
    """Records marker writes; the first `failures` attempts per partition fail."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.attempts: dict[TopicPartition, int] = {}
        self.written: list[tuple[TopicPartition, bool, int]] = []

    async def write_markers(self, job: MarkerJob, partitions: frozenset[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        results = {}
        for tp in partitions:
            self.attempts[tp] = self.attempts.get(tp, 0) + 1
            if self.attempts[tp] <= self.failures:
                results[tp] = ErrorCode.not_leader_or_follower
            else:
                self.written.append((tp, job.commit, job.producer_epoch))
                results[tp] = ErrorCode.none
        return results


async def next_producer_id() -> int:
    return 500


def runtime_for(node: Node, markers: Markers) -> TxnRuntime:
    with contextlib.suppress(KafkaError):
        node.coordinator.ensure_topic()
    return TxnRuntime(node.coordinator, node.clock, next_producer_id, markers)


async def until(predicate: object, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def state(node: Node, txn_id: str) -> TxnState | None:
    value = node.coordinator.describe(txn_id)[1]
    return value.state if value is not None else None


def test_commit_writes_every_marker_then_completes(tmp_path: Path) -> None:
    node = Node(tmp_path, ManualClock(START_MS))
    markers = Markers(failures=2)

    async def scenario() -> None:
        runtime = runtime_for(node, markers)
        runtime.start(node.metadata.image)
        outcome = await runtime.init_producer_id("tx", 60_000, (-1, -1), FENCED)
        assert (outcome.error, outcome.producer_id, outcome.producer_epoch) == (ErrorCode.none, 500, 0)
        assert await runtime.add_partitions("tx", 500, 0, [("a", 0), ("b", 1)], FENCED) == ErrorCode.none
        assert await runtime.end_transaction("tx", 500, 0, True, FENCED) == ErrorCode.none
        await until(lambda: state(node, "tx") == TxnState.COMPLETE_COMMIT)
        assert sorted(markers.written) == [(("a", 0), True, 0), (("b", 1), True, 0)]
        assert markers.attempts == {("a", 0): 3, ("b", 1): 3}  # retried until written
        runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()


def test_a_completion_left_in_the_log_is_resumed_on_load(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    node = Node(tmp_path, clock)
    node.init("tx")
    node.coordinator.add_partitions("tx", 100, 0, [("a", 0)], FENCED, clock.time_ms())
    node.coordinator.end_transaction("tx", 100, 0, False, FENCED, clock.time_ms())  # crashed before the markers
    node.close()
    reopened = Node(tmp_path, clock)
    markers = Markers()

    async def scenario() -> None:
        assert [job.transactional_id for job in reopened.resumed] == ["tx"]
        # A broker's runtime loads the partitions itself when it starts: let it find this one unloaded.
        reopened.coordinator.shards.clear()
        runtime = TxnRuntime(reopened.coordinator, clock, next_producer_id, markers)
        runtime.start(reopened.metadata.image)
        await until(lambda: state(reopened, "tx") == TxnState.COMPLETE_ABORT)
        assert markers.written == [(("a", 0), False, 0)]
        runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        reopened.close()


def test_the_timer_aborts_a_timed_out_transaction(tmp_path: Path) -> None:
    clock = ManualClock(START_MS)
    node = Node(tmp_path, clock)
    node.coordinator.settings = node.coordinator.settings.__class__(
        num_partitions=3, replication_factor=1, min_isr=1, abort_interval_ms=10)
    markers = Markers()

    async def scenario() -> None:
        runtime = runtime_for(node, markers)
        runtime.start(node.metadata.image)
        await runtime.init_producer_id("slow", 1_000, (-1, -1), FENCED)
        await runtime.add_partitions("slow", 500, 0, [("a", 0)], FENCED)
        clock.advance(1_001)
        await until(lambda: state(node, "slow") == TxnState.COMPLETE_ABORT)
        assert markers.written == [(("a", 0), False, 1)]  # under the bumped epoch: the producer is fenced
        assert await runtime.end_transaction("slow", 500, 0, True, FENCED) == FENCED
        runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()


class SlowMarkers(Markers):
    async def write_markers(self, job: MarkerJob, partitions: frozenset[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        await asyncio.sleep(0.05)
        return await super().write_markers(job, partitions)


def test_the_next_transaction_waits_for_the_previous_markers_instead_of_failing(tmp_path: Path) -> None:
    node = Node(tmp_path, ManualClock(START_MS))

    async def scenario() -> None:
        runtime = runtime_for(node, SlowMarkers())
        runtime.start(node.metadata.image)
        await runtime.init_producer_id("tx", 60_000, (-1, -1), FENCED)
        await runtime.add_partitions("tx", 500, 0, [("a", 0)], FENCED)
        assert await runtime.end_transaction("tx", 500, 0, True, FENCED) == ErrorCode.none
        assert state(node, "tx") == TxnState.PREPARE_COMMIT  # answered before the markers are written
        assert await runtime.add_partitions("tx", 500, 0, [("a", 0)], FENCED) == ErrorCode.none
        assert state(node, "tx") == TxnState.ONGOING
        runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()


def test_a_refused_completion_record_is_retried(tmp_path: Path) -> None:
    node = Node(tmp_path, ManualClock(START_MS))
    complete = node.coordinator.complete
    refusals = [2]

    def refuse_twice(job: MarkerJob, now_ms: int) -> Outcome | None:
        if refusals[0]:
            refusals[0] -= 1
            return Outcome(ErrorCode.coordinator_not_available)  # e.g. the ISR is below min.insync.replicas
        return complete(job, now_ms)

    node.coordinator.complete = refuse_twice  # type: ignore[method-assign]

    async def scenario() -> None:
        runtime = runtime_for(node, Markers())
        runtime.start(node.metadata.image)
        await runtime.init_producer_id("tx", 60_000, (-1, -1), FENCED)
        await runtime.add_partitions("tx", 500, 0, [("a", 0)], FENCED)
        assert await runtime.end_transaction("tx", 500, 0, False, FENCED) == ErrorCode.none
        await until(lambda: state(node, "tx") == TxnState.COMPLETE_ABORT)
        assert refusals == [0]
        runtime.close()

    try:
        asyncio.run(scenario())
    finally:
        node.close()
