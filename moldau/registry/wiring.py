"""Building a broker's registry from its configuration: the listener, the inter-broker connections its store
reads `_schemas` over, and creating the topic on first need (as the coordinators' internal topics are)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.config import ConfigError
from moldau.net.client import ConnectionPool
from moldau.registry.service import RegistryService, parse_registry_listener
from moldau.registry.store import SCHEMAS_REPLICATION_FACTOR, SCHEMAS_TOPIC, SCHEMAS_TOPIC_CONFIGS

if TYPE_CHECKING:
    from moldau.server.broker import Broker

__all__ = ["registry_for"]


def registry_for(broker: Broker) -> RegistryService:
    """The broker's registry, its HTTP socket bound. Raises ConfigError for a bad listener or a port in use."""
    raw = broker.config.schema_registry_listeners or ""
    try:
        listener = parse_registry_listener(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    pool = ConnectionPool(f"moldau-schema-registry-{broker.node_id}", broker.inter_broker_security,
                          broker.inter_broker_authenticator())

    def request_topic() -> None:
        broker.internal_topics.request(SCHEMAS_TOPIC, 1, SCHEMAS_REPLICATION_FACTOR,
                                       lambda _: dict(SCHEMAS_TOPIC_CONFIGS))

    async def ensure_topic(timeout_s: float) -> None:
        await broker.internal_topics.ensure(SCHEMAS_TOPIC, request_topic, timeout_s)

    service = RegistryService(broker, broker.cluster_id, listener, pool, ensure_topic)
    try:
        service.bind()
    except OSError as exc:
        pool.close()
        raise ConfigError(f"schema.registry.listeners {raw}: cannot listen: {exc}") from exc
    return service
