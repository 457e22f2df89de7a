"""A read-only HTTP view of the client metrics pushed to this broker (KIP-714), as JSON.

    GET /v1/client-metrics               every client instance remembered, most recently heard from last
    GET /v1/client-metrics/{instance}    one instance with the data points of its latest push

Served on `client.telemetry.http.listeners` (off when empty), in the broker's event loop, by uvicorn as the
schema registry is. `moldau client-metrics clients|push-latest` read it. Pushed metrics live in memory only
(`moldau.telemetry.clients`), so each broker shows the clients that pushed to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import uuid
from collections.abc import Generator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from moldau.registry.service import parse_registry_listener
from moldau.telemetry.clients import ClientInstance, ClientTelemetry

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 1


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


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the broker owns SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class TelemetryHttp:
    def __init__(self, telemetry: ClientTelemetry, listener: str) -> None:
        self._telemetry = telemetry
        self._listener = listener
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    def bind(self) -> None:
        """Bind the listener's socket. Raises ValueError for a bad listener, OSError when it cannot listen."""
        try:
            parsed = parse_registry_listener(self._listener)
        except ValueError:
            raise ValueError("client.telemetry.http.listeners must be http://host:port or empty, "
                             f"not {self._listener!r}") from None
        if parsed is None:
            return
        host, port = parsed
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
            sock.listen(64)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._socket = sock

    def start(self) -> None:
        if self._socket is None:
            return
        config = uvicorn.Config(build_app(self._telemetry), log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, server_header=False)
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self._socket]))
        log.info("client telemetry listening on http://%s:%d", *self._socket.getsockname()[:2])

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), SHUTDOWN_GRACE_S + 2)
            self._task.cancel()
        if self._socket is not None:
            self._socket.close()
