"""share.coordinator.append.linger.ms: the share coordinator's writes wait as the linger says and are appended
together, one batch per partition; a batch the log refuses fails all its writes and leaves the coordinator's view of
the states as the log holds them."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

from moldau.clock import ManualClock
from moldau.coordinator.append_linger import ADAPTIVE
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import SHARE_STATE_TOPIC, ShareSnapshot, StateBatch, StateKey
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

PARTITIONS = 3


def keys_on(partition: int, count: int) -> list[StateKey]:
    probe = ShareCoordinator(NODE_ID, ShareStateSettings(num_partitions=PARTITIONS),
                             lambda: image_with(SHARE_STATE_TOPIC, PARTITIONS), lambda: None,
                             MemoryLog(SHARE_STATE_TOPIC, PARTITIONS))
    found = [StateKey("workers", uuid.UUID(int=7), p) for p in range(200)]
    return [k for k in found if probe.partitions.partition_of(k.coordinator_key) == partition][:count]


def coordinator(log: MemoryLog, linger_ms: int, more_requests_this_turn: Callable[[], bool],
                clock: ManualClock | None = None) -> ShareCoordinator:
    settings = ShareStateSettings(num_partitions=PARTITIONS, append_linger_ms=linger_ms)
    image = image_with(SHARE_STATE_TOPIC, PARTITIONS)
    c = ShareCoordinator(NODE_ID, settings, lambda: image, lambda: None, log, clock or ManualClock(),
                         more_requests_this_turn)
    c.on_image(None, image)
    return c


def written(start: int, leader_epoch: int = 1) -> ShareSnapshot:
    return ShareSnapshot(0, 0, leader_epoch, start, (StateBatch(start, start + 3, 0, 1),))


def initialize_together(c: ShareCoordinator, keys: list[StateKey]) -> list[ErrorCode]:
    async def together() -> list[ErrorCode]:
        return list(await asyncio.gather(*(c.initialize(k, 0, 10, 0) for k in keys)))
    return asyncio.run(together())


def test_adaptive_writes_read_in_one_turn_share_a_batch_and_a_lone_one_is_appended_at_once() -> None:
    keys = keys_on(1, 3)
    log = MemoryLog(SHARE_STATE_TOPIC, PARTITIONS)
    assert initialize_together(coordinator(log, ADAPTIVE, lambda: True), keys) == [ErrorCode.none] * 3
    assert len(log.parts[1].batches) == 1, "the turn's three writes: one append"
    alone = MemoryLog(SHARE_STATE_TOPIC, PARTITIONS)
    assert initialize_together(coordinator(alone, ADAPTIVE, lambda: False), keys) == [ErrorCode.none] * 3
    assert len(alone.parts[1].batches) == 3, "no other request waiting: each write at once"


def test_without_linger_every_write_is_appended_alone() -> None:
    keys = keys_on(1, 3)
    log = MemoryLog(SHARE_STATE_TOPIC, PARTITIONS)
    assert initialize_together(coordinator(log, 0, lambda: True), keys) == [ErrorCode.none] * 3
    assert len(log.parts[1].batches) == 3


def test_a_linger_holds_writes_of_several_turns_until_that_long_after_the_first() -> None:
    keys = keys_on(2, 3)
    log = MemoryLog(SHARE_STATE_TOPIC, PARTITIONS)
    c = coordinator(log, 1000, lambda: False)  # long beside the three writes' 30 ms, even on a loaded machine

    async def scenario() -> None:
        started = time.monotonic()
        waiting = []
        for key in keys:
            waiting.append(asyncio.ensure_future(c.initialize(key, 0, 10, 0)))
            await asyncio.sleep(0.01)
        assert log.parts[2].batches == [], "nothing appended before the linger is over"
        assert await asyncio.gather(*waiting) == [ErrorCode.none] * 3
        assert time.monotonic() - started >= 0.95
        assert len(log.parts[2].batches) == 1

    asyncio.run(scenario())
    assert all(coordinator(log, 0, lambda: False).read(k, 0) is not None for k in keys)  # and replayed


def test_a_refused_batch_fails_its_writes_and_the_next_is_laid_over_the_state_before_them() -> None:
    (key,) = keys_on(0, 1)
    log = MemoryLog(SHARE_STATE_TOPIC, PARTITIONS)
    c = coordinator(log, ADAPTIVE, lambda: True)
    assert asyncio.run(c.initialize(key, 0, 10, 0)) == ErrorCode.none
    assert asyncio.run(c.write(key, written(10), 0)) == ErrorCode.none
    log.refuse = ErrorCode.not_enough_replicas

    async def refused() -> list[ErrorCode]:
        # Two writes of the key in one batch: the second laid over the first, both refused with the batch.
        return list(await asyncio.gather(c.write(key, written(12), 0), c.write(key, written(14), 0)))

    assert ErrorCode.none not in asyncio.run(refused())
    log.refuse = None
    # The next write is an update laid over the state after the write at 10, as replay lays it.
    assert asyncio.run(c.write(key, ShareSnapshot(0, 0, 1, 11, ()), 0)) == ErrorCode.none
    expected = ShareSnapshot(0, 0, 1, 11, (StateBatch(11, 13, 0, 1),))
    for state in (c.read(key, 1), coordinator(log, 0, lambda: False).read(key, 1)):
        assert state is not None and (state.start_offset, state.batches) == (expected.start_offset, expected.batches)
