"""A follower and its leader in one process: the follower's fetches answered by the leader's own rules
(`diverging_epoch` of the Fetch handler), so that truncation after leadership changes can be followed step by
step."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from moldau.protocol.errors import ErrorCode
from moldau.replication.fetcher import FollowedPartition
from moldau.replication.leader_state import diverging_epoch
from moldau.replication.replica_manager import HostedPartition, ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import START_MS, batches_of, decode, make_batch

TOPIC = "t"
TOPIC_ID = uuid.uuid4()
KEY = (TOPIC, 0)


class Cluster:
    """Two nodes hosting partition t-0 on replicas (1, 2); `lead(node, epoch)` commits a leadership change."""

    def __init__(self, root: Path) -> None:
        self.clock = ManualClock(START_MS)
        self.nodes = {n: ReplicaManager(n, LogManager([str(root / f"node-{n}")], self.clock, LogConfig()),
                                        lambda image, topic: LogConfig(), clock=self.clock) for n in (1, 2)}
        records: list[MetadataRecord] = [
            RegisterBrokerRecord(n, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + n),), None)
            for n in self.nodes]
        self.image = MetadataImage().apply([*records, TopicRecord(TOPIC, TOPIC_ID)], 0)
        self.partition_epoch = 0
        self.offset = 0

    def lead(self, leader: int, leader_epoch: int) -> None:
        self.offset += 1
        self.partition_epoch += 1
        record = PartitionRecord(TOPIC_ID, 0, (1, 2), (1, 2), leader, leader_epoch, self.partition_epoch)
        before, self.image = self.image, self.image.apply([record], self.offset)
        for node in self.nodes.values():
            node.apply_image(before, self.image)

    def hosted(self, node: int) -> HostedPartition:
        return self.nodes[node].partitions[KEY]

    def write(self, leader: int, values: list[bytes]) -> None:
        hosted = self.hosted(leader)
        hosted.log.append(batches_of(make_batch(values)), hosted.leader_epoch)

    def fetch(self, follower: int, leader: int) -> float:
        """One fetch of `follower` from `leader`, answered as the Fetch handler would; the follower's delay."""
        _start, end, last_epoch = self.nodes[follower].follower_position(*KEY)
        hosted = self.hosted(leader)
        answer: dict[str, Any] = {"error_code": 0, "records": None, "diverging_epoch": None,
                                  "high_watermark": hosted.log.high_watermark,
                                  "log_start_offset": hosted.log.log_start_offset}
        diverging = diverging_epoch(hosted.log, last_epoch, end)
        if diverging is not None:
            answer["diverging_epoch"] = SimpleNamespace(epoch=diverging[0], end_offset=diverging[1])
        else:
            self.nodes[leader].on_replica_fetch(hosted, follower, end)
            answer["high_watermark"] = hosted.log.high_watermark
            if end < hosted.log.log_end_offset:
                answer["records"] = hosted.log.read(end, 1 << 20, True, hosted.log.log_end_offset).read_bytes()
        followed = FollowedPartition(TOPIC, 0, TOPIC_ID, self.hosted(follower).leader_epoch)
        return self.nodes[follower].on_fetched(followed, SimpleNamespace(**answer))

    def close(self) -> None:
        for node in self.nodes.values():
            node.close()
            node.log_manager.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    opened = Cluster(tmp_path)
    yield opened
    opened.close()


def values(log: Any) -> list[bytes]:
    return [v for _, v in decode(log.read(0, 1 << 20, True, log.log_end_offset).read_bytes())]


def test_a_follower_that_led_an_epoch_without_writing_catches_up(cluster: Cluster,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    cluster.lead(1, 1)
    cluster.write(1, [b"a", b"b"])
    assert cluster.fetch(2, 1) == 0  # copies a, b
    assert cluster.fetch(2, 1) == 0  # acknowledges them
    # Node 2 leads epoch 2 and writes nothing, then node 1 leads again and writes.
    cluster.lead(2, 2)
    assert cluster.hosted(2).log.leader_epochs.entries == ((1, 0), (2, 2))
    cluster.lead(1, 3)
    cluster.write(1, [b"c"])
    # Node 1 never had epoch 2: it tells node 2 that its last epoch (2) diverges where epoch 1 ends, at 2.
    with caplog.at_level(logging.INFO):
        delays = [cluster.fetch(2, 1) for _ in range(3)]
    assert delays == [0, 0, 0]
    follower = cluster.hosted(2).log
    assert values(follower) == [b"a", b"b", b"c"]
    assert follower.leader_epochs.entries == ((1, 0), (3, 2))
    assert "dropped leader epochs [2]" in caplog.text


def test_an_answer_that_changes_nothing_backs_off_instead_of_spinning(cluster: Cluster,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    cluster.lead(1, 1)
    cluster.write(1, [b"a"])
    cluster.fetch(2, 1)
    follower = cluster.hosted(2).log
    assert (follower.log_end_offset, follower.leader_epochs.latest_epoch) == (1, 1)
    # Told that its last epoch ends where its log already ends: there is nothing to cut, so the same fetch
    # would get the same answer again.
    answer = SimpleNamespace(error_code=0, records=None, high_watermark=0, log_start_offset=0,
                             diverging_epoch=SimpleNamespace(epoch=1, end_offset=1))
    with caplog.at_level(logging.WARNING):
        delay = cluster.nodes[2].on_fetched(FollowedPartition(TOPIC, 0, TOPIC_ID, 1), answer)
    assert delay == cluster.nodes[2].fetcher_settings.backoff_ms
    assert "truncating changes nothing" in caplog.text


def test_an_out_of_range_answer_truncates_to_the_leaders_high_watermark_or_backs_off(cluster: Cluster) -> None:
    cluster.lead(1, 1)
    cluster.write(1, [b"a"])
    cluster.write(1, [b"b"])
    cluster.fetch(2, 1)
    follower, settings = cluster.hosted(2).log, cluster.nodes[2].fetcher_settings
    followed = FollowedPartition(TOPIC, 0, TOPIC_ID, 1)

    def out_of_range(high_watermark: int) -> float:
        answer = SimpleNamespace(error_code=ErrorCode.offset_out_of_range, records=None, diverging_epoch=None,
                                 high_watermark=high_watermark, log_start_offset=0)
        return cluster.nodes[2].on_fetched(followed, answer)

    assert out_of_range(1) == 0  # the leader's log is shorter: keep what it committed, fetch again at once
    assert follower.log_end_offset == 1
    assert out_of_range(1) == settings.backoff_ms  # nothing left to cut: the same fetch would fail the same way
