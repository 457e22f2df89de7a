"""Group commit: OffsetCommits that arrive together share one append per partition, each is answered as it would
be alone, and none is acknowledged before its records are durable, so a crash loses nothing acknowledged."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time

from moldau.clock import ManualClock
from moldau.coordinator.group.coordinator import CommitRequest
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.coordinator.group.records import OFFSETS_TOPIC, partition_for
from moldau.coordinator.group.runtime import GroupRuntime
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import START_MS
from tests.unit.coordinator.memory_log import MemoryLog
from tests.unit.coordinator.test_coordinator import PARTITIONS, SETTINGS
from tests.unit.coordinator.test_group_memory_log import Node


def groups_on(partition: int, count: int) -> list[str]:
    found = [f"g{i}" for i in range(1000) if partition_for(f"g{i}", PARTITIONS) == partition]
    return found[:count]


def simple_commit(group: str, offset: int, partition: int = 0, metadata: str = "") -> CommitRequest:
    """A "simple" commit (no member, generation -1), as a tool or an assigned consumer sends."""
    return CommitRequest(group, "", None, -1, (OffsetCommit("t", partition, offset, -1, metadata),), 8)


def committed(node: Node, group: str, partition: int = 0) -> int | None:
    error, fetched = node.coordinator.fetch_offsets(group, [("t", [partition])])
    assert error == ErrorCode.none
    value = fetched[0][1][0][1]
    return None if value is None or isinstance(value, ErrorCode) else value.offset


def test_requests_together_share_one_batch_per_partition_and_are_answered_each() -> None:
    node = Node()
    a, b = groups_on(0, 2)
    (c,) = groups_on(1, 1)
    member, generation = node.member(a)
    batches_before = {p: len(node.log.parts[p].batches) for p in (0, 1)}
    too_large = "x" * 5000  # above offset.metadata.max.bytes (4096)
    answers = node.coordinator.commit_offsets_together([
        CommitRequest(a, member, None, generation, (OffsetCommit("t", 0, 10, 1, "md"),), 8),
        CommitRequest(a, member, None, generation + 1, (OffsetCommit("t", 1, 99, 1, "md"),), 8),  # stale
        simple_commit(b, 20),
        CommitRequest(b, "", None, -1, (OffsetCommit("t", 1, 21, -1, too_large), OffsetCommit("t", 2, 22, -1, "")),
                      8),
        simple_commit(c, 30),
    ], node.now_ms())
    assert answers == [
        [ErrorCode.none],
        [ErrorCode.illegal_generation],
        [ErrorCode.none],
        [ErrorCode.offset_metadata_too_large, ErrorCode.none],
        [ErrorCode.none],
    ]
    assert len(node.log.parts[0].batches) == batches_before[0] + 1, "one append for a and b"
    assert len(node.log.parts[1].batches) == batches_before[1] + 1
    expected = {(a, 0): 10, (a, 1): None, (b, 0): 20, (b, 1): None, (b, 2): 22, (c, 0): 30}
    assert {key: committed(node, *key) for key in expected} == expected
    reopened = node.reopen()  # the same state, rebuilt from the log alone
    assert {key: committed(reopened, *key) for key in expected} == expected


def test_a_refused_append_fails_every_accepted_commit_of_the_batch() -> None:
    node = Node()
    a, b = groups_on(2, 2)
    node.log.refuse = ErrorCode.not_enough_replicas
    answers = node.coordinator.commit_offsets_together(
        [simple_commit(a, 1), simple_commit(b, 2, metadata="y" * 5000)], node.now_ms())
    assert answers[0] != [ErrorCode.none] and answers[0][0] != ErrorCode.offset_metadata_too_large
    assert answers[1] == [ErrorCode.offset_metadata_too_large]
    node.log.refuse = None
    assert committed(node, a) is None and committed(node, b) is None


def test_commits_of_one_turn_are_appended_together_and_answered_once_durable() -> None:
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = Node(log)
    groups = groups_on(3, 4)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS))
        before = len(log.parts[3].batches)
        waiting = [asyncio.ensure_future(runtime.commit_offsets(g, "", None, -1, [OffsetCommit("t", 0, 7, -1, "")], 8))
                   for g in groups]
        await asyncio.sleep(0.01)
        assert len(log.parts[3].batches) == before + 1, "the four requests of one turn: one append"
        assert not any(w.done() for w in waiting), "nothing is answered before the batch is durable"
        log.replicate(3)
        assert [await w for w in waiting] == [[ErrorCode.none]] * 4

    asyncio.run(scenario())


def test_the_last_commit_of_a_turn_appends_the_turns_commits_at_once() -> None:
    """Three connections' commits in one turn: the first two are told that other connections still have requests
    to serve, and wait; the third, told none does, appends all three in its own step, before the turn's end, and
    none is answered before the batch is durable."""
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = Node(log)
    groups = groups_on(3, 3)
    still_to_serve = [2, 1, 0]  # as `WokenConnections` counts while the three connections run one after the other

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: still_to_serve.pop(0) > 0)
        before = len(log.parts[3].batches)
        waiting = [asyncio.ensure_future(runtime.commit_offsets(g, "", None, -1, [OffsetCommit("t", 0, 5, -1, "")], 8))
                   for g in groups]
        # Runs right after the three requests' first steps and before the turn's deferred group commit.
        after_the_three: list[int] = []
        asyncio.get_running_loop().call_soon(lambda: after_the_three.append(len(log.parts[3].batches)))
        await asyncio.sleep(0.01)
        assert after_the_three == [before + 1], "appended by the third request, together"
        assert len(log.parts[3].batches) == before + 1
        assert not any(w.done() for w in waiting), "nothing is answered before the batch is durable"
        log.replicate(3)
        assert [await w for w in waiting] == [[ErrorCode.none]] * 3
        assert [committed(node, g) for g in groups] == [5, 5, 5]

    asyncio.run(scenario())


def test_a_lone_commit_on_a_replicated_partition_is_answered_without_yielding() -> None:
    """The synchronous committer's case: one request in its turn, a partition whose writes are durable at once (a
    single replica). The answer comes back from the same step: no turn of the loop between request and answer."""
    node = Node()
    (group,) = groups_on(2, 1)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: False)
        coroutine = runtime.commit_offsets(group, "", None, -1, [OffsetCommit("t", 0, 9, -1, "")], 8)
        try:
            coroutine.send(None)
        except StopIteration as done:
            assert done.value == [ErrorCode.none]
        else:
            raise AssertionError("the commit waited for the event loop")
        assert committed(node, group) == 9

    asyncio.run(scenario())


async def commit_rounds_then_crash(node: Node, log: MemoryLog, rng: random.Random) -> dict[str, int]:
    """Rounds of concurrent commits of ever larger offsets, each round's batches replicated or not, each round ended
    by a crash (a failover to a replica with only the durable records). Returns the last acknowledged offsets."""
    runtime = GroupRuntime(node.coordinator, ManualClock(START_MS))
    groups = [f"group-{i}" for i in range(6)]
    acknowledged: dict[str, int] = {}
    for offset in range(1, rng.randint(2, 8)):
        chosen = rng.sample(groups, rng.randint(1, len(groups)))
        waiting = {g: asyncio.ensure_future(
            runtime.commit_offsets(g, "", None, -1, [OffsetCommit("t", 0, offset, -1, "")], 8)) for g in chosen}
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        for partition in rng.sample(range(PARTITIONS), rng.randint(0, PARTITIONS)):
            log.replicate(partition)
        await asyncio.sleep(0.001)
        for partition in range(PARTITIONS):  # the crash: what is not durable is gone, its waiters told so
            log.lose_unreplicated(partition)
        for g, future in waiting.items():
            if await future == [ErrorCode.none]:
                acknowledged[g] = offset
    return acknowledged


def test_a_crash_between_commit_and_ack_loses_nothing_acknowledged() -> None:
    """Seeded: every commit that was acknowledged is found after the crash, by replay of what the log kept."""
    acknowledged_in_all = 0
    for seed in range(20):
        log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
        node = Node(log)
        acknowledged = asyncio.run(commit_rounds_then_crash(node, log, random.Random(seed)))
        acknowledged_in_all += len(acknowledged)
        after = node.reopen()
        for group, offset in acknowledged.items():
            found = committed(after, group)
            assert found is not None and found >= offset, (seed, group, offset, found)
    assert acknowledged_in_all > 20, "the rounds acknowledged commits, so the check above checked something"


# -- group.coordinator.append.linger.ms: 0 and N ms (the adaptive default is what the tests above check) ------------


def lingering(ms: int, log: MemoryLog | None = None) -> Node:
    return Node(log, dataclasses.replace(SETTINGS, append_linger_ms=ms))


def commit_soon(runtime: GroupRuntime, group: str, offset: int, metadata: str = "") -> asyncio.Future[list[ErrorCode]]:
    return asyncio.ensure_future(runtime.commit_offsets(group, "", None, -1,
                                                        [OffsetCommit("t", 0, offset, -1, metadata)], 8))


def test_without_linger_each_commit_is_appended_alone_at_once() -> None:
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = lingering(0, log)
    groups = groups_on(3, 4)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: True)  # others still to serve
        before = len(log.parts[3].batches)
        waiting = [commit_soon(runtime, g, 7) for g in groups]
        await asyncio.sleep(0)
        assert len(log.parts[3].batches) == before + 4, "four requests of one turn: four appends"
        log.replicate(3)
        assert [await w for w in waiting] == [[ErrorCode.none]] * 4

    asyncio.run(scenario())


def test_a_linger_holds_commits_of_several_turns_for_one_append_that_long_after_the_first() -> None:
    log = MemoryLog(OFFSETS_TOPIC, PARTITIONS, auto_replicate=False)
    node = lingering(1000, log)  # long beside the three commits' 30 ms, even on a loaded machine
    groups = groups_on(3, 3)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: False)  # a lone committer each turn
        before = len(log.parts[3].batches)
        started = time.monotonic()
        waiting = []
        for g in groups:
            waiting.append(commit_soon(runtime, g, 5))
            await asyncio.sleep(0.01)
        assert len(log.parts[3].batches) == before, "nothing appended before the linger is over"
        while len(log.parts[3].batches) == before:
            await asyncio.sleep(0.01)
            assert time.monotonic() - started < 10, "the linger's append never came"
        assert time.monotonic() - started >= 0.95
        assert len(log.parts[3].batches) == before + 1, "the three commits, in one append"
        assert not any(w.done() for w in waiting), "nothing is answered before the batch is durable"
        log.replicate(3)
        assert [await w for w in waiting] == [[ErrorCode.none]] * 3
        assert [committed(node, g) for g in groups] == [5, 5, 5]

    asyncio.run(scenario())


def test_a_commit_after_the_lingers_deadline_appends_the_waiting_ones_with_it() -> None:
    node = lingering(300)
    a, b = groups_on(3, 2)
    clock = ManualClock(START_MS)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, clock, lambda: False)  # adaptive, that would append each at once
        before = len(node.log.parts[3].batches)
        first = commit_soon(runtime, a, 1)
        await asyncio.sleep(0)
        assert len(node.log.parts[3].batches) == before
        clock.advance(300)
        second = commit_soon(runtime, b, 2)
        await asyncio.sleep(0)
        assert len(node.log.parts[3].batches) == before + 1
        assert (await first, await second) == ([ErrorCode.none], [ErrorCode.none])

    asyncio.run(scenario())


def test_any_other_input_appends_the_lingering_commits_first() -> None:
    """A fetch after a commit reads it, however long the linger, as the coordinator takes inputs in order."""
    node = lingering(60_000)
    (group,) = groups_on(1, 1)

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: False)
        waiting = commit_soon(runtime, group, 11)
        await asyncio.sleep(0)
        assert not waiting.done() and committed(node, group) is None
        error, fetched = runtime.fetch_offsets(group, [("t", [0])])
        value = fetched[0][1][0][1]
        assert error == ErrorCode.none and value is not None and not isinstance(value, ErrorCode)
        assert value.offset == 11
        assert await waiting == [ErrorCode.none]

    asyncio.run(scenario())


def test_commits_whose_records_fill_a_batch_are_appended_at_once_whatever_the_linger() -> None:
    node = lingering(60_000)
    (group,) = groups_on(2, 1)
    big = [OffsetCommit("t", p, 1, -1, "m" * 4000) for p in range(140)]  # about 570 KB of records

    async def scenario() -> None:
        runtime = GroupRuntime(node.coordinator, ManualClock(START_MS), lambda: True)
        coroutine = runtime.commit_offsets(group, "", None, -1, big, 8)
        try:
            coroutine.send(None)
        except StopIteration as done:
            assert done.value == [ErrorCode.none] * len(big)
        else:
            raise AssertionError("the full batch waited for the linger")

    asyncio.run(scenario())
