"""The broker configs the group coordinator acts on, read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass

from moldau.config import BrokerConfig
from moldau.coordinator.group.classic import GroupLimits
from moldau.coordinator.group.consumer import ConsumerSettings
from moldau.coordinator.group.shard import ShardSettings


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    shard: ShardSettings
    offsets_topic_partitions: int
    offsets_topic_replication_factor: int
    offsets_retention_check_interval_ms: int
    offset_commit_timeout_ms: int = 5000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> CoordinatorSettings:
        limits = GroupLimits(
            min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
            max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
            initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
            max_size=config.get_int("group.max.size"),
        )
        shard = ShardSettings(
            limits=limits,
            offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
            offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
            consumer=ConsumerSettings(
                heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
                session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
                assignors=tuple(config.get_list("group.consumer.assignors")),
                max_size=config.get_int("group.consumer.max.size"),
            ),
        )
        return cls(
            shard=shard,
            offsets_topic_partitions=config.get_int("offsets.topic.num.partitions"),
            offsets_topic_replication_factor=config.get_int("offsets.topic.replication.factor"),
            offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
            offset_commit_timeout_ms=config.get_int("offsets.commit.timeout.ms"),
        )
