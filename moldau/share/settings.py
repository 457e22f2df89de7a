"""The broker configs share groups act on (`group.share.*`, `share.auto.offset.reset`, `share.isolation.level`),
read once at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

from moldau.config import BrokerConfig
from moldau.share.group import MembershipSettings
from moldau.share.partition import ShareSettings


@dataclass(frozen=True, slots=True)
class ShareBrokerSettings:
    membership: MembershipSettings = field(default_factory=MembershipSettings)
    partition: ShareSettings = field(default_factory=ShareSettings)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(
            MembershipSettings(
                heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
                session_timeout_ms=config.group_share_session_timeout_ms,
                max_size=config.group_share_max_size,
            ),
            ShareSettings(
                record_lock_duration_ms=config.group_share_record_lock_duration_ms,
                delivery_count_limit=config.group_share_delivery_count_limit,
                max_record_locks=config.group_share_partition_max_record_locks,
                auto_offset_reset=config.share_auto_offset_reset or "latest",
                isolation_level=config.share_isolation_level or "read_uncommitted",
            ),
        )
