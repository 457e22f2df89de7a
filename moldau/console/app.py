"""The console's Starlette application: `/metrics` in Prometheus' text format (or OpenMetrics when asked)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

__all__ = ["build_app"]


def build_app(registry: CollectorRegistry) -> Starlette:
    async def metrics(request: Request) -> Response:
        # Collected in the broker's loop, between requests: the collectors read its state without locks.
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), media_type=content_type)

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])
