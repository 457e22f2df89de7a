"""Reading, altering and resetting a sink connector's committed consumer offsets (its group
`connect-<name>`), and reading the cluster id, through confluent-kafka's admin client."""

from __future__ import annotations

from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.connect.worker.sink_runner import group_id
from moldau.connect.worker.worker_config import WorkerConfig

__all__ = ["alter_sink_offsets", "cluster_id", "reset_sink_offsets", "sink_offsets"]

TIMEOUT_S = 10.0


def sink_offsets(worker: WorkerConfig, connector: str) -> list[dict[str, Any]]:
    """KIP-875's shape: `{"partition": {"kafka_topic", "kafka_partition"}, "offset": {"kafka_offset"}}`."""
    admin = AdminClient(worker.client_config("admin"))
    futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id(connector))],
                                                request_timeout=TIMEOUT_S)
    try:
        result = next(iter(futures.values())).result(TIMEOUT_S)
    except KafkaException:
        return []
    offsets = []
    for tp in sorted(result.topic_partitions or [], key=lambda p: (p.topic, p.partition)):
        if tp.offset >= 0:
            offsets.append({"partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
                            "offset": {"kafka_offset": tp.offset}})
    return offsets


def cluster_id(worker: WorkerConfig) -> str | None:
    """The cluster's id, or None when no broker answers."""
    admin = AdminClient(worker.client_config("admin"))
    try:
        return admin.list_topics(timeout=TIMEOUT_S).cluster_id
    except KafkaException:
        return None


def alter_sink_offsets(worker: WorkerConfig, connector: str, offsets: list[tuple[str, int, int]]) -> None:
    """Set the committed offsets (topic, partition, offset) of the connector's group."""
    admin = AdminClient(worker.client_config("admin"))
    partitions = [TopicPartition(topic, partition, offset) for topic, partition, offset in offsets]
    futures = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id(connector), partitions)],
                                                 request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(TIMEOUT_S)


def reset_sink_offsets(worker: WorkerConfig, connector: str) -> None:
    """Forget every committed offset of the connector's group (by deleting the group, empty once stopped)."""
    admin = AdminClient(worker.client_config("admin"))
    futures = admin.delete_consumer_groups([group_id(connector)], request_timeout=TIMEOUT_S)
    for future in futures.values():
        try:
            future.result(TIMEOUT_S)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                raise
