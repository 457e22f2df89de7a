"""offsets.topic.compression.codec and share.coordinator.state.topic.compression.codec: every batch a coordinator
appends to its topic is in the configured codec, and a coordinator rebuilt from those batches by replay holds the
same state."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

import pytest

from moldau.coordinator.group.coordinator import GroupCoordinator, Producer
from moldau.coordinator.group.offsets import OffsetCommit
from moldau.coordinator.group.records import OFFSETS_TOPIC, partition_for
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import SHARE_STATE_TOPIC, ShareSnapshot, StateBatch, StateKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.record_batch import split_batches
from tests.unit.coordinator.group_client import GroupClient
from tests.unit.coordinator.harness import START_MS, SequentialIds
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with
from tests.unit.coordinator.test_coordinator import PARTITIONS, SETTINGS

CODECS = [1, 2, 3, 4]  # gzip, snappy, lz4, zstd


def codecs_of(log: MemoryLog, partition: int) -> list[int]:
    """The codec of every data batch of the partition (markers are the log's, never compressed)."""
    headers = [header for _, _, data in log.parts[partition].batches for header, _ in split_batches(data)]
    return [header.compression for header in headers if not header.is_control]


class CodecNode(GroupClient):
    def __init__(self, codec: int, log: MemoryLog | None = None) -> None:
        super().__init__()
        self.log = log or MemoryLog(OFFSETS_TOPIC, PARTITIONS)
        self.image = image_with(OFFSETS_TOPIC, PARTITIONS)
        settings = dataclasses.replace(SETTINGS, offsets_topic_compression_codec=codec)
        self.coordinator = GroupCoordinator(NODE_ID, settings, lambda: self.image, lambda: None, self.log,
                                            SequentialIds())
        self.coordinator.on_image(self.image, self.now_ms())

    def now_ms(self) -> int:
        return START_MS

    def offset(self, group: str) -> int | None:
        error, ((_, [(_, value)]),) = self.coordinator.fetch_offsets(group, [("t", [0])])
        assert error == ErrorCode.none
        return None if value is None or isinstance(value, ErrorCode) else value.offset


@pytest.mark.parametrize("codec", CODECS)
def test_the_group_coordinator_writes_every_batch_in_the_codec_and_replays_it(codec: int) -> None:
    node = CodecNode(codec)
    member, generation = node.member("live")  # the group's record
    assert node.commit("live", member, generation, 10) == [ErrorCode.none]
    assert node.coordinator.commit_offsets("simple", "", None, -1, [OffsetCommit("t", 0, 7, -1, "")], 8,
                                           START_MS) == [ErrorCode.none]
    producer = Producer(5, 0)
    assert node.coordinator.txn_commit_offsets("txn", producer, "", None, -1, [OffsetCommit("t", 0, 3, -1, "")],
                                               START_MS) == [ErrorCode.none]
    txn_partition = partition_for("txn", PARTITIONS)
    node.log.append_marker(txn_partition, producer.producer_id, producer.producer_epoch, commit=True)
    node.coordinator.complete_transaction(txn_partition, producer.producer_id, True, START_MS)
    written = {p: codecs_of(node.log, p) for p in range(PARTITIONS)}
    assert sum(len(codecs) for codecs in written.values()) == 4  # group, two commits, the transactional commit
    assert all(c == codec for codecs in written.values() for c in codecs), written

    reloaded = CodecNode(0, node.log)  # reads whatever codec the log holds, whatever it writes itself
    assert (reloaded.offset("live"), reloaded.offset("simple"), reloaded.offset("txn")) == (10, 7, 3)
    assert reloaded.coordinator.find_group("live") is not None


def test_the_default_codec_writes_plain_batches() -> None:
    node = CodecNode(SETTINGS.offsets_topic_compression_codec)
    assert node.coordinator.commit_offsets("simple", "", None, -1, [OffsetCommit("t", 0, 7, -1, "")], 8,
                                           START_MS) == [ErrorCode.none]
    assert codecs_of(node.log, partition_for("simple", PARTITIONS)) == [0]


def share_coordinator(codec: int, log: MemoryLog) -> ShareCoordinator:
    settings = ShareStateSettings(num_partitions=3, compression_codec=codec)
    image = image_with(SHARE_STATE_TOPIC, settings.num_partitions)
    coordinator = ShareCoordinator(NODE_ID, settings, lambda: image, lambda: None, log)
    coordinator.on_image(None, image)
    return coordinator


@pytest.mark.parametrize("codec", CODECS)
def test_the_share_coordinator_writes_every_batch_in_the_codec_and_replays_it(codec: int) -> None:
    log = MemoryLog(SHARE_STATE_TOPIC, 3)
    key = StateKey("workers", uuid.UUID(int=7), 2)
    coordinator = share_coordinator(codec, log)
    written = ShareSnapshot(0, 0, 1, 20, (StateBatch(20, 24, 0, 2),))

    async def writes() -> list[ErrorCode]:
        return [await coordinator.initialize(key, 0, 10, 0), await coordinator.write(key, written, 0),
                await coordinator.write(key, dataclasses.replace(written, start_offset=22), 0)]

    assert asyncio.run(writes()) == [ErrorCode.none] * 3
    partition = coordinator.partitions.partition_of(key.coordinator_key)
    assert codecs_of(log, partition) == [codec] * 3
    state = share_coordinator(0, log).read(key, 1)
    assert state is not None and (state.start_offset, state.batches) == (22, (StateBatch(22, 24, 0, 2),))
