"""The registry in a broker: its state and store, and its HTTP listener served by uvicorn in the broker's loop.

`schema.registry.listeners` is one `http://host:port` or `https://host:port` URL (empty: no HTTP listener). The
socket is bound before the broker registers, and the broker advertises the URL as one more endpoint of its
registration, under the reserved listener name `REGISTRY_LISTENER` (security protocol SSL for https), which no
Kafka listener can take and Metadata never returns (clients get the endpoint of the listener they connected to).
That is how every broker finds the writer's registry to relay writes to: the registration of the leader of
`_schemas`-0, already in the metadata image.

The state is replayed on every broker, listener or not, so `lookup` (a `SchemaLookup`: schema_by_id,
subject_has_id) serves the broker's own checks of produced records.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from moldau.metadata.records import Endpoint
from moldau.net.client import ConnectionPool
from moldau.net.http_server import HttpListener, ListenerUrl, parse_listener_url
from moldau.registry.core import RegistryCore
from moldau.registry.http.app import build_app
from moldau.registry.lookup import SchemaLookup
from moldau.registry.store import BrokerView, TopicStore
from moldau.security.passwords import PasswordCheck

__all__ = ["REGISTRY_LISTENER", "RegistryListener", "RegistrySecurity", "RegistryService", "parse_registry_listener"]

# Kafka listener names are letters, digits, '_', '.', '-' with no leading '#': this one can never be configured.
REGISTRY_LISTENER = "#SCHEMA_REGISTRY"

RegistryListener = ListenerUrl


@dataclass(frozen=True, slots=True)
class RegistrySecurity:
    """How the listener is secured: TLS contexts (serving, and relaying writes to another broker's https
    registry) and the password check of HTTP Basic authentication (None: no authentication)."""

    server_tls: ssl.SSLContext | None = None
    relay_tls: ssl.SSLContext | None = None
    passwords: PasswordCheck | None = None
    realm: str = "SchemaRegistry"


def parse_registry_listener(url: str) -> RegistryListener | None:
    """The listener `http://host:port` or `https://host:port` names; None for an empty string. Raises ValueError."""
    return parse_listener_url("schema.registry.listeners", url)


def registry_url(endpoint: Endpoint) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    scheme = "https" if endpoint.security_protocol == "SSL" else "http"
    return f"{scheme}://{host}:{endpoint.port}"


class RegistryService:
    def __init__(self, broker: BrokerView, cluster_id: str, listener: RegistryListener | None, pool: ConnectionPool,
                 ensure_topic: Callable[[float], Awaitable[None]],
                 security: RegistrySecurity = RegistrySecurity()) -> None:
        self._broker = broker
        self.core = RegistryCore(cluster_id=cluster_id)
        self.store = TopicStore(self.core, broker, pool, self.url_of, ensure_topic)
        self._lookup = SchemaLookup(self.core.parsed, self.store)
        self._pool = pool
        self._security = security
        self._http = None if listener is None else HttpListener("schema registry", listener, security.server_tls)

    @property
    def lookup(self) -> SchemaLookup:
        """Parsed schemas by id, for checking produced records: `schema_by_id`, `subject_has_id`."""
        return self._lookup

    def bind(self) -> None:
        """Bind the HTTP listener's socket (before registration, so the port is known). Raises OSError."""
        if self._http is not None:
            self._http.bind()

    def endpoint(self, fallback_host: str) -> Endpoint | None:
        """The registry's endpoint to advertise: its bound port, and `fallback_host` (the broker's advertised
        host) when it listens on every interface."""
        if self._http is None or self._http.socket is None:
            return None
        host = self._http.url.host
        if host in ("", "0.0.0.0", "::"):
            host = fallback_host
        return Endpoint(REGISTRY_LISTENER, host, self._http.port, "SSL" if self._http.url.tls else "PLAINTEXT")

    def url_of(self, broker_id: int) -> str | None:
        registration = self._broker.image.brokers.get(broker_id)
        if registration is None:
            return None
        found = next((e for e in registration.endpoints if e.listener == REGISTRY_LISTENER), None)
        return registry_url(found) if found is not None else None

    def start(self) -> None:
        self.store.start()
        if self._http is not None and self._http.socket is not None:
            security = self._security
            self._http.start(build_app(self.core, self.store, security.passwords, security.realm, security.relay_tls))

    async def stop(self) -> None:
        self.store.close()
        if self._http is not None:
            await self._http.stop()
        self._pool.close()
