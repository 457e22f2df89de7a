"""The broker configs the group coordinator acts on, read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Self

from moldau.config import BrokerConfig
from moldau.coordinator.group.classic import GroupLimits
from moldau.coordinator.group.consumer import ConsumerSettings, TopicVisibility
from moldau.coordinator.group.shard import ShardSettings


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    shard: ShardSettings
    offsets_topic_partitions: int
    offsets_topic_replication_factor: int
    offsets_retention_check_interval_ms: int
    offset_commit_timeout_ms: int = 5000
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_topic_compression_codec: int = 0  # the codec id of every batch the coordinator appends
    offsets_load_buffer_size: int = 5 * 1024 * 1024  # bytes per read when a partition is loaded
    append_linger_ms: int = -1  # how long OffsetCommits wait to be appended together (-1: adaptive)

    def offsets_topic_configs(self) -> dict[str, str]:
        """The configs `__consumer_offsets` is created with, as Kafka's group coordinator sets them."""
        return {"cleanup.policy": "compact", "compression.type": "producer",
                "segment.bytes": str(self.offsets_topic_segment_bytes)}

    @classmethod
    def from_config(cls, config: BrokerConfig, topic_visible: TopicVisibility | None = None) -> Self:
        """`topic_visible`: the authorizer's DESCRIBE rights on topics (None: no authorizer)."""
        limits = GroupLimits(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
        )
        shard = ShardSettings(
            limits=limits,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            offsets_retention_ms=config.offsets_retention_ms,
            consumer=ConsumerSettings(
                heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
                session_timeout_ms=config.group_consumer_session_timeout_ms,
                assignors=tuple(config.group_consumer_assignors),
                max_size=config.group_consumer_max_size,
                migration_policy=(config.group_consumer_migration_policy or "bidirectional").lower(),
                topic_visible=topic_visible,
            ),
        )
        return cls(
            shard=shard,
            offsets_topic_partitions=config.offsets_topic_num_partitions,
            offsets_topic_replication_factor=config.offsets_topic_replication_factor,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offset_commit_timeout_ms=config.offsets_commit_timeout_ms,
            offsets_topic_segment_bytes=config.offsets_topic_segment_bytes,
            offsets_topic_compression_codec=config.offsets_topic_compression_codec,
            offsets_load_buffer_size=config.offsets_load_buffer_size,
            append_linger_ms=config.group_coordinator_append_linger_ms,
        )
