"""`/`: the cluster at a glance: its id, the active controller, the brokers, how many partitions are
under-replicated (ISR smaller than the replica set) or offline (no leader), and the KRaft metadata quorum (leader,
epoch, high watermark, each voter's and observer's lag), which refreshes live from `/overview/quorum`."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from moldau.console.cluster_view import active_controller, gather_quorum
from moldau.console.context import ConsoleContext

__all__ = ["ClusterSummary", "routes", "summarize"]


@dataclass(frozen=True)
class BrokerRow:
    node_id: int
    host: str
    port: int
    is_controller: bool


@dataclass(frozen=True)
class ClusterSummary:
    cluster_id: str
    controller_id: int
    brokers: list[BrokerRow]
    topics: int
    partitions: int
    under_replicated: int
    offline: int


def summarize(metadata: Any, controller_id: int | None = None) -> ClusterSummary:
    """The overview's figures from librdkafka's ClusterMetadata; `controller_id` is the active controller when
    known from the quorum (the metadata's controller id is a broker's where controllers run apart)."""
    if controller_id is None:
        controller_id = metadata.controller_id
    brokers = sorted((BrokerRow(b.id, b.host, b.port, b.id == controller_id)
                      for b in metadata.brokers.values()), key=lambda row: row.node_id)
    partitions = [p for t in metadata.topics.values() for p in t.partitions.values()]
    return ClusterSummary(
        cluster_id=metadata.cluster_id or "",
        controller_id=controller_id,
        brokers=brokers,
        topics=len(metadata.topics),
        partitions=len(partitions),
        under_replicated=sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
        offline=sum(1 for p in partitions if p.leader < 0),
    )


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def overview(request: Request) -> Response:
        clients = ctx.clients_for(request)
        metadata = await clients.metadata()
        quorum = await gather_quorum(clients, _now_ms())
        summary = summarize(metadata, active_controller(quorum, metadata.controller_id))
        return ctx.render(request, "overview/index.html", summary=summary, quorum=quorum)

    async def quorum_fragment(request: Request) -> Response:
        quorum = await gather_quorum(ctx.clients_for(request), _now_ms())
        return ctx.render(request, "overview/_quorum.html", quorum=quorum)

    return [Route("/", overview, methods=["GET"]), Route("/overview/quorum", quorum_fragment, methods=["GET"])]


def _now_ms() -> int:
    # DescribeQuorum's fetch times are wall-clock milliseconds; "how long ago" needs the same clock.
    return int(time.time() * 1000)
