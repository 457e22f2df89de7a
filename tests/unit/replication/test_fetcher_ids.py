"""num.replica.fetchers: Kafka's spread of partitions over a follower's fetchers, and a replica manager that
spreads what it follows that way and moves it when the number changes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from moldau.clock import ManualClock
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord
from moldau.net.client import ConnectionPool
from moldau.replication.fetcher import ReplicaFetcher
from moldau.replication.fetcher_ids import fetcher_id
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager
from tests.unit.storage.batches import START_MS


def test_a_partition_goes_to_the_fetcher_kafka_would_pick() -> None:
    # abs(31 * hashCode + partition) % n, in 32-bit arithmetic: 31 * 99162322 wraps to -1220935314.
    assert [fetcher_id("hello", p, 4) for p in range(4)] == [abs(-1220935314 + p) % 4 for p in range(4)] == [2, 1, 0, 3]
    # 31 * MIN_VALUE wraps to MIN_VALUE; + 0 stays there, which Kafka's abs maps to 0.
    assert fetcher_id("polygenelubricants", 0, 3) == 0
    assert fetcher_id("polygenelubricants", 1, 3) == (2**31 - 1) % 3
    assert {fetcher_id("orders", p, 1) for p in range(50)} == {0}
    assert {fetcher_id("orders", p, 3) for p in range(50)} == {0, 1, 2}
    with pytest.raises(ValueError, match="at least 1"):
        fetcher_id("orders", 0, 0)


TOPICS = ("orders", "payments")
PARTITIONS = 6


def _image() -> MetadataImage:
    """Brokers 1-3; two topics whose partitions broker 1 follows, led by broker 2 (even) or 3 (odd)."""
    records: list[MetadataRecord] = [
        RegisterBrokerRecord(b, uuid.uuid4(), (Endpoint("PLAINTEXT", "127.0.0.1", 9090 + b),), None) for b in (1, 2, 3)]
    for name in TOPICS:
        topic_id = uuid.uuid4()
        records.append(TopicRecord(name, topic_id))
        records += [PartitionRecord(topic_id, p, (1, 2, 3), (1, 2, 3), 2 + p % 2, 0, 0) for p in range(PARTITIONS)]
    return MetadataImage().apply(records, len(records) - 1)


def _expected(num_fetchers: int) -> dict[tuple[int, int], list[tuple[str, int]]]:
    spread: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for name in TOPICS:
        for p in range(PARTITIONS):
            spread.setdefault((2 + p % 2, fetcher_id(name, p, num_fetchers)), []).append((name, p))
    return {key: sorted(partitions) for key, partitions in spread.items()}


def test_a_follower_spreads_its_partitions_over_fetchers_and_respreads_them_when_the_number_changes(
        tmp_path: Path) -> None:
    async def scenario() -> None:
        clock = ManualClock(START_MS)
        manager = ReplicaManager(1, LogManager([str(tmp_path)], clock, LogConfig()), lambda image, topic: LogConfig(),
                                 clock=clock)
        started: list[ReplicaFetcher] = []

        def start_fetcher(leader_id: int, fetcher: int) -> ReplicaFetcher:
            # Real fetch loops, with no address to reach: they wait, which is all this test needs of them.
            started.append(ReplicaFetcher(leader_id, manager, ConnectionPool("test"), lambda node: None,
                                          manager.fetcher_settings, clock, fetcher))
            return started[-1]

        manager.start_fetcher = start_fetcher
        manager.num_fetchers = 3
        try:
            manager.apply_image(None, _image())
            assert manager.fetchers() == _expected(3)
            assert len(_expected(3)) > 2  # the topics' partitions do land on several fetchers per leader
            first = list(started)
            manager.set_num_fetchers(1)
            assert manager.fetchers() == _expected(1) == {
                (2, 0): sorted((t, p) for t in TOPICS for p in range(0, PARTITIONS, 2)),
                (3, 0): sorted((t, p) for t in TOPICS for p in range(1, PARTITIONS, 2))}
            await asyncio.sleep(0)
            assert all(f._task.cancelled() for f in first)  # the old loops stopped, their connections closed
            manager.set_num_fetchers(2)
            assert manager.fetchers() == _expected(2)
            # Unchanged: nothing is stopped or started.
            before = len(started)
            manager.set_num_fetchers(2)
            assert len(started) == before
        finally:
            manager.close()
            manager.log_manager.close()
            await asyncio.sleep(0)

    asyncio.run(scenario())
