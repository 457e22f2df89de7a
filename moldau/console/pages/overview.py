"""`/`: the cluster at a glance: its id, the active controller, the brokers, and how many partitions are
under-replicated (ISR smaller than the replica set) or offline (no leader)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

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


def summarize(metadata: Any) -> ClusterSummary:
    """The overview's figures from librdkafka's ClusterMetadata."""
    brokers = sorted((BrokerRow(b.id, b.host, b.port, b.id == metadata.controller_id)
                      for b in metadata.brokers.values()), key=lambda row: row.node_id)
    partitions = [p for t in metadata.topics.values() for p in t.partitions.values()]
    return ClusterSummary(
        cluster_id=metadata.cluster_id or "",
        controller_id=metadata.controller_id,
        brokers=brokers,
        topics=len(metadata.topics),
        partitions=len(partitions),
        under_replicated=sum(1 for p in partitions if len(p.isrs) < len(p.replicas)),
        offline=sum(1 for p in partitions if p.leader < 0),
    )


def routes(ctx: ConsoleContext) -> list[BaseRoute]:
    async def overview(request: Request) -> Response:
        metadata = await ctx.clients_for(request).metadata()
        return ctx.render(request, "overview/index.html", summary=summarize(metadata))

    return [Route("/", overview, methods=["GET"])]
