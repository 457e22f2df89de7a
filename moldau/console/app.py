"""The console's Starlette application: `/metrics` in Prometheus' text format (or OpenMetrics when asked), and
the routes other subsystems add (the client metrics pushed to a broker, moldau.telemetry.http)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

__all__ = ["build_app"]


def build_app(registry: CollectorRegistry, routes: Sequence[BaseRoute] = ()) -> Starlette:
    async def metrics(request: Request) -> Response:
        # Collected in the broker's loop, between requests: the collectors read its state without locks.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"]), *routes])
