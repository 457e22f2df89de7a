"""The configs share groups act on: the broker's (`group.share.*`, `share.auto.offset.reset`,
`share.isolation.level`), read once at start-up, and a group's own overrides (GROUP config resources, KIP-932/
KIP-1191 names), which replace them for that group as soon as they are in the metadata image."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Self

from moldau.config import BrokerConfig
from moldau.share.group import MembershipSettings
from moldau.share.partition import ShareSettings
from moldau.share.sessions import DEFAULT_MAX_SESSIONS


@dataclass(frozen=True, slots=True)
class ShareBrokerSettings:
    membership: MembershipSettings = field(default_factory=MembershipSettings)
    partition: ShareSettings = field(default_factory=ShareSettings)
    dead_letter_topic: str = ""  # errors.deadletterqueue.topic.name: "" for none
    dead_letter_copy_record: bool = False  # errors.deadletterqueue.copy.record.enable
    max_sessions: int = DEFAULT_MAX_SESSIONS  # group.share.max.share.sessions

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
            max_sessions=config.group_share_max_share_sessions,
        )

    def for_group(self, overrides: Mapping[str, str]) -> ShareBrokerSettings:
        """These settings with a group's config overrides (already validated when they were stored)."""
        if not overrides:
            return self
        membership = self.membership
        partition = self.partition
        get = overrides.get
        if "share.session.timeout.ms" in overrides or "share.heartbeat.interval.ms" in overrides:
            membership = dataclasses.replace(
                membership,
                session_timeout_ms=int(get("share.session.timeout.ms", membership.session_timeout_ms)),
                heartbeat_interval_ms=int(get("share.heartbeat.interval.ms", membership.heartbeat_interval_ms)))
        partition = dataclasses.replace(
            partition,
            record_lock_duration_ms=int(get("share.record.lock.duration.ms", partition.record_lock_duration_ms)),
            delivery_count_limit=int(get("share.delivery.count.limit", partition.delivery_count_limit)),
            max_record_locks=int(get("share.partition.max.record.locks", partition.max_record_locks)),
            auto_offset_reset=get("share.auto.offset.reset", partition.auto_offset_reset).strip(),
            isolation_level=get("share.isolation.level", partition.isolation_level).strip().lower(),
            dead_letter=bool(get("errors.deadletterqueue.topic.name", "").strip()),
        )
        return dataclasses.replace(
            self, membership=membership, partition=partition,
            dead_letter_topic=get("errors.deadletterqueue.topic.name", "").strip(),
            dead_letter_copy_record=get("errors.deadletterqueue.copy.record.enable", "false").strip().lower()
            == "true")
