"""A read-only HTTP view of the client metrics pushed to this broker (KIP-714), as JSON.

    GET /v1/client-metrics               every client instance remembered, most recently heard from last
    GET /v1/client-metrics/{instance}    one instance with the data points of its latest push

Served on the broker's console listener (`console.listeners`, moldau.console) beside `/metrics`.
`moldau client-metrics clients|push-latest` read it.
Pushed metrics live in memory only (`moldau.telemetry.clients`), so each broker shows the clients that pushed
to it.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from moldau.telemetry.clients import ClientInstance, ClientTelemetry


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


def routes(telemetry: ClientTelemetry) -> list[Route]:
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

    return [Route("/v1/client-metrics", clients), Route("/v1/client-metrics/{instance}", one)]

