"""A read-only HTTP view of the client metrics pushed to this broker (KIP-714), as JSON.

    GET /v1/client-metrics               every client instance remembered, most recently heard from last
    GET /v1/client-metrics/{instance}    one instance with the data points of its latest push

Served on `client.telemetry.http.listeners` (off when empty; plain http) by the broker's HTTP listener module
(`moldau.net.http_server`), as the schema registry is. `moldau client-metrics clients|push-latest` read it.
Pushed metrics live in memory only (`moldau.telemetry.clients`), so each broker shows the clients that pushed
to it.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from moldau.net.http_server import HttpListener, parse_listener_url
from moldau.telemetry.clients import ClientInstance, ClientTelemetry

CONFIG = "client.telemetry.http.listeners"


def summary(instance: ClientInstance) -> dict[str, Any]:
    a = instance.attributes
    return {"client_instance_id": str(instance.instance_id), "client_id": a.client_id,
            "client_software_name": a.client_software_name, "client_software_version": a.client_software_version,
            "client_source_address": a.client_source_address, "client_source_port": a.client_source_port,
            "subscription_id": instance.subscription.subscription_id,
            "requested_metrics": list(instance.subscription.metrics),
            "push_interval_ms": instance.subscription.interval_ms, "pushes": instance.pushes,
            "last_push_ms": instance.last_push_ms, "last_push_bytes": instance.last_push_bytes,
            "compression_type": instance.compression_type, "terminated": instance.terminated,
            "points": len(instance.points), "points_dropped": instance.points_dropped}


def detail(instance: ClientInstance) -> dict[str, Any]:
    return {**summary(instance), "metrics": [
        {"name": p.name, "kind": p.kind, "value": p.value, "count": p.count, "attributes": dict(p.attributes),
         "time_unix_nano": p.time_unix_nano} for p in instance.points]}


def build_app(telemetry: ClientTelemetry) -> Starlette:
    async def clients(_: Request) -> JSONResponse:
        return JSONResponse([summary(c) for c in telemetry.clients()])

    async def one(request: Request) -> JSONResponse:
        try:
            instance = telemetry.latest(uuid.UUID(request.path_params["instance"]))
        except ValueError:
            instance = None
        if instance is None:
            return JSONResponse({"error": "unknown client instance"}, status_code=404)
        return JSONResponse(detail(instance))

    return Starlette(routes=[Route("/v1/client-metrics", clients), Route("/v1/client-metrics/{instance}", one)])


class TelemetryHttp:
    """The view on `client.telemetry.http.listeners`, on the broker's shared HTTP listener module."""

    def __init__(self, telemetry: ClientTelemetry, listener: str) -> None:
        self._telemetry = telemetry
        url = parse_listener_url(CONFIG, listener)  # raises ValueError naming the config
        if url is not None and url.tls:
            raise ValueError(f"{CONFIG} serves plain http only, not {listener!r}")
        self._listener = HttpListener("client telemetry", url) if url else None

    def bind(self) -> None:
        """Bind the listener's socket. Raises OSError when it cannot listen."""
        if self._listener is not None:
            self._listener.bind()

    def start(self) -> None:
        if self._listener is not None:
            self._listener.start(build_app(self._telemetry))

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
