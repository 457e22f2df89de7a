"""`moldau mirror status`: how far behind each mirrored partition is, and where each group was checkpointed.

A partition's lag comes from the mirror's own committed position, the source connector's offset in the flow's
Connect offset topic (`mm2-offsets.<source>.internal` on the target, `{"cluster", "topic", "partition"}` ->
`{"offset"}`): in records, the source partition's end offset minus the next offset to copy; in seconds, the age
of the oldest record not yet copied (0 when none is waiting). Commits are periodic (`offset.flush.interval.ms`),
so the figures are as of the last commit.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from moldau.connect.distributed.kafka_log import watermarks
from moldau.mirror.config import Flow, MirrorMakerConfig
from moldau.mirror.filters import TopicFilter
from moldau.mirror.policy import replication_policy
from moldau.mirror.records import Checkpoint
from moldau.mirror.remote import TIMEOUT_S, latest_checkpoints, read_to_end
from moldau.mirror.source import SOURCE_ALIAS, should_replicate

__all__ = ["PartitionLag", "checkpoints", "partition_lags"]

SOURCE_CONNECTOR = "MirrorSourceConnector"


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    end: int  # the source partition's end offset
    next_to_copy: int | None  # None: nothing copied yet
    records: int
    seconds: float


def committed_positions(config: MirrorMakerConfig, flow: Flow) -> dict[tuple[str, int], int]:
    """(source topic, partition) -> the last upstream offset the flow's source connector committed."""
    worker = config.worker_config(flow)
    positions: dict[tuple[str, int], int] = {}
    for key, value in read_to_end(config.librdkafka(flow.target), worker["offset.storage.topic"]):
        try:
            connector, partition = json.loads(key or b"null")
            offset = None if value is None else json.loads(value)
            if connector != SOURCE_CONNECTOR or not isinstance(partition, dict) or \
                    partition.get("cluster") != flow.source:
                continue
            where = (str(partition.get("topic")), int(partition.get("partition", 0)))
        except (ValueError, TypeError, RecursionError):
            continue  # another writer's record: not one of the mirror's offsets
        if isinstance(offset, dict) and isinstance(offset.get("offset"), int):
            positions[where] = offset["offset"]
        else:
            positions.pop(where, None)
    return positions


def _oldest_waiting_ms(consumer: Consumer, topic: str, partition: int, offset: int) -> int | None:
    consumer.assign([TopicPartition(topic, partition, offset)])
    for message in consumer.consume(1, TIMEOUT_S):
        if message.error() is None:
            return int(message.timestamp()[1])
    return None


def partition_lags(config: MirrorMakerConfig, flow: Flow,
                   now_ms: Callable[[], float] = lambda: time.time() * 1000) -> list[PartitionLag]:
    """The lag of every partition of the source's topics that the flow replicates."""
    settings = connector_settings(config, flow)
    policy, topic_filter = replication_policy(settings), TopicFilter(settings)

    def replicated(topic: str) -> bool:
        return should_replicate(topic, policy, topic_filter, flow.target)

    positions = committed_positions(config, flow)
    consumer = Consumer({**config.librdkafka(flow.source), "group.id": "unused-mirror-status",
                         "enable.auto.commit": False})
    lags = []
    try:
        topics = consumer.list_topics(timeout=TIMEOUT_S).topics
        for name in sorted(t for t in topics if replicated(t)):
            for partition in sorted(topics[name].partitions):
                low, end = watermarks(consumer, name, partition, TIMEOUT_S)
                committed = positions.get((name, partition))
                next_to_copy = None if committed is None else committed + 1
                start = max(low, next_to_copy if next_to_copy is not None else low)
                waiting = max(0, end - start)
                seconds = 0.0
                if waiting:
                    oldest = _oldest_waiting_ms(consumer, name, partition, start)
                    seconds = max(0.0, (now_ms() - oldest) / 1000) if oldest is not None else 0.0
                lags.append(PartitionLag(name, partition, end, next_to_copy, waiting, seconds))
    finally:
        consumer.close()
    return lags


def checkpoints(config: MirrorMakerConfig, flow: Flow) -> list[Checkpoint]:
    """The newest checkpoint of every group and partition the flow checkpointed."""
    topic = replication_policy(connector_settings(config, flow)).checkpoints_topic(flow.source)
    return sorted(latest_checkpoints(config.librdkafka(flow.target), topic).values(),
                  key=lambda c: (c.group, c.topic, c.partition))


def connector_settings(config: MirrorMakerConfig, flow: Flow) -> dict[str, Any]:
    settings = config.connector_config(flow, SOURCE_CONNECTOR, SOURCE_CONNECTOR)
    settings[SOURCE_ALIAS] = flow.source
    return settings
