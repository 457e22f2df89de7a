"""The share coordinator over the in-memory record log: snapshots written once durable, read back after a reload
by replay, leader-epoch fencing, and the records in Kafka's format."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import (
    SHARE_STATE_TOPIC,
    ShareSnapshot,
    StateBatch,
    StateKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.protocol.errors import ErrorCode, KafkaError
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

SETTINGS = ShareStateSettings(num_partitions=3)
KEY = StateKey("workers", uuid.UUID(int=7), 2)


def snapshot(leader_epoch: int, start: int) -> ShareSnapshot:
    return ShareSnapshot(0, 1, leader_epoch, start, (StateBatch(start, start + 2, 0, 1), StateBatch(start + 3,
                                                                                                    start + 3, 4, 5)))


def coordinator(log: MemoryLog) -> ShareCoordinator:
    image = image_with(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = ShareCoordinator(NODE_ID, SETTINGS, lambda: image, lambda: None, log)
    c.on_image(None, image)
    return c


def test_records_round_trip() -> None:
    value = snapshot(3, 40)
    assert decode_key(encode_key(KEY)) == KEY
    assert decode_value(encode_value(value)) == value


def test_a_write_is_read_back_after_a_reload() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    first = coordinator(log)
    assert first.read(KEY, 0) is None
    assert asyncio.run(first.write(KEY, snapshot(0, 10), 0)) == ErrorCode.none
    assert asyncio.run(first.write(KEY, snapshot(0, 20), 0)) == ErrorCode.none
    assert first.read(KEY, 0) == snapshot(0, 20)
    assert coordinator(log).read(KEY, 0) == snapshot(0, 20)


def test_an_older_leader_is_fenced() -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, SETTINGS.num_partitions)
    c = coordinator(log)
    assert asyncio.run(c.write(KEY, snapshot(2, 10), 0)) == ErrorCode.none
    assert asyncio.run(c.write(KEY, snapshot(1, 99), 0)) == ErrorCode.fenced_leader_epoch
    with pytest.raises(KafkaError) as fenced:
        coordinator(log).read(KEY, 1)
    assert fenced.value.code == ErrorCode.fenced_leader_epoch
    assert coordinator(log).read(KEY, 3) == snapshot(2, 10)
