"""The per-partition settings the storage layer obeys.

Built by `moldau.config` from broker defaults and topic overrides; storage sees only resolved values with
units in their names. The compaction settings are read by the log cleaner (`moldau.storage.cleaner`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class TimestampType(Enum):
    CREATE_TIME = "CreateTime"
    LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
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
