"""What the overview and brokers pages show about the cluster's nodes: the metadata quorum (leader, epoch, high
watermark, each voter's and observer's lag) and every broker with its rack, log directories and the partitions
it leads and hosts. Gathering (`gather_*`, async, through the console's clients) is kept apart from shaping
(plain functions of what the cluster answered), so the figures are testable without a browser."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

from moldau.console.clients import ConsoleClients
from moldau.console.errors import ConsoleError
from moldau.console.native import LogDir, QuorumState, describe_log_dirs, describe_quorum

__all__ = ["BrokerDetail", "QuorumRow", "QuorumView", "active_controller", "broker_details", "gather_brokers",
           "gather_log_dirs", "gather_quorum", "quorum_view"]


@dataclass(frozen=True)
class QuorumRow:
    node_id: int
    role: str  # leader, voter or observer
    log_end_offset: int
    lag: int  # records behind the leader's log end
    last_fetch_ago_ms: int | None  # None: never fetched, or the leader itself
    last_caught_up_ago_ms: int | None


@dataclass(frozen=True)
class QuorumView:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    rows: list[QuorumRow]
    error: str | None = None  # why the quorum could not be described; the rest is then empty


@dataclass(frozen=True)
class BrokerDetail:
    node_id: int
    host: str
    port: int
    rack: str | None
    is_controller: bool
    leaders: int  # partitions it leads
    replicas: int  # partition replicas it hosts
    log_dirs: list[LogDir]
    log_dirs_error: str | None  # why DescribeLogDirs failed on this broker

    @property
    def size_bytes(self) -> int:
        return sum(d.size_bytes for d in self.log_dirs)


def quorum_view(state: QuorumState, now_ms: int) -> QuorumView:
    """Voters first (the leader at the top), then observers; lag against the leader's log end offset."""
    leader_end = next((r.log_end_offset for r in state.voters if r.node_id == state.leader_id),
                      state.high_watermark)

    def ago(timestamp_ms: int, node_id: int) -> int | None:
        if timestamp_ms < 0 or node_id == state.leader_id:
            return None
        return max(0, now_ms - timestamp_ms)

    def row(replica: Any, role: str) -> QuorumRow:
        if replica.node_id == state.leader_id:
            role = "leader"
        return QuorumRow(node_id=replica.node_id, role=role, log_end_offset=replica.log_end_offset,
                         lag=max(0, leader_end - replica.log_end_offset),
                         last_fetch_ago_ms=ago(replica.last_fetch_ms, replica.node_id),
                         last_caught_up_ago_ms=ago(replica.last_caught_up_ms, replica.node_id))

    voters = sorted((row(r, "voter") for r in state.voters), key=lambda r: (r.role != "leader", r.node_id))
    observers = sorted((row(r, "observer") for r in state.observers), key=lambda r: r.node_id)
    return QuorumView(state.leader_id, state.leader_epoch, state.high_watermark, voters + observers)


async def gather_quorum(clients: ConsoleClients, now_ms: int) -> QuorumView:
    """The quorum, or a view that says why it cannot be shown (the rest of the page still can)."""
    try:
        return quorum_view(await describe_quorum(clients), now_ms)
    except ConsoleError as exc:
        return QuorumView(-1, -1, -1, [], error=exc.message)


def active_controller(quorum: QuorumView, cluster_controller_id: int) -> int:
    """The active controller is the quorum's leader. The controller id of Metadata and DescribeCluster answers
    is only that where controllers also serve clients: with separate controller nodes, Kafka's brokers name a
    broker there, since clients cannot reach the controllers."""
    return quorum.leader_id if quorum.error is None and quorum.leader_id >= 0 else cluster_controller_id


def broker_details(cluster: Any, metadata: Any, log_dirs: dict[int, list[LogDir] | str],
                   controller_id: int | None = None) -> list[BrokerDetail]:
    """Each broker of DescribeCluster's answer, with its partition counts from the metadata and its log
    directories (or the error describing them) from DescribeLogDirs; `controller_id` is the active controller
    (by default the one DescribeCluster names)."""
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    for topic in metadata.topics.values():
        for partition in topic.partitions.values():
            leaders[partition.leader] += 1
            replicas.update(partition.replicas)
    if controller_id is None:
        controller_id = cluster.controller.id if cluster.controller is not None else -1
    details = []
    for node in sorted(cluster.nodes, key=lambda n: n.id):
        dirs = log_dirs.get(node.id, [])
        details.append(BrokerDetail(
            node_id=node.id, host=node.host, port=node.port, rack=node.rack or None,
            is_controller=node.id == controller_id, leaders=leaders[node.id], replicas=replicas[node.id],
            log_dirs=dirs if isinstance(dirs, list) else [], log_dirs_error=dirs if isinstance(dirs, str) else None))
    return details


async def gather_log_dirs(clients: ConsoleClients, brokers: list[tuple[int, str, int]]
                          ) -> dict[int, list[LogDir] | str]:
    """DescribeLogDirs of every (id, host, port) broker, asked at once; a broker that fails gets its error."""
    async def one(host: str, port: int) -> list[LogDir] | str:
        try:
            return await describe_log_dirs(clients, host, port)
        except ConsoleError as exc:
            return exc.message
    answers = await asyncio.gather(*(one(host, port) for _, host, port in brokers))
    return {node_id: answer for (node_id, _, _), answer in zip(brokers, answers, strict=True)}


async def gather_brokers(clients: ConsoleClients, now_ms: int) -> tuple[list[BrokerDetail], int]:
    """The brokers, and the active controller's node id (which may be a controller-only node)."""
    cluster = await clients.call(clients.admin.describe_cluster())
    metadata = await clients.metadata()
    log_dirs = await gather_log_dirs(clients, [(n.id, n.host, n.port) for n in cluster.nodes])
    quorum = await gather_quorum(clients, now_ms)
    controller_id = active_controller(quorum, cluster.controller.id if cluster.controller is not None else -1)
    return broker_details(cluster, metadata, log_dirs, controller_id), controller_id
