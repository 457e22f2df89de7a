"""The per-partition settings the storage layer obeys.

Built by `LogConfig.from_config` from broker defaults and topic overrides; storage sees only resolved values with
units in their names. The compaction settings are read by the log cleaner (`moldau.storage.cleaner`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Self

from moldau.protocol.compression import Compression
from moldau.replication.throttled_replicas import NO_THROTTLED_REPLICAS, ThrottledReplicas, parse_throttled_replicas

# Here rather than in `moldau.storage.drop_behind`, whose ctypes and threads the configuration (and so every
# command of the CLI) would otherwise load:
# The default step (`log.writeback.interval.bytes`), and drop-behind's step when early write-back is off: a few
# system calls per step rather than per append. 16 MiB rather than 4: each step hands work to the worker thread,
# whose GIL hand-offs the event loop pays for; with 16 MiB the node used 6-9 % less CPU per GB produced.
WRITEBACK_STEP_BYTES = 16 * 1024 * 1024
# The default of `log.drop.behind.bytes`: a consumer or follower that far behind a partition's end still reads
# from memory, and it keeps 0.9 of the append rate that dropping everything written back gives
# (`docs/benchmarks.md`, how much drop-behind must drop).
DROP_BEHIND_BYTES = 256 * 1024 * 1024

_AS_SENT = Compression()  # compression.type=producer

if TYPE_CHECKING:
    from moldau.config import BrokerConfig


class TimestampType(Enum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0  # the largest random jitter subtracted from segment_ms, drawn per segment
    # -1 means unlimited, as in Kafka.
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10 * 1024 * 1024
    # Flush (fsync) after this many messages or milliseconds; Kafka's defaults leave it to the OS.
    flush_messages: int = 2**63 - 1
    flush_ms: int = 2**63 - 1
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    # Reject CreateTime timestamps this far before/after the broker's clock (KIP-937).
    message_timestamp_before_max_ms: int = 2**63 - 1
    message_timestamp_after_max_ms: int = 3600 * 1000
    cleanup_policy: tuple[str, ...] = ("delete",)
    file_delete_delay_ms: int = 60_000
    # Compaction (cleanup.policy containing "compact"), as in Kafka.
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    # Replication: read by the replica manager (acks=all) and the controller (leader election), as in Kafka.
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    # Broker-side schema validation (Confluent's topic configs), read by the produce path.
    key_schema_validation: bool = False
    value_schema_validation: bool = False
    key_subject_name_strategy: str = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    value_subject_name_strategy: str = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    # The codec batches are stored in ("producer": as sent) and the levels the broker compresses with.
    compression: Compression = _AS_SENT
    # Bytes appended to the active segment between the starts of their write-back (`moldau.storage.drop_behind`);
    # -1 or 0 leaves write-back to the kernel. A broker setting, not a topic's.
    writeback_interval_bytes: int = WRITEBACK_STEP_BYTES
    # Bytes behind the log's end kept in the page cache, the rest dropped once written back
    # (`moldau.storage.drop_behind`); -1 keeps everything, as Kafka does. A broker setting, not a topic's.
    drop_behind_bytes: int = DROP_BEHIND_BYTES
    # Which of this topic's replicas replication quotas hold back (`moldau.replication.throttle`).
    leader_throttled_replicas: ThrottledReplicas = NO_THROTTLED_REPLICAS
    follower_throttled_replicas: ThrottledReplicas = NO_THROTTLED_REPLICAS

    @classmethod
    def from_config(cls, config: BrokerConfig, overrides: Mapping[str, str] | None = None) -> Self:
        """The settings of a partition: its topic's overrides over the broker defaults. Raises ConfigError."""
        # Imported here: moldau.config imports this module.
        from moldau.config.describe import topic_value, validate_topic_configs
        from moldau.config.topic_defs import TOPIC_CONFIGS

        topic_overrides = overrides or {}
        validate_topic_configs(topic_overrides)

        def get(name: str) -> object:
            return topic_value(config, TOPIC_CONFIGS[name], topic_overrides)[0]

        def get_int(name: str) -> int:
            value = get(name)
            assert isinstance(value, int) and not isinstance(value, bool), value
            return value

        policy = get("cleanup.policy")
        assert isinstance(policy, tuple)
        ratio = get("min.cleanable.dirty.ratio")
        assert isinstance(ratio, int | float) and not isinstance(ratio, bool), ratio
        return cls(
            segment_bytes=get_int("segment.bytes"),
            segment_ms=get_int("segment.ms"),
            segment_jitter_ms=get_int("segment.jitter.ms"),
            retention_ms=get_int("retention.ms"),
            retention_bytes=get_int("retention.bytes"),
            index_interval_bytes=get_int("index.interval.bytes"),
            segment_index_bytes=get_int("segment.index.bytes"),
            flush_messages=get_int("flush.messages"),
            flush_ms=get_int("flush.ms"),
            max_message_bytes=get_int("max.message.bytes"),
            message_timestamp_type=TimestampType(get("message.timestamp.type")),
            message_timestamp_before_max_ms=get_int("message.timestamp.before.max.ms"),
            message_timestamp_after_max_ms=get_int("message.timestamp.after.max.ms"),
            cleanup_policy=policy,
            file_delete_delay_ms=get_int("file.delete.delay.ms"),
            delete_retention_ms=get_int("delete.retention.ms"),
            min_cleanable_dirty_ratio=float(ratio),
            min_compaction_lag_ms=get_int("min.compaction.lag.ms"),
            max_compaction_lag_ms=get_int("max.compaction.lag.ms"),
            min_insync_replicas=get_int("min.insync.replicas"),
            unclean_leader_election_enable=bool(get("unclean.leader.election.enable")),
            key_schema_validation=bool(get("confluent.key.schema.validation")),
            value_schema_validation=bool(get("confluent.value.schema.validation")),
            key_subject_name_strategy=str(get("confluent.key.subject.name.strategy")),
            value_subject_name_strategy=str(get("confluent.value.subject.name.strategy")),
            compression=Compression(str(get("compression.type")), get_int("compression.gzip.level"),
                                    get_int("compression.lz4.level"), get_int("compression.zstd.level")),
            writeback_interval_bytes=config.log_writeback_interval_bytes,
            drop_behind_bytes=config.log_drop_behind_bytes,
            leader_throttled_replicas=_throttled(get("leader.replication.throttled.replicas")),
            follower_throttled_replicas=_throttled(get("follower.replication.throttled.replicas")),
        )

    @property
    def writeback_step_bytes(self) -> int:
        """Bytes between write-back steps; 0 when there are none (no early write-back, no drop-behind)."""
        if self.writeback_interval_bytes > 0:
            return self.writeback_interval_bytes
        return WRITEBACK_STEP_BYTES if self.drop_behind_bytes >= 0 else 0

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """The age that rolls the active segment: a compacted log also rolls by max.compaction.lag.ms, since
        the active segment is never cleaned (Kafka's rule)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms


def _throttled(value: object) -> ThrottledReplicas:
    assert isinstance(value, tuple), value
    return parse_throttled_replicas(value)
