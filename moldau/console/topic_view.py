"""What the topic pages show and change: the topic list (partitions, replication factor, size on disk, messages,
under-replicated partitions), a topic's partitions (leader, replicas, ISR, earliest and latest offsets, size)
and configs (value, source, sensitivity, documentation), and the changes made from them (create a topic, add
partitions, delete, set or delete one config). Gathering goes through the console's clients; shaping is plain
functions of what the cluster answered; form input is checked here and refused with ConsoleError(400)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from moldau.cli import group_offsets
from moldau.config import TOPIC_CONFIGS
from moldau.console.clients import REQUEST_TIMEOUT_MS, ConsoleClients
from moldau.console.cluster_view import gather_log_dirs
from moldau.console.errors import ConsoleError
from moldau.console.forms import name_value_lines
from moldau.console.native import LogDir
from moldau.text import ascii_digits

__all__ = ["ConfigRow", "CreateTopicForm", "PartitionRow", "TopicRow", "add_partitions", "alter_config",
           "config_rows", "create_topic", "delete_topic", "gather_offsets", "gather_replica_sizes",
           "is_internal", "partition_rows", "replica_sizes", "topic_rows"]

Partition = tuple[str, int]
Offsets = Mapping[Partition, tuple[int, int]]  # earliest and latest (log end) offset

# ConfigEntry.source is the wire's number; ConfigSource names the numbers.
SOURCE_NAMES = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG.value: "topic override",
    ConfigSource.DYNAMIC_BROKER_CONFIG.value: "broker (dynamic)",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: "cluster default (dynamic)",
    ConfigSource.STATIC_BROKER_CONFIG.value: "broker (static)",
    ConfigSource.DEFAULT_CONFIG.value: "default",
}


def is_internal(topic: str) -> bool:
    """Kafka's internal topics (`__consumer_offsets`, `__transaction_state` ...) and the ones platform services
    keep for themselves (`_schemas`, Connect's `_connect-*`) all start with an underscore."""
    return topic.startswith("_")


@dataclass(frozen=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    size_bytes: int | None  # all replicas on all brokers; None when no broker described its log dirs
    messages: int | None  # sum of latest minus earliest offsets; None when some partition's offsets are unknown
    under_replicated: int  # partitions whose ISR is smaller than their replica set
    internal: bool


@dataclass(frozen=True)
class PartitionRow:
    partition: int
    leader: int  # -1: offline
    replicas: list[int]
    isr: list[int]
    earliest: int | None
    latest: int | None
    size_bytes: int | None  # the leader's replica

    @property
    def messages(self) -> int | None:
        return None if self.earliest is None or self.latest is None else self.latest - self.earliest

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str | None
    source: str
    is_default: bool
    sensitive: bool
    read_only: bool
    doc: str | None


def replica_sizes(log_dirs: Mapping[int, list[LogDir] | str]) -> dict[Partition, dict[int, int]]:
    """The size on disk of each partition's replica on each broker that described its log directories."""
    sizes: dict[Partition, dict[int, int]] = {}
    for broker, dirs in log_dirs.items():
        if isinstance(dirs, str):
            continue
        for log_dir in dirs:
            for partition, size in log_dir.partition_bytes.items():
                sizes.setdefault(partition, {})[broker] = size
    return sizes


def topic_rows(metadata: Any, sizes: Mapping[Partition, Mapping[int, int]] | None, offsets: Offsets,
               show_internal: bool = False, name_filter: str = "") -> list[TopicRow]:
    """One row per topic of the metadata, sorted by name; internal topics only when asked, and only names that
    contain `name_filter` (case-insensitive)."""
    rows = []
    needle = name_filter.strip().lower()
    for topic in metadata.topics.values():
        if (is_internal(topic.topic) and not show_internal) or needle not in topic.topic.lower():
            continue
        partitions = list(topic.partitions.values())
        keys = [(topic.topic, p.id) for p in partitions]
        messages = None
        if all(k in offsets for k in keys):
            messages = sum(offsets[k][1] - offsets[k][0] for k in keys)
        size = None if sizes is None else sum(sum(sizes.get(k, {}).values()) for k in keys)
        rows.append(TopicRow(
            name=topic.topic, partitions=len(partitions),
            replication_factor=max((len(p.replicas) for p in partitions), default=0),
            size_bytes=size, messages=messages,
            under_replicated=sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
            internal=is_internal(topic.topic)))
    return sorted(rows, key=lambda r: r.name)


def partition_rows(topic: Any, sizes: Mapping[Partition, Mapping[int, int]] | None,
                   offsets: Offsets) -> list[PartitionRow]:
    rows = []
    for p in sorted(topic.partitions.values(), key=lambda p: p.id):
        key = (topic.topic, p.id)
        earliest, latest = offsets.get(key, (None, None))
        size = None if sizes is None else sizes.get(key, {}).get(p.leader)
        rows.append(PartitionRow(partition=p.id, leader=p.leader, replicas=list(p.replicas), isr=list(p.isrs),
                                 earliest=earliest, latest=latest, size_bytes=size))
    return rows


def config_rows(entries: Mapping[str, Any]) -> list[ConfigRow]:
    """DescribeConfigs' entries for a topic, by name, with the documentation Moldau has for each."""
    rows = []
    for name in sorted(entries):
        entry = entries[name]
        definition = TOPIC_CONFIGS.get(name)
        rows.append(ConfigRow(
            name=name, value=None if entry.is_sensitive else entry.value,
            source=SOURCE_NAMES.get(_number(entry.source), "unknown"),
            is_default=_number(entry.source) != ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
            sensitive=entry.is_sensitive, read_only=entry.is_read_only,
            doc=definition.doc if definition is not None else None))
    return rows


def _number(source: Any) -> int:
    return int(source.value if isinstance(source, ConfigSource) else source)


async def gather_replica_sizes(clients: ConsoleClients, metadata: Any) -> dict[Partition, dict[int, int]] | None:
    """Replica sizes from every broker in the metadata; None when not one broker could describe its dirs."""
    brokers = [(b.id, b.host, b.port) for b in metadata.brokers.values()]
    log_dirs = await gather_log_dirs(clients, brokers)
    if brokers and all(isinstance(d, str) for d in log_dirs.values()):
        return None
    return replica_sizes(log_dirs)


async def gather_offsets(clients: ConsoleClients, partitions: Iterable[Partition]) -> dict[Partition, tuple[int, int]]:
    """Earliest and latest offsets of each partition (ListOffsets); a partition that fails is left out."""
    wanted = list(partitions)
    if not wanted:
        return {}

    async def offsets_for(spec: Any) -> dict[Partition, int]:
        # A partition without a leader, or not authorized, is left out: the page shows it as unknown.
        return await group_offsets.list_offsets(clients.admin, dict.fromkeys(wanted, spec),
                                                REQUEST_TIMEOUT_MS / 1000, skip_failed=True)

    earliest, latest = await asyncio.gather(offsets_for(OffsetSpec.earliest()),  # type: ignore[no-untyped-call]
                                           offsets_for(OffsetSpec.latest()))  # type: ignore[no-untyped-call]
    return {k: (earliest[k], latest[k]) for k in wanted if k in earliest and k in latest}


@dataclass(frozen=True)
class CreateTopicForm:
    """The create-topic form as typed; `parse` checks it and gives the NewTopic, or raises ConsoleError(400)."""

    name: str = ""
    partitions: str = "1"
    replication_factor: str = ""
    configs: str = ""

    @classmethod
    def from_form(cls, form: Mapping[str, Any]) -> CreateTopicForm:
        return cls(name=str(form.get("name", "")).strip(), partitions=str(form.get("partitions", "")).strip(),
                   replication_factor=str(form.get("replication_factor", "")).strip(),
                   configs=str(form.get("configs", "")))

    def parse(self) -> NewTopic:
        if not self.name:
            raise ConsoleError(400, "A topic needs a name.")
        # Blank means the broker's default (num.partitions, default.replication.factor), as -1 asks in CreateTopics.
        partitions = _count("Partitions", self.partitions)
        replication = _count("Replication factor", self.replication_factor)
        return NewTopic(self.name, num_partitions=partitions, replication_factor=replication,
                        config=parse_configs(self.configs))


def parse_configs(text: str) -> dict[str, str]:
    """`key=value` lines (blank lines and `#` comments skipped)."""
    return {name: value.strip() for name, value in name_value_lines(text, "Configs", comments=True)}


def _count(label: str, text: str) -> int:
    if text == "":
        return -1
    if not ascii_digits(text) or int(text) < 1:
        raise ConsoleError(400, f"{label} must be a whole number of at least 1, not {text!r}.")
    return int(text)


async def create_topic(clients: ConsoleClients, topic: NewTopic) -> None:
    futures = clients.admin.create_topics([topic])
    await clients.call(futures[topic.topic])


async def add_partitions(clients: ConsoleClients, topic: str, current: int, total_text: str) -> int:
    """Grow `topic` to the total typed in the form; returns the new total."""
    total_text = total_text.strip()
    if not ascii_digits(total_text) or int(total_text) <= current:
        raise ConsoleError(400, f"The new partition count must be a whole number above {current}, "
                                f"not {total_text!r}.")
    futures = clients.admin.create_partitions([NewPartitions(topic, int(total_text))])
    await clients.call(futures[topic])
    return int(total_text)


async def delete_topic(clients: ConsoleClients, topic: str, typed: str) -> None:
    """Delete `topic` once the user typed its name exactly (the confirmation)."""
    if typed.strip() != topic:
        raise ConsoleError(400, f"Type the topic's name, {topic}, to delete it.")
    futures = clients.admin.delete_topics([topic])
    await clients.call(futures[topic])


async def describe_topic_configs(clients: ConsoleClients, topic: str) -> list[ConfigRow]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = clients.admin.describe_configs([resource])
    entries = await clients.call(next(iter(futures.values())))
    return config_rows(entries)


async def alter_config(clients: ConsoleClients, topic: str, name: str, value: str, delete: bool) -> None:
    """Set one config of `topic`, or delete its override (IncrementalAlterConfigs)."""
    name = name.strip()
    if not name:
        raise ConsoleError(400, "Name the config to change.")
    operation = AlterConfigOpType.DELETE if delete else AlterConfigOpType.SET
    entry = ConfigEntry(name, None if delete else value, incremental_operation=operation)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    futures = clients.admin.incremental_alter_configs([resource])
    await clients.call(next(iter(futures.values())))
