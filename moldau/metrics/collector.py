"""The metric families `/metrics` answers, built at scrape time (prometheus-client's custom collector API).

Names follow the Prometheus JMX exporter's rendering of Kafka's MBeans (`kafka.server:type=BrokerTopicMetrics,
name=MessagesInPerSec,topic=t` -> `kafka_server_brokertopicmetrics_messagesin_total{topic="t"}`), so dashboards
made for Kafka work; consumer lag uses kafka_exporter's names (`kafka_consumergroup_lag`). Like Kafka's own, a
node reports what it hosts: partitions it leads, logs it holds, groups it coordinates. Summing over the
cluster's nodes gives cluster totals; a group's consumer lag is reported by its coordinator, for every partition
it committed offsets for (asking the leaders of those led elsewhere, moldau.metrics.leader_offsets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from moldau.metadata.image import MetadataImage
from moldau.metrics.counters import LATENCY_BUCKETS_MS, BrokerCounters

__all__ = ["BrokerCollector", "CommittedOffsets", "NodeView", "PartitionView"]


class PartitionView(Protocol):
    """What the collector reads of a partition this node hosts."""

    topic: str
    partition: int
    leader: int

    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def segment_count(self) -> int: ...


CommittedOffsets = Mapping[str, Mapping[tuple[str, int], int]]  # group -> (topic, partition) -> committed offset


class NodeView(Protocol):
    """What the collector reads of the node (moldau.metrics.node adapts the broker)."""

    node_id: int
    counters: BrokerCounters

    @property
    def is_broker(self) -> bool: ...
    @property
    def image(self) -> MetadataImage: ...
    def partitions(self) -> Iterable[PartitionView]: ...
    def isr_changes(self) -> tuple[int, int]: ...  # (shrinks, expands) since start
    def connections(self) -> Mapping[str, int]: ...  # listener -> open connections
    def idle_poll_seconds(self) -> float | None: ...  # None when network.idle.poll.us is 0
    def raft(self) -> tuple[int, int, int, int]: ...  # (epoch, leader id or -1, high watermark, log end offset)
    def is_active_controller(self) -> bool: ...
    def committed_offsets(self) -> CommittedOffsets: ...
    def remote_end_offsets(self) -> Mapping[tuple[str, int], int]: ...  # high watermarks of partitions led elsewhere
    def raft_commit_latency(self) -> tuple[float, float]: ...  # (avg, max) ms over the recent windows
    def now_ms(self) -> float: ...  # the node's monotonic clock
    def fetch_sessions(self) -> tuple[int, int]: ...  # (incremental fetch sessions, partitions they hold)
    def replication_byte_rates(self) -> tuple[float, float]: ...  # throttled bytes/s (as leader, as follower)


class BrokerCollector(Collector):
    def __init__(self, node: NodeView) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        node = self.node
        yield from _controller(node)
        yield from _raft(node)
        yield from _connections(node)
        if not node.is_broker:
            return
        node.counters.forget_topics(set(node.image.topics_by_name))
        yield from _topic_counters(node.counters)
        yield from _requests(node.counters, node.now_ms())
        yield from _quotas(node.counters, node.now_ms())
        partitions = list(node.partitions())
        yield from _replica_manager(node, partitions)
        yield from _fetch_sessions(node)
        yield from _replication_quotas(node)
        yield from _logs(partitions)
        yield from _consumer_lag(node, partitions)


def _with_total(family: Metric, total: float) -> Metric:
    """Add the unlabelled all-topics sample, as Kafka's BrokerTopicMetrics has it beside the per-topic ones."""
    suffix = "_total" if family.type == "counter" else ""
    family.samples.append(Sample(family.name + suffix, {}, total))
    return family


def _topic_counters(counters: BrokerCounters) -> Iterator[Metric]:
    fields = (("messagesin", "messages_in", "Records appended to the topic's partitions led here."),
              ("bytesin", "bytes_in", "Bytes of record batches produced to the topic (as sent)."),
              ("bytesout", "bytes_out", "Bytes of record batches fetched by consumers."),
              ("replicationbytesout", "replication_bytes_out", "Bytes of record batches fetched by followers."))
    for metric, attribute, text in fields:
        family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{metric}", text, labels=["topic"])
        total = 0
        for topic, values in sorted(counters.topics.items()):
            value = getattr(values, attribute)
            family.add_metric([topic], value)
            total += value
        yield _with_total(family, total)


# Kafka's histogram MBeans' percentiles, labelled as the JMX exporter's usual rules label them.
QUANTILES = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)
QUANTILE_LABELS = ("0.50", "0.75", "0.95", "0.98", "0.99", "0.999")


def _requests(counters: BrokerCounters, now_ms: float) -> Iterator[Metric]:
    requests = CounterMetricFamily("kafka_network_requestmetrics_requests", "Requests served, by API and version.",
                                   labels=["request", "version"])
    for (api, version), count in sorted(counters.requests.items()):
        requests.add_metric([api, str(version)], count)
    yield requests
    # As the JMX exporter renders Kafka's TotalTimeMs histogram MBean: percentiles as `quantile` labels, its count
    # (and here its sum) beside them; and the same times as a Prometheus histogram, which aggregates across nodes.
    summary = Metric("kafka_network_requestmetrics_totaltimems",
                     "Time (ms) from a request decoded to its response ready; quantiles of the last 30 to 60 s, "
                     "estimated from the histogram's buckets.", "summary")
    histogram = HistogramMetricFamily("kafka_network_requestmetrics_totaltime_seconds",
                                      "Time from a request decoded to its response ready.", labels=["request"])
    for api, times in sorted(counters.latency.items()):
        for label, value in zip(QUANTILE_LABELS, times.recent_quantiles(QUANTILES, now_ms), strict=True):
            summary.add_sample(summary.name, {"request": api, "quantile": label}, value)
        summary.add_sample(summary.name + "_count", {"request": api}, times.count)
        summary.add_sample(summary.name + "_sum", {"request": api}, times.sum_ms)
        cumulative, buckets = 0, []
        for bound, count in zip((*LATENCY_BUCKETS_MS, float("inf")), times.counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else _bound(bound / 1000), cumulative))
        histogram.add_metric([api], buckets, times.sum_ms / 1000)
    yield summary
    yield histogram
    yield _gauge("kafka_network_requestchannel_requestqueuesize",
                 "Requests decoded and not answered yet (waiting for their handler, the log, replicas or a timeout).",
                 counters.in_flight)


def _quotas(counters: BrokerCounters, now_ms: float) -> Iterator[Metric]:
    counters.forget_idle_clients(now_ms)
    family = GaugeMetricFamily("kafka_server_quota_throttle_time",
                               "Average throttle time (ms) of the client's requests over the last 30 to 60 s, "
                               "for clients a quota applies to.", labels=["resource", "user", "clientId"])
    for (resource, user, client_id), stat in sorted(counters.throttle.items()):
        family.add_metric([resource, user, client_id], stat.avg(now_ms))
    yield family


def _bound(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _replica_manager(node: NodeView, partitions: list[PartitionView]) -> Iterator[Metric]:
    image = node.image
    led = [p for p in partitions if p.leader == node.node_id]

    def replicas(p: PartitionView) -> int:
        topic = image.topics_by_name.get(p.topic)
        part = topic.partitions.get(p.partition) if topic is not None else None
        return len(part.replicas) if part is not None else len(p.isr)

    under = sum(1 for p in led if len(p.isr) < replicas(p))
    yield _gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted here.", len(partitions))
    yield _gauge("kafka_server_replicamanager_leadercount", "Partitions led here.", len(led))
    yield _gauge("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here whose ISR is smaller than their replica set.", under)
    shrinks, expands = node.isr_changes()
    yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here.",
                              value=shrinks)
    yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expands of partitions led here.",
                              value=expands)


def _fetch_sessions(node: NodeView) -> Iterator[Metric]:
    sessions, partitions = node.fetch_sessions()
    yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                 "Incremental fetch sessions (KIP-227) kept here, followers' and consumers'.", sessions)
    yield _gauge("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                 "Partitions held by the incremental fetch sessions kept here.", partitions)


def _replication_quotas(node: NodeView) -> Iterator[Metric]:
    leader, follower = node.replication_byte_rates()
    yield _gauge("kafka_server_leaderreplication_byte_rate",
                 "Bytes per second this broker sent, as leader, to throttled replicas (replication quotas, KIP-73), "
                 "over the quota's windows; 0 without a leader.replication.throttled.rate.", leader)
    yield _gauge("kafka_server_followerreplication_byte_rate",
                 "Bytes per second this broker fetched, as follower, for throttled replicas, over the quota's "
                 "windows; 0 without a follower.replication.throttled.rate.", follower)


def _logs(partitions: list[PartitionView]) -> Iterator[Metric]:
    families: tuple[tuple[str, str, Callable[[PartitionView], int]], ...] = (
        ("kafka_log_log_size", "Bytes of the partition's log on disk.", lambda p: p.size_bytes),
        ("kafka_log_log_logstartoffset", "The log's first offset.", lambda p: p.log_start_offset),
        ("kafka_log_log_logendoffset", "The offset after the log's last record.", lambda p: p.log_end_offset),
        ("kafka_log_log_numlogsegments", "Segments of the partition's log.", lambda p: p.segment_count))
    ordered = sorted(partitions, key=lambda p: (p.topic, p.partition))
    for name, text, read in families:
        family = GaugeMetricFamily(name, text, labels=["topic", "partition"])
        for p in ordered:
            family.add_metric([p.topic, str(p.partition)], read(p))
        yield family


def _controller(node: NodeView) -> Iterator[Metric]:
    active = node.is_active_controller()
    image = node.image
    # Kafka reports the cluster-wide partition gauges on the active controller only (0 elsewhere).
    parts = [p for t in image.topics_by_name.values() for p in t.partitions.values()] if active else []
    yield _gauge("kafka_controller_kafkacontroller_activecontrollercount",
                 "1 on the active controller, else 0.", 1 if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
                 "Partitions without a live leader (on the active controller).",
                 sum(1 for p in parts if p.leader < 0 or not image.is_live(p.leader)))
    yield _gauge("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions in the cluster.", len(parts))
    yield _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster.",
                 len(image.topics_by_name) if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_fencedbrokercount", "Registered brokers that are fenced.",
                 sum(1 for b in image.brokers.values() if b.fenced) if active else 0)
    yield _gauge("kafka_controller_kafkacontroller_activebrokercount", "Registered brokers that are not fenced.",
                 sum(1 for b in image.brokers.values() if not b.fenced) if active else 0)


def _raft(node: NodeView) -> Iterator[Metric]:
    epoch, leader, high_watermark, log_end = node.raft()
    yield _gauge("kafka_server_raft_metrics_current_epoch", "The metadata quorum's epoch.", epoch)
    yield _gauge("kafka_server_raft_metrics_current_leader", "The quorum leader's id (-1: none known).", leader)
    yield _gauge("kafka_server_raft_metrics_high_watermark", "The metadata log's high watermark.", high_watermark)
    yield _gauge("kafka_server_raft_metrics_log_end_offset", "The metadata log's end offset here.", log_end)
    average, peak = node.raft_commit_latency()
    yield _gauge("kafka_server_raft_metrics_commit_latency_avg",
                 "Average ms from a metadata record appended on the leader to it committed (last 30 to 60 s).",
                 average)
    yield _gauge("kafka_server_raft_metrics_commit_latency_max",
                 "Longest ms from a metadata record appended on the leader to it committed (last 30 to 60 s).", peak)


def _connections(node: NodeView) -> Iterator[Metric]:
    family = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count", "Open connections.",
                               labels=["listener"])
    for listener, count in sorted(node.connections().items()):
        family.add_metric([listener], count)
    yield family
    polled = node.idle_poll_seconds()
    if polled is not None:
        yield CounterMetricFamily("moldau_network_idle_poll_seconds",
                                  "Seconds the event loop polled its sockets instead of sleeping between requests "
                                  "that came closer than network.idle.poll.us, the requests served meanwhile "
                                  "included.", value=polled)


def _consumer_lag(node: NodeView, partitions: list[PartitionView]) -> Iterator[Metric]:
    """kafka_exporter's families: offsets of the partitions led here; lag of the groups coordinated here, against
    the high watermark of the partitions led here or, for the others, the one their leader answered."""
    led = {(p.topic, p.partition): p for p in partitions if p.leader == node.node_id}
    current = GaugeMetricFamily("kafka_topic_partition_current_offset", "The partition's high watermark.",
                                labels=["topic", "partition"])
    oldest = GaugeMetricFamily("kafka_topic_partition_oldest_offset", "The partition's log start offset.",
                               labels=["topic", "partition"])
    for (topic, partition), p in sorted(led.items()):
        current.add_metric([topic, str(partition)], p.high_watermark)
        oldest.add_metric([topic, str(partition)], p.log_start_offset)
    yield current
    yield oldest
    labels = ["consumergroup", "topic", "partition"]
    offset = GaugeMetricFamily("kafka_consumergroup_current_offset", "The group's committed offset.", labels=labels)
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus the group's committed offset.",
                            labels=labels)
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "The group's lag summed over the topic's partitions.",
                                labels=["consumergroup", "topic"])
    ends = {**node.remote_end_offsets(), **{tp: p.high_watermark for tp, p in led.items()}}
    for group, committed in sorted(node.committed_offsets().items()):
        sums: dict[str, int] = {}
        for (topic, partition), position in sorted(committed.items()):
            end = ends.get((topic, partition))
            if end is None:
                continue  # neither led here nor answered by its leader (moldau.metrics.leader_offsets)
            behind = max(0, end - position)
            offset.add_metric([group, topic, str(partition)], position)
            lag.add_metric([group, topic, str(partition)], behind)
            sums[topic] = sums.get(topic, 0) + behind
        for topic, total in sorted(sums.items()):
            lag_sum.add_metric([group, topic], total)
    yield offset
    yield lag
    yield lag_sum


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)
