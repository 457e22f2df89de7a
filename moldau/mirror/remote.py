"""What a client needs to move a consumer group from one cluster to the other (the role of MirrorMaker 2's
RemoteClusterUtils, for clients that are not Java): the group's translated offsets on the target, read from
the checkpoints the checkpoint connector wrote there, and committing them to the target's group.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.connect.distributed.kafka_log import end_offset
from moldau.mirror.records import Checkpoint, MalformedRecord

__all__ = [
    "GroupActive", "commit_offsets", "latest_checkpoints", "read_to_end", "translated_offsets",
]

TIMEOUT_S = 30.0
ACTIVE_STATES = ("STABLE", "PREPARING_REBALANCING", "COMPLETING_REBALANCING", "ASSIGNING", "RECONCILING")


class GroupActive(Exception):
    """The group has members on the target: moving its offsets under them would be overwritten or race."""


def read_to_end(config: dict[str, Any], topic: str) -> Iterator[tuple[bytes | None, bytes | None]]:
    """Every (key, value) of `topic`, in order within each partition, up to the end it had when called; nothing
    when the topic does not exist."""
    consumer = Consumer({**config, "group.id": "unused-mirror-tools", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return
        # Its leader may not have replayed a topic created a moment ago (a cluster): asked again until it has.
        ends = {p: end_offset(consumer, topic, p, TIMEOUT_S) for p in metadata.partitions}
        pending = {p for p, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        while pending:
            for message in consumer.consume(500, 1.0):
                partition = message.partition() or 0
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(f"reading {topic}: {error.str()}")
                    pending.discard(partition)
                    continue
                if (message.offset() or 0) + 1 >= ends[partition]:
                    pending.discard(partition)
                yield message.key(), message.value()
    finally:
        consumer.close()


def latest_checkpoints(target_config: dict[str, Any], checkpoints_topic: str) -> dict[tuple[str, str, int], Checkpoint]:
    """(group, remote topic, partition) -> the newest checkpoint in `checkpoints_topic`."""
    latest: dict[tuple[str, str, int], Checkpoint] = {}
    for key, value in read_to_end(target_config, checkpoints_topic):
        try:
            checkpoint = Checkpoint.from_record(key, value)
        except MalformedRecord:
            continue
        latest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
    return latest


def translated_offsets(target_config: dict[str, Any], checkpoints_topic: str, group: str) -> dict[tuple[str, int], int]:
    """(remote topic, partition) -> the offset on the target where `group` goes on: the newest checkpoint of
    each partition in `checkpoints_topic`."""
    return {(topic, partition): checkpoint.downstream_offset
            for (g, topic, partition), checkpoint in latest_checkpoints(target_config, checkpoints_topic).items()
            if g == group}


def commit_offsets(target_config: dict[str, Any], group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group` on the target; GroupActive if the group has members there."""
    admin = AdminClient(target_config)
    description = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    if description.members or description.state.name in ACTIVE_STATES:
        raise GroupActive(f"group {group} has {len(description.members)} active members on the target; "
                          "stop its consumers there first")
    partitions = [TopicPartition(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    result = admin.alter_consumer_group_offsets(request, request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    errors = [f"{tp.topic}:{tp.partition} {tp.error}" for tp in result.topic_partitions or [] if tp.error]
    if errors:
        raise RuntimeError(f"committing offsets of group {group}: {', '.join(errors)}")
