"""The broker as the collector sees it (`NodeView`): read-only views of its partitions, quorum, connections and
committed offsets, taken when `/metrics` is scraped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from moldau.metadata.image import MetadataImage
from moldau.metrics.collector import CommittedOffsets, PartitionView
from moldau.metrics.counters import BrokerCounters
from moldau.metrics.leader_offsets import LeaderEndOffsets
from moldau.replication.replica_manager import HostedPartition

if TYPE_CHECKING:
    from moldau.server.broker import Broker

__all__ = ["BrokerNode"]


class _Hosted:
    """A hosted partition as a PartitionView."""

    __slots__ = ("hosted", "leader", "partition", "topic")

    def __init__(self, hosted: HostedPartition) -> None:
        self.hosted = hosted
        self.topic = hosted.topic
        self.partition = hosted.partition
        self.leader = hosted.leader

    @property
    def isr(self) -> tuple[int, ...]:
        return self.hosted.isr

    @property
    def log_start_offset(self) -> int:
        return self.hosted.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.hosted.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.hosted.log.high_watermark

    @property
    def size_bytes(self) -> int:
        return self.hosted.log.size_bytes

    @property
    def segment_count(self) -> int:
        return self.hosted.log.segment_count


class BrokerNode:
    def __init__(self, broker: Broker, counters: BrokerCounters) -> None:
        self._broker = broker
        self.node_id = broker.node_id
        self.counters = counters
        self.leader_offsets = LeaderEndOffsets(broker)

    @property
    def is_broker(self) -> bool:
        return self._broker.is_broker

    @property
    def image(self) -> MetadataImage:
        return self._broker.image

    def partitions(self) -> Iterable[PartitionView]:
        return [_Hosted(h) for h in self._broker.replicas.partitions.values()]

    def isr_changes(self) -> tuple[int, int]:
        replicas = self._broker.replicas
        return replicas.isr_shrinks, replicas.isr_expands

    def connections(self) -> Mapping[str, int]:
        return self._broker.connection_counts()

    def idle_poll_seconds(self) -> float | None:
        return self._broker.idle_poll_seconds()

    def raft(self) -> tuple[int, int, int, int]:
        quorum = self._broker.quorum
        leader = quorum.leader_id
        return quorum.epoch, -1 if leader is None else leader, quorum.high_watermark, quorum.next_offset()

    def is_active_controller(self) -> bool:
        return self._broker.quorum.is_active_controller()

    def committed_offsets(self) -> CommittedOffsets:
        return self._broker.groups.committed_offsets()

    def remote_end_offsets(self) -> Mapping[tuple[str, int], int]:
        return self.leader_offsets.ends

    def raft_commit_latency(self) -> tuple[float, float]:
        quorum = self._broker.quorum
        now = quorum.clock_ms()
        return quorum.commit_latency.avg(now), quorum.commit_latency.max(now)

    def now_ms(self) -> float:
        return self._broker.clock.monotonic_ms()

    def fetch_sessions(self) -> tuple[int, int]:
        cache = self._broker.fetch_sessions
        return len(cache), cache.partitions_cached

    def replication_byte_rates(self) -> tuple[float, float]:
        quotas, now_ms = self._broker.replicas.quotas, self.now_ms()
        return quotas.leader.rate.per_second(now_ms), quotas.follower.rate.per_second(now_ms)
