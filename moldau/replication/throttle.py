"""Replication quotas (Kafka's KIP-73): a cap on the bytes that catching-up replicas copy, so that moving
partitions between brokers (a reassignment, a replaced broker) does not take the bandwidth clients need.

Which replicas are throttled is said per topic, as in Kafka: `leader.replication.throttled.replicas` lists
`partition:broker` pairs whose broker throttles what it sends followers of that partition as their leader, and
`follower.replication.throttled.replicas` those whose broker throttles what it fetches for that partition as a
follower (`*`: every partition on every broker). How much is said per broker: `leader.replication.throttled.rate`
and `follower.replication.throttled.rate` in bytes per second, measured over `replication.quota.window.num`
windows of `replication.quota.window.size.seconds`, as client quotas are.

A replica in the ISR is never throttled (it only keeps up), and a throttled one is held back only while the
broker's measured rate is over its limit: its partition is then left out of the leader's answer, or out of the
follower's request, until the rate is back under it. Only the throttled partitions' bytes count against the
limit. The state here is sans-I/O: the fetch handler and the replica fetcher ask it and tell it what they moved,
with the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.security.quotas import QuotaConfig, Rate

__all__ = ["UNLIMITED", "ReplicationQuota", "ReplicationQuotas"]

UNLIMITED = 2**63 - 1  # Kafka's default rate, Long.MAX_VALUE: no throttle


@dataclass(slots=True)
class ReplicationQuota:
    """One direction's limit on this broker: the bytes it sends as leader, or fetches as follower, for throttled
    replicas."""

    limit_bytes_per_s: int = UNLIMITED
    rate: Rate = field(default_factory=lambda: Rate(QuotaConfig()))

    @property
    def limited(self) -> bool:
        return self.limit_bytes_per_s < UNLIMITED

    def exceeded(self, now_ms: float) -> bool:
        """Whether throttled replicas are held back now: the measured rate is over the limit."""
        return self.limited and self.rate.per_second(now_ms) > self.limit_bytes_per_s

    def holds_back(self, throttled: bool, in_sync: bool, now_ms: float) -> bool:
        """Whether a replica (`throttled` by its topic's config, `in_sync` or not) is left out now."""
        return throttled and not in_sync and self.exceeded(now_ms)

    def record(self, size: int, now_ms: float) -> None:
        """Count `size` bytes a throttled replica moved."""
        if size and self.limited:
            self.rate.record(size, now_ms)

    def wait_ms(self, now_ms: float) -> int:
        """How long until the rate is back under the limit if nothing more is moved; 0 when it is."""
        return self.rate.throttle_ms(self.limit_bytes_per_s, now_ms) if self.limited else 0


@dataclass(slots=True)
class ReplicationQuotas:
    """This broker's leader and follower replication quotas."""

    leader: ReplicationQuota = field(default_factory=ReplicationQuota)
    follower: ReplicationQuota = field(default_factory=ReplicationQuota)

    def configure(self, leader_rate: int, follower_rate: int, window: QuotaConfig) -> None:
        """Apply the broker's current limits and windows; what was measured is kept unless the windows change."""
        for quota, limit in ((self.leader, leader_rate), (self.follower, follower_rate)):
            quota.limit_bytes_per_s = limit
            if quota.rate.config != window:
                quota.rate = Rate(window)
