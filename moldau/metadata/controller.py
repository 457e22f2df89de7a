"""The controller: validates metadata changes and turns them into records.

Every change follows one path: validate against the current image, emit records, append them to the metadata
log, apply them to a new image, and tell the listeners (the broker's replica manager) about it. Errors come
back as Kafka error codes per item, the way the admin APIs report them.

A single node is its own controller. The Raft quorum keeps this class and replaces only the log it appends to.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from moldau.config import NOT_YET_ACTED_ON, ConfigError, validate_topic_configs
from moldau.metadata.image import MetadataImage, TopicImage
from moldau.metadata.log import LocalMetadataLog
from moldau.metadata.records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS_PER_TOPIC = 100_000
PRODUCER_ID_BLOCK_SIZE = 1000
_LEGAL_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")

# IncrementalAlterConfigs operations.
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_LIST_CONFIGS = frozenset({"cleanup.policy", "log.cleanup.policy"})

ImageListener = Callable[[MetadataImage, MetadataImage], None]
# The value a config has when nothing overrides it: (resource type, config name) -> value.
DefaultLookup = Callable[[int, str], str | None]


@dataclass(frozen=True, slots=True)
class CreatedTopic:
    topic_id: uuid.UUID
    num_partitions: int
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=dict)


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise KafkaError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name is {len(name)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC_NAME.match(name):
        raise KafkaError(
            ErrorCode.invalid_topic_exception,
            f"topic name {name!r} contains characters other than ASCII letters, digits, '.', '_' and '-'",
        )


class Controller:
    def __init__(self, metadata_log: LocalMetadataLog, node_id: int,
                 default_partitions: int = 1, default_replication_factor: int = 1,
                 config_default: DefaultLookup = lambda resource_type, name: None) -> None:
        self._log = metadata_log
        self._config_default = config_default
        self.node_id = node_id
        self.default_partitions = default_partitions
        self.default_replication_factor = default_replication_factor
        self.image = MetadataImage().apply((r for _, r in metadata_log.entries), metadata_log.next_offset - 1)
        self._listeners: list[ImageListener] = []

    def close(self) -> None:
        self._log.close()

    def add_listener(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def _commit(self, records: Sequence[MetadataRecord]) -> None:
        if not records:
            return
        try:
            last_offset = self._log.append(records)
        except OSError as exc:
            raise KafkaError(ErrorCode.kafka_storage_error, f"cannot write the metadata log: {exc}") from exc
        before, self.image = self.image, self.image.apply(records, last_offset)
        for listener in self._listeners:
            listener(before, self.image)

    # -- brokers ---------------------------------------------------------------------------------------------

    def register_broker(self, record: RegisterBrokerRecord) -> None:
        current = self.image.brokers.get(record.broker_id)
        if current is None or current.endpoints != record.endpoints or current.rack != record.rack:
            self._commit([record])

    # -- topics ----------------------------------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     assignments: Mapping[int, Sequence[int]], configs: Mapping[str, str],
                     validate_only: bool = False) -> CreatedTopic:
        validate_topic_name(name)
        if name in self.image.topics_by_name:
            raise KafkaError(ErrorCode.topic_already_exists, f"topic '{name}' already exists")
        self._check_collision(name)
        _check_configs(configs)
        placement = self._placement(num_partitions, replication_factor, assignments)
        topic_id = uuid.uuid4()
        created = CreatedTopic(topic_id, len(placement), len(placement[0]), dict(configs))
        if validate_only:
            return created
        records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
        records += [ConfigRecord(RESOURCE_TOPIC, name, k, v) for k, v in configs.items()]
        records += [_new_partition(topic_id, p, replicas) for p, replicas in enumerate(placement)]
        self._commit(records)
        return created

    def _check_collision(self, name: str) -> None:
        # '.' and '_' collide in metric names, so Kafka refuses topics that differ only in them.
        folded = name.replace(".", "_")
        for existing in self.image.topics_by_name:
            if existing.replace(".", "_") == folded:
                raise KafkaError(
                    ErrorCode.invalid_topic_exception,
                    f"topic '{name}' collides with existing topic '{existing}' ('.' and '_' are equivalent)",
                )

    def _placement(self, num_partitions: int, replication_factor: int,
                   assignments: Mapping[int, Sequence[int]]) -> list[tuple[int, ...]]:
        brokers = sorted(self.image.brokers) or [self.node_id]
        if assignments:
            if num_partitions not in (-1, len(assignments)) or replication_factor != -1:
                raise KafkaError(ErrorCode.invalid_request,
                                 "give either replica assignments or partition count and replication factor")
            return [self._check_assignment(p, assignments[p], brokers) for p in range(len(assignments))]
        partitions = self.default_partitions if num_partitions == -1 else num_partitions
        factor = self.default_replication_factor if replication_factor == -1 else replication_factor
        if partitions <= 0 or partitions > MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"number of partitions must be between 1 and {MAX_PARTITIONS_PER_TOPIC}")
        if factor <= 0:
            raise KafkaError(ErrorCode.invalid_replication_factor, "replication factor must be larger than 0")
        if factor > len(brokers):
            raise KafkaError(ErrorCode.invalid_replication_factor,
                             f"replication factor {factor} is larger than the {len(brokers)} available brokers")
        return [tuple(brokers[(p + r) % len(brokers)] for r in range(factor)) for p in range(partitions)]

    @staticmethod
    def _check_assignment(partition: int, replicas: Sequence[int], brokers: list[int]) -> tuple[int, ...]:
        if not replicas or len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partition {partition} needs a non-empty list of distinct brokers")
        unknown = [b for b in replicas if b not in brokers]
        if unknown:
            raise KafkaError(ErrorCode.invalid_replica_assignment,
                             f"partition {partition} names unknown brokers {unknown}")
        return tuple(replicas)

    def delete_topic(self, topic: TopicImage) -> None:
        self._commit([RemoveTopicRecord(topic.topic_id)])

    def create_partitions(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None,
                          validate_only: bool = False) -> None:
        topic = self.image.topics_by_name.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{name}' does not exist")
        current = len(topic.partitions)
        if count <= current:
            raise KafkaError(ErrorCode.invalid_partitions,
                             f"topic '{name}' has {current} partitions; the new count must be larger")
        if count > MAX_PARTITIONS_PER_TOPIC:
            raise KafkaError(ErrorCode.invalid_partitions, f"at most {MAX_PARTITIONS_PER_TOPIC} partitions")
        factor = len(topic.partitions[0].replicas)
        brokers = sorted(self.image.brokers) or [self.node_id]
        if assignments is not None:
            if len(assignments) != count - current:
                raise KafkaError(ErrorCode.invalid_replica_assignment,
                                 f"{count - current} new partitions need as many assignments")
            placement = [self._check_assignment(current + i, a, brokers) for i, a in enumerate(assignments)]
        else:
            placement = [tuple(brokers[(p + r) % len(brokers)] for r in range(factor))
                         for p in range(current, count)]
        if not validate_only:
            self._commit([_new_partition(topic.topic_id, current + i, r) for i, r in enumerate(placement)])

    # -- configs ---------------------------------------------------------------------------------------------

    def alter_configs(self, resource_type: int, resource_name: str,
                      changes: Sequence[tuple[str, int, str | None]], validate_only: bool = False,
                      replace_all: bool = False) -> None:
        """Apply (name, operation, value) changes; `replace_all` is the legacy AlterConfigs semantics."""
        current = self._current_configs(resource_type, resource_name)
        updated = {} if replace_all else dict(current)
        for name, op, value in changes:
            if op in (OP_APPEND, OP_SUBTRACT) and name not in updated:
                # Kafka appends to (or subtracts from) the value in effect, which may be the default.
                default = self._config_default(resource_type, name)
                if default is not None:
                    updated[name] = default
            _apply_op(updated, name, op, value)
        if resource_type == RESOURCE_TOPIC:
            _check_configs(updated)
        else:
            _check_broker_configs(updated)
        if validate_only:
            return
        records: list[MetadataRecord] = [
            ConfigRecord(resource_type, resource_name, k, v) for k, v in updated.items() if current.get(k) != v
        ]
        records += [ConfigRecord(resource_type, resource_name, k, None) for k in current if k not in updated]
        self._commit(records)

    def _current_configs(self, resource_type: int, resource_name: str) -> Mapping[str, str]:
        if resource_type == RESOURCE_TOPIC:
            if resource_name not in self.image.topics_by_name:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"topic '{resource_name}' does not exist")
            return self.image.topic_configs(resource_name)
        if resource_type == RESOURCE_BROKER:
            if resource_name not in ("", str(self.node_id)) and not (
                resource_name.isdigit() and int(resource_name) in self.image.brokers
            ):
                raise KafkaError(ErrorCode.invalid_request, f"unknown broker '{resource_name}'")
            return self.image.configs.get((RESOURCE_BROKER, resource_name), {})
        raise KafkaError(ErrorCode.invalid_request, f"unsupported resource type {resource_type}")

    # -- producer ids ----------------------------------------------------------------------------------------

    def allocate_producer_ids(self, count: int = PRODUCER_ID_BLOCK_SIZE) -> int:
        """Reserve a block of producer ids durably; returns the first id of the block."""
        first = self.image.next_producer_id
        self._commit([ProducerIdsRecord(self.node_id, first + count)])
        return first


def _new_partition(topic_id: uuid.UUID, partition: int, replicas: tuple[int, ...]) -> PartitionRecord:
    return PartitionRecord(topic_id, partition, replicas, isr=replicas, leader=replicas[0],
                           leader_epoch=0, partition_epoch=0)


def _apply_op(configs: dict[str, str], name: str, op: int, value: str | None) -> None:
    if op == OP_SET:
        if value is None:
            raise KafkaError(ErrorCode.invalid_config, f"config '{name}' needs a value")
        configs[name] = value
    elif op == OP_DELETE:
        configs.pop(name, None)
    elif op in (OP_APPEND, OP_SUBTRACT):
        if name not in _LIST_CONFIGS:
            raise KafkaError(ErrorCode.invalid_config, f"config '{name}' is not a list; cannot APPEND/SUBTRACT")
        items = [i for i in configs.get(name, "").split(",") if i]
        for item in (value or "").split(","):
            if op == OP_APPEND and item and item not in items:
                items.append(item)
            elif op == OP_SUBTRACT and item in items:
                items.remove(item)
        configs[name] = ",".join(items)
    else:
        raise KafkaError(ErrorCode.invalid_request, f"unknown config operation {op}")


def _check_configs(configs: Mapping[str, str]) -> None:
    try:
        validate_topic_configs(dict(configs))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
    for name in sorted(NOT_YET_ACTED_ON & configs.keys()):
        log.warning("topic config %s is accepted but has no effect yet", name)


def _check_broker_configs(configs: Mapping[str, str]) -> None:
    from moldau.config import validate_dynamic_broker_configs

    try:
        validate_dynamic_broker_configs(dict(configs))
    except ConfigError as exc:
        raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc
