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
from moldau.console.listener import LazyPages, build_app
from moldau.metrics.collector import BrokerCollector
from moldau.metrics.leader_offsets import LeaderEndOffsets, refresh_before_scrape
from moldau.metrics.node import BrokerNode
from moldau.net.http_server import HttpLimits, HttpListener, parse_listener_url
from moldau.security.tls import TlsSettings, server_context
from moldau.telemetry.http import routes as telemetry_routes

if TYPE_CHECKING:
    from moldau.console.context import ConsoleContext
    from moldau.server.broker import Broker

__all__ = ["ConsoleService", "console_for"]

TLS_CONFIG_NAME = "console"


class ConsoleService:
    def __init__(self, http: HttpListener, registry: CollectorRegistry, routes: Sequence[BaseRoute] = (),
                 pages: LazyPages | None = None, leader_offsets: LeaderEndOffsets | None = None) -> None:
        self.http = http
        self.registry = registry
        self.routes = routes
        self.pages = pages  # None on controller-only nodes, which serve /metrics only
        self.leader_offsets = leader_offsets  # asked before each scrape, for consumer lag across brokers

    def start(self) -> None:
        app: ASGIApp = build_app(self.registry, self.routes, self.pages)
        if self.leader_offsets is not None:
            app = refresh_before_scrape(app, self.leader_offsets.refresh)
        self.http.start(app)

    async def stop(self) -> None:
        if self.pages is not None:
            await self.pages.stop()
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
    if not broker.is_broker:
        return ConsoleService(http, registry, leader_offsets=node.leader_offsets)
    config, counters = broker.config, broker.counters

    def make_context() -> ConsoleContext:
        # Imported by the pages' first request (moldau.console.listener), not when the broker starts.
        from moldau.console.clients import ClientFactory
        from moldau.console.context import ConsoleContext, make_templates

        return ConsoleContext(ClientFactory.for_broker(config), make_templates(), config.node_id,
                              registry_url=_local_registry_url(config.schema_registry_listeners or ""),
                              connect_urls=tuple(config.console_connect_urls), counters=counters)

    return ConsoleService(http, registry, telemetry_routes(broker.client_telemetry), LazyPages(make_context),
                          node.leader_offsets)


def _local_registry_url(listeners: str) -> str | None:
    """Where the console reaches this node's schema registry: its first listener, wildcard hosts as loopback."""
    first = listeners.split(",")[0].strip()
    if not first:
        return None
    scheme, _, rest = first.partition("://")
    host, _, port = rest.rstrip("/").rpartition(":")
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    return f"{scheme}://{host}:{port}"
