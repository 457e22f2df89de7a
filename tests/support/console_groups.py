"""Kafka-side helpers for the console's group and throughput tests: topics with known contents, groups with known
committed offsets, and reading what the console's JSON endpoints answer."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.cli.share_groups import alter_group_configs

__all__ = ["commit", "committed", "create_topic", "get_json", "peer_ports", "produce", "share_from_earliest"]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(10)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], size: int = 20) -> None:
    """`per_partition[p]` records of `size` bytes into partition p."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, f"{partition}-{i}".encode().ljust(size, b"."), partition=partition)
    assert producer.flush(15) == 0


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit offsets as a consumer that manages its own partitions (no group membership)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, read with AdminClient.list_consumer_group_offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(10)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions}


def share_from_earliest(bootstrap: str, group: str) -> None:
    """Make a share group start at the beginning of its partitions (the group config share.auto.offset.reset)."""
    alter_group_configs(bootstrap, group, [("share.auto.offset.reset", "earliest")], [])


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=15) as response:
        return json.loads(response.read())


def peer_ports(port: int) -> set[int]:
    """The other end's port of every TCP connection on this machine to or from `port`, in any state (a connection
    closed a moment ago lingers in TIME_WAIT on the side that closed it): a new port is a new connection."""
    found: set[int] = set()
    for table in (Path("/proc/net/tcp"), Path("/proc/net/tcp6")):
        if not table.exists():
            continue
        for line in table.read_text().splitlines()[1:]:
            local, remote = (int(address.rsplit(":", 1)[1], 16) for address in line.split()[1:3])
            if local == port:
                found.add(remote)
            elif remote == port:
                found.add(local)
    return found
