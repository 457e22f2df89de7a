"""Building a broker's registry from its configuration: the listener and how it is secured (TLS, HTTP Basic
authentication), the inter-broker connections its store reads `_schemas` over, and creating the topic on first
need (as the coordinators' internal topics are)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.config import BrokerConfig, ConfigError
from moldau.net.client import ConnectionPool
from moldau.registry.service import RegistryListener, RegistrySecurity, RegistryService, parse_registry_listener
from moldau.registry.store import SCHEMAS_REPLICATION_FACTOR, SCHEMAS_TOPIC, SCHEMAS_TOPIC_CONFIGS
from moldau.security.passwords import PasswordCheck
from moldau.security.sasl.mechanisms import PLAIN
from moldau.security.sasl.scram import image_lookup
from moldau.security.sasl.settings import SASL_PROTOCOLS, enabled_mechanisms, plain_users
from moldau.security.tls import TlsSettings, client_context, server_context

if TYPE_CHECKING:
    from moldau.server.broker import Broker

__all__ = ["registry_for"]

log = logging.getLogger(__name__)

# The name whose `listener.name.<name>.ssl.*` configs override the broker's `ssl.*` for an https registry.
TLS_CONFIG_NAME = "schema_registry"


def registry_for(broker: Broker) -> RegistryService:
    """The broker's registry, its HTTP socket bound. Raises ConfigError for a bad listener or a port in use."""
    raw = broker.config.schema_registry_listeners or ""
    try:
        listener = parse_registry_listener(raw)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    pool = ConnectionPool(f"moldau-schema-registry-{broker.node_id}", broker.inter_broker_security,
                          broker.inter_broker_authenticator(), broker.client_timeouts.setup)

    def request_topic() -> None:
        broker.internal_topics.request(SCHEMAS_TOPIC, 1, SCHEMAS_REPLICATION_FACTOR,
                                       lambda _: dict(SCHEMAS_TOPIC_CONFIGS))

    async def ensure_topic(timeout_s: float) -> None:
        await broker.internal_topics.ensure(SCHEMAS_TOPIC, request_topic, timeout_s)

    service = RegistryService(broker, broker.cluster_id, listener, pool, ensure_topic,
                              _security(broker, listener))
    try:
        service.bind()
    except OSError as exc:
        pool.close()
        raise ConfigError(f"schema.registry.listeners {raw}: cannot listen: {exc}") from exc
    return service


def _security(broker: Broker, listener: RegistryListener | None) -> RegistrySecurity:
    """Raises ConfigError for TLS settings that cannot work or an unknown authentication method."""
    config = broker.config
    server_tls = relay_tls = None
    if listener is not None and listener.tls:
        settings = TlsSettings.for_listener(config, TLS_CONFIG_NAME)
        server_tls = server_context(settings)
        relay_tls = client_context(settings)
    passwords = None
    if (config.schema_registry_authentication_method or "NONE").upper() == "BASIC":
        passwords = PasswordCheck(_plain_users(config), image_lookup(lambda: broker.image))
        if server_tls is None and listener is not None:
            log.warning("schema registry: HTTP Basic authentication over http:// sends passwords in the clear; "
                        "use an https:// listener")
    return RegistrySecurity(server_tls, relay_tls, passwords, config.schema_registry_authentication_realm or "")


def _plain_users(config: BrokerConfig) -> Mapping[str, str]:
    """The PLAIN users of every SASL listener that enables PLAIN (a user named twice keeps its first password)."""
    users: dict[str, str] = {}
    for kafka_listener in config.listeners:
        protocol = config.security_protocol(kafka_listener.name)
        if protocol in SASL_PROTOCOLS and PLAIN in enabled_mechanisms(config, kafka_listener.name):
            for user, password in plain_users(config, kafka_listener.name).items():
                users.setdefault(user, password)
    return users
