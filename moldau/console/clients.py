"""The console's Kafka clients: the console is a client of its own cluster, like any other.

Pages read and change the cluster through confluent-kafka (librdkafka) connected to one of the broker's own
listeners, so every request goes through the same authentication, ACLs and quotas as an application's, and a page
shows the cluster (all brokers), not just the node serving it. When the cluster is secured, each signed-in user
gets clients that authenticate as that user, so the console can do exactly what the user's ACLs allow. Besides
librdkafka's AdminClient, each user has one session of Moldau's own client (`native`, for the APIs librdkafka
lacks) whose connections every page reuses; they are closed when the user's clients are forgotten (sign-out) and
when the broker stops (`ClientFactory.close_all`).

librdkafka's admin calls return concurrent futures resolved by its own threads; `ConsoleClients.call` awaits them
without blocking the broker's event loop, which also serves the requests those calls send.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka.admin import AdminClient

from moldau.console.cluster_access import ListenerAccess
from moldau.console.session import ConsoleSession

if TYPE_CHECKING:
    from moldau.config.broker_config import BrokerConfig

__all__ = ["ClientFactory", "ConsoleClients", "Credentials"]

T = TypeVar("T")

# Pages answer within a browser's patience; a request the cluster cannot answer in time shows as an error.
REQUEST_TIMEOUT_MS = 10_000
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


@dataclass(frozen=True)
class Credentials:
    """A console user's SASL login."""

    mechanism: str  # PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    username: str
    password: str = field(repr=False)  # never in logs or tracebacks


class ConsoleClients:
    """Kafka clients acting for one console user (or for everyone, on an unsecured cluster)."""

    def __init__(self, base_config: dict[str, Any], credentials: Credentials | None,
                 access: ListenerAccess | None = None) -> None:
        self.credentials = credentials
        self.access = access
        self._base = dict(base_config)
        if credentials is not None:
            self._base.update({"sasl.mechanism": credentials.mechanism, "sasl.username": credentials.username,
                               "sasl.password": credentials.password})
        self._admin: AdminClient | None = None
        self._native: ConsoleSession | None = None

    def config(self, **extra: Any) -> dict[str, Any]:
        """librdkafka settings for a new consumer or producer acting for this user."""
        return {**self._base, **extra}

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config())
        return self._admin

    @property
    def native(self) -> ConsoleSession:
        """This user's session of Moldau's own client: one connection per broker, reused until `close`."""
        if self._native is None:
            # The listener's TLS settings when known: they can hold the CA inline, which librdkafka's props
            # carry as PEM text that the command line's TLS reader does not take.
            security = self.access.client_security() if self.access is not None else None
            self._native = ConsoleSession(self.config(), security)
        return self._native

    def close(self) -> None:
        """Close the native session's connections (a later request opens new ones)."""
        if self._native is not None:
            self._native.close()
            self._native = None

    @staticmethod
    async def call(future: Future[T]) -> T:
        """The result of one librdkafka request, awaited without blocking the event loop."""
        return await asyncio.wrap_future(future)

    async def metadata(self, topic: str | None = None) -> Any:
        """The cluster's metadata (brokers, controller, topics, partitions with leader, replicas and ISR)."""
        timeout = REQUEST_TIMEOUT_MS / 1000
        return await asyncio.to_thread(self.admin.list_topics, topic, timeout=timeout)


class ClientFactory:
    """Builds the console's clients from the broker's own configuration; one set per console user."""

    def __init__(self, base_config: dict[str, Any], secured: bool, access: ListenerAccess | None = None) -> None:
        self.base_config = base_config
        self.secured = secured  # True when the console's listener wants SASL: users must sign in
        self.access = access  # the listener for Moldau's own client (sign-in checks, APIs librdkafka lacks)
        self._clients: dict[Credentials | None, ConsoleClients] = {}

    @classmethod
    def for_broker(cls, config: BrokerConfig) -> ClientFactory:
        listener = _client_listener(config)
        host = "127.0.0.1" if listener.host in WILDCARD_HOSTS else listener.host
        protocol = config.security_protocol(listener.name)
        base = {
            "bootstrap.servers": f"{host}:{listener.port}",
            "security.protocol": protocol.lower(),
            "client.id": "moldau-console",
            "socket.timeout.ms": REQUEST_TIMEOUT_MS,
            "request.timeout.ms": REQUEST_TIMEOUT_MS,
            # Looking a topic up by name (a page's path) must not create it on a broker that auto-creates topics.
            "allow.auto.create.topics": False,
        }
        access = ListenerAccess.for_listener(config, listener.name, host, listener.port)
        base.update(access.librdkafka_tls())  # SSL and SASL_SSL: trust the broker's CA (cluster_access.py)
        return cls(base, secured=protocol.startswith("SASL"), access=access)

    def for_user(self, credentials: Credentials | None) -> ConsoleClients:
        clients = self._clients.get(credentials)
        if clients is None:
            clients = self._clients[credentials] = ConsoleClients(self.base_config, credentials, self.access)
        return clients

    def forget(self, credentials: Credentials) -> None:
        """Drop a user's clients and close their connections (at sign-out)."""
        clients = self._clients.pop(credentials, None)
        if clients is not None:
            clients.close()

    async def close_all(self) -> None:
        """Close every user's connections (the broker is stopping)."""
        for clients in self._clients.values():
            clients.close()
        self._clients.clear()


def _client_listener(config: BrokerConfig) -> Any:
    """The first advertised listener that serves clients (controller listeners do not)."""
    controllers = set(config.controller_listener_names)
    for listener in config.advertised_listeners:
        if listener.name.upper() not in controllers:
            return listener
    raise ValueError("the console needs a client listener in listeners/advertised.listeners")
