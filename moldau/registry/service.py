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

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from urllib.parse import urlsplit

import uvicorn

from moldau.metadata.records import Endpoint
from moldau.net.client import ConnectionPool
from moldau.registry.core import RegistryCore
from moldau.registry.http.app import build_app
from moldau.registry.lookup import SchemaLookup
from moldau.registry.store import BrokerView, TopicStore
from moldau.security.passwords import PasswordCheck

__all__ = ["REGISTRY_LISTENER", "RegistryListener", "RegistrySecurity", "RegistryService", "parse_registry_listener"]

log = logging.getLogger(__name__)

# Kafka listener names are letters, digits, '_', '.', '-' with no leading '#': this one can never be configured.
REGISTRY_LISTENER = "#SCHEMA_REGISTRY"
SHUTDOWN_GRACE_S = 1


@dataclass(frozen=True, slots=True)
class RegistryListener:
    host: str
    port: int
    tls: bool = False


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
    if not url.strip():
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or parts.port is None or parts.path not in ("", "/"):
        raise ValueError(f"schema.registry.listeners must be http://host:port, https://host:port or empty, "
                         f"not {url!r}")
    return RegistryListener(parts.hostname or "", parts.port, parts.scheme == "https")


def registry_url(endpoint: Endpoint) -> str:
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    scheme = "https" if endpoint.security_protocol == "SSL" else "http"
    return f"{scheme}://{host}:{endpoint.port}"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the broker owns SIGTERM and SIGINT and stops the server itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class RegistryService:
    def __init__(self, broker: BrokerView, cluster_id: str, listener: RegistryListener | None, pool: ConnectionPool,
                 ensure_topic: Callable[[float], Awaitable[None]],
                 security: RegistrySecurity = RegistrySecurity()) -> None:
        self._broker = broker
        self.core = RegistryCore(cluster_id=cluster_id)
        self.store = TopicStore(self.core, broker, pool, self.url_of, ensure_topic)
        self._lookup = SchemaLookup(self.core.parsed, self.store)
        self._pool = pool
        self._listener = listener
        self._security = security
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def lookup(self) -> SchemaLookup:
        """Parsed schemas by id, for checking produced records: `schema_by_id`, `subject_has_id`."""
        return self._lookup

    def bind(self) -> None:
        """Bind the HTTP listener's socket (before registration, so the port is known). Raises OSError."""
        if self._listener is None:
            return
        host, port = self._listener.host, self._listener.port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host or ("::" if family == socket.AF_INET6 else "0.0.0.0"), port))
            sock.listen(256)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._socket = sock

    def endpoint(self, fallback_host: str) -> Endpoint | None:
        """The registry's endpoint to advertise: its bound port, and `fallback_host` (the broker's advertised
        host) when it listens on every interface."""
        if self._socket is None or self._listener is None:
            return None
        host = self._listener.host
        if host in ("", "0.0.0.0", "::"):
            host = fallback_host
        return Endpoint(REGISTRY_LISTENER, host, self._socket.getsockname()[1],
                        "SSL" if self._listener.tls else "PLAINTEXT")

    def url_of(self, broker_id: int) -> str | None:
        registration = self._broker.image.brokers.get(broker_id)
        if registration is None:
            return None
        found = next((e for e in registration.endpoints if e.listener == REGISTRY_LISTENER), None)
        return registry_url(found) if found is not None else None

    def start(self) -> None:
        self.store.start()
        if self._socket is None:
            return
        security = self._security
        app = build_app(self.core, self.store, security.passwords, security.realm, security.relay_tls)
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off",
                                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, server_header=False)
        # uvicorn builds its own TLS context from file names; the broker's (PEM stores, inline certificates,
        # cipher and protocol settings) is set once the config is loaded, which serve() then uses as it is.
        config.load()
        config.ssl = security.server_tls
        logging.getLogger("uvicorn.error").setLevel(logging.WARNING)  # its start/stop lines repeat ours
        self._server = _Server(config)
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self._socket]))
        scheme = "https" if security.server_tls is not None else "http"
        log.info("schema registry listening on %s://%s:%d", scheme, *self._socket.getsockname()[:2])

    async def stop(self) -> None:
        self.store.close()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._task), SHUTDOWN_GRACE_S + 2)
            self._task.cancel()
        if self._socket is not None:
            self._socket.close()
        self._pool.close()
