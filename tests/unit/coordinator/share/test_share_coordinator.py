"""The share coordinator over the in-memory record log: snapshots written once durable, read back after a reload
by replay, leader-epoch fencing, and the records in Kafka's format."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from moldau.coordinator.internal_topic import build_batch
from moldau.coordinator.log import LogRecord, read_partition
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import (
    KEY_VERSION,
    SHARE_STATE_TOPIC,
    UPDATE_KEY_VERSION,
    ShareSnapshot,
    ShareUpdate,
    StateBatch,
    StateKey,
    decode_key,
    decode_record_key,
    decode_update,
    decode_value,
    encode_key,
    encode_update,
    encode_value,
)
from moldau.coordinator.share.state import delivering_count, delivery_complete_count
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.share_state_links import summary_of
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

SETTINGS = ShareStateSettings(num_partitions=3)
KEY = StateKey("workers", uuid.UUID(int=7), 2)
IMAGE = image_with(SHARE_STATE_TOPIC, SETTINGS.num_partitions)


def snapshot(leader_epoch: int, start: int) -> ShareSnapshot:
    return ShareSnapshot(0, 1, leader_epoch, start, (StateBatch(start, start + 2, 0, 1), StateBatch(start + 3,
                                                                                                    start + 3, 4, 5)))


def coordinator(log: MemoryLog) -> ShareCoordinator:
    image = image_with(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = ShareCoordinator(NODE_ID, SETTINGS, lambda: image, lambda: None, log)
    c.on_image(None, image)
    return c


def same(state: ShareSnapshot | None, expected: ShareSnapshot) -> bool:
    """The same state (the snapshot epoch counts the snapshots written, which a test does not care about)."""
    return state is not None and dataclasses.replace(state, snapshot_epoch=0) == dataclasses.replace(
        expected, snapshot_epoch=0)


def test_records_round_trip() -> None:
    value = snapshot(3, 40)
    assert decode_key(encode_key(KEY)) == KEY
    assert decode_value(encode_value(value)) == value


def test_a_write_is_read_back_after_a_reload() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    first = coordinator(log)
    assert first.read(KEY, 0) is None
    assert asyncio.run(first.write(KEY, snapshot(0, 10), 0)) == ErrorCode.invalid_request  # never initialized
    assert asyncio.run(first.initialize(KEY, 0, 10, 0)) == ErrorCode.none
    assert asyncio.run(first.write(KEY, snapshot(0, 10), 0)) == ErrorCode.none
    assert asyncio.run(first.write(KEY, snapshot(0, 20), 0)) == ErrorCode.none
    assert same(first.read(KEY, 0), snapshot(0, 20))
    assert same(coordinator(log).read(KEY, 0), snapshot(0, 20))


def test_an_older_leader_is_fenced() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = coordinator(log)
    assert asyncio.run(c.initialize(KEY, 0, 10, 0)) == ErrorCode.none
    assert asyncio.run(c.write(KEY, snapshot(2, 10), 0)) == ErrorCode.none
    assert asyncio.run(c.write(KEY, snapshot(1, 99), 0)) == ErrorCode.fenced_leader_epoch
    with pytest.raises(KafkaError) as fenced:
        coordinator(log).read(KEY, 1)
    assert fenced.value.code == ErrorCode.fenced_leader_epoch
    assert same(coordinator(log).read(KEY, 3), snapshot(2, 10))


def test_update_records_round_trip() -> None:
    update = ShareUpdate(4, 2, -1, (StateBatch(7, 9, 2, 1), StateBatch(10, 10, 0, 3)))
    assert decode_update(encode_update(update)) == update
    assert decode_record_key(encode_key(KEY, UPDATE_KEY_VERSION)) == (UPDATE_KEY_VERSION, KEY)


def record_types(log: MemoryLog) -> list[int]:
    partition = coordinator(log).partitions.partition_of(KEY.coordinator_key)
    return [decode_record_key(item.key)[0] if item.value is not None else -1
            for item in read_partition(log, partition) if isinstance(item, LogRecord)]


def test_writes_between_snapshots_are_updates_and_replay_lays_them_over_the_snapshot() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = ShareCoordinator(NODE_ID, ShareStateSettings(num_partitions=3, updates_per_snapshot=2),
                         lambda: IMAGE, lambda: None, log)
    c.on_image(None, IMAGE)
    assert asyncio.run(c.initialize(KEY, 0, 0, 0)) == ErrorCode.none
    writes = [ShareSnapshot(0, 0, 0, 0, (StateBatch(0, 9, 0, 1),)),  # ten records out
              ShareSnapshot(0, 0, 0, 0, (StateBatch(0, 2, 2, 1), StateBatch(5, 5, 4, 1))),  # 0-2 accepted, 5 gone
              ShareSnapshot(0, 0, 0, 3, (StateBatch(3, 3, 0, 2),)),  # the SPSO moves; 3 delivered again
              ShareSnapshot(0, 0, 0, 3, (StateBatch(4, 4, 2, 1),)),
              ShareSnapshot(0, 0, 0, 3, (StateBatch(6, 9, 2, 1),))]
    for written in writes:
        assert asyncio.run(c.write(KEY, written, 0)) == ErrorCode.none
    assert record_types(log) == [KEY_VERSION, UPDATE_KEY_VERSION, UPDATE_KEY_VERSION, KEY_VERSION,
                                 UPDATE_KEY_VERSION, UPDATE_KEY_VERSION]
    expected = (StateBatch(3, 3, 0, 2), StateBatch(4, 4, 2, 1), StateBatch(5, 5, 4, 1), StateBatch(6, 9, 2, 1))
    state = c.read(KEY, 0)
    assert state is not None and (state.start_offset, state.batches) == (3, expected)
    reloaded = coordinator(log).read(KEY, 0)
    assert reloaded is not None and (reloaded.start_offset, reloaded.batches) == (3, expected)


def test_an_update_without_a_snapshot_before_it_is_skipped() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = coordinator(log)
    partition = c.partitions.partition_of(KEY.coordinator_key)
    log.append(partition, build_batch([(encode_key(KEY, UPDATE_KEY_VERSION),
                                        encode_update(ShareUpdate(0, 0, 5, ())))], 0))
    assert coordinator(log).read(KEY, 0) is None


def test_a_deleted_state_is_gone_and_starts_again_with_a_higher_state_epoch() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = coordinator(log)
    assert asyncio.run(c.initialize(KEY, 0, 15, 0)) == ErrorCode.none
    assert asyncio.run(c.initialize(KEY, 0, 99, 0)) == ErrorCode.none  # it has one: nothing changes
    first = c.read(KEY, 0)
    assert first is not None and (first.state_epoch, first.start_offset, first.batches) == (0, 15, ())
    assert asyncio.run(c.write(KEY, ShareSnapshot(0, 0, 0, 15, (StateBatch(15, 16, 2, 1),)), 0)) == ErrorCode.none
    assert asyncio.run(c.delete(KEY, 0)) == ErrorCode.none
    assert c.read(KEY, 0) is None and coordinator(log).read(KEY, 0) is None
    stale = ShareSnapshot(0, 0, 0, 17, ())
    assert asyncio.run(c.write(KEY, stale, 0)) == ErrorCode.invalid_request  # it has no state any more
    assert asyncio.run(c.initialize(KEY, 0, 0, 0)) == ErrorCode.none
    again = c.read(KEY, 0)
    assert again is not None and (again.state_epoch, again.start_offset, again.batches) == (1, 0, ())
    assert summary_of(c.summary(KEY)).start_offset == 0


def test_the_durable_state_counts_records_being_delivered_and_records_done() -> None:
    """Past the SPSO: Available with deliveries (acquired at the last write, or released) are being delivered;
    Available never delivered is not; Acknowledged and Archived are done. Batches below the SPSO count for nothing."""
    state = ShareSnapshot(0, 1, 0, 10, (StateBatch(5, 11, 0, 1), StateBatch(12, 13, 2, 1), StateBatch(14, 14, 0, 0),
                                        StateBatch(15, 16, 0, 3), StateBatch(17, 17, 4, 5)))
    assert delivering_count(state) == 2 + 2  # 10-11 and 15-16
    assert delivery_complete_count(state) == 2 + 1  # 12-13 and 17
