"""The console's listener in a broker: `console.listeners` parsed, bound up front (a port in use stops the
broker at startup, naming the config), TLS from the broker's `ssl.*` configs for https
(`listener.name.console.ssl.*` overrides them), `/metrics` from the node's collector, and on brokers the client
metrics pushed to them (`/v1/client-metrics`, moldau.telemetry.http)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from moldau.config import ConfigError
from moldau.console.app import build_app
from moldau.metrics.collector import BrokerCollector
from moldau.metrics.leader_offsets import LeaderEndOffsets, refresh_before_scrape
from moldau.metrics.node import BrokerNode
from moldau.net.http_server import HttpLimits, HttpListener, parse_listener_url
from moldau.security.tls import TlsSettings, server_context
from moldau.telemetry.http import routes as telemetry_routes

if TYPE_CHECKING:
    from moldau.server.broker import Broker

__all__ = ["ConsoleService", "console_for"]

TLS_CONFIG_NAME = "console"


class ConsoleService:
    def __init__(self, http: HttpListener, registry: CollectorRegistry, routes: Sequence[BaseRoute] = (),
                 leader_offsets: LeaderEndOffsets | None = None) -> None:
        self.http = http
        self.registry = registry
        self.routes = routes
        self.leader_offsets = leader_offsets  # asked before each scrape, for consumer lag across brokers

    def start(self) -> None:
        app: ASGIApp = build_app(self.registry, self.routes)
        if self.leader_offsets is not None:
            app = refresh_before_scrape(app, self.leader_offsets.refresh)
        self.http.start(app)

    async def stop(self) -> None:
        await self.http.stop()
        if self.leader_offsets is not None:
            self.leader_offsets.close()


def console_for(broker: Broker) -> ConsoleService | None:
    """The node's console listener, bound; None when `console.listeners` is empty. Raises ConfigError."""
    raw = broker.config.console_listeners or ""
    try:
        url = parse_listener_url("console.listeners", raw)
    except ValueError as exc:
        raise ConfigError(str(exc), "console.listeners") from exc
    if url is None:
        return None
    tls = server_context(TlsSettings.for_listener(broker.config, TLS_CONFIG_NAME)) if url.tls else None
    config = broker.config
    http = HttpListener("console", url, tls, HttpLimits(config.console_max_connections,
                                                        config.console_request_header_timeout_ms / 1000,
                                                        config.console_max_request_bytes))
    try:
        http.bind()
    except OSError as exc:
        raise ConfigError(f"console.listeners {raw}: cannot listen: {exc}", "console.listeners") from exc
    registry = CollectorRegistry(auto_describe=False)
    node = BrokerNode(broker, broker.counters)
    registry.register(BrokerCollector(node))
    for standard in (ProcessCollector, PlatformCollector, GCCollector):
        standard(registry=registry)
    routes = telemetry_routes(broker.client_telemetry) if broker.is_broker else []
    return ConsoleService(http, registry, routes, node.leader_offsets)
