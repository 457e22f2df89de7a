"""Reloading the key and trust stores of SSL and SASL_SSL listeners while the node runs, as Kafka does when they
are altered dynamically (`kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
listener.name.external.ssl.keystore.location=...`).

A change is checked by the broker it is sent to, before it is written: the stores it names are loaded with the
settings the listener would have, and a store that cannot be used refuses the change with INVALID_CONFIG, naming
the config, so a typo cannot leave a listener unable to serve; so does a certificate that names another subject or
drops alternative names, and on the inter-broker listener stores that cannot complete a handshake with the current
ones (`moldau.security.keystore_compat`, as Kafka checks them). Once written, every broker follows it through its
metadata image (`follow`); a change that names the same files again reloads them if they changed on disk, as
Kafka reloads a key store whose file was replaced (`after_alter`). New connections get the new stores; open ones
keep theirs (`moldau.security.tls.ListenerTls`). The node's own connections to other nodes' listeners (replica
fetchers on the inter-broker listener, the quorum and controller channel on the controller listener) follow the
same stores: connections it opens after the change present the new certificate and trust the new trust store
(`moldau.security.client_security.ClientSecurity.reload`), as Kafka reconfigures a listener's client side with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from moldau.config import BrokerConfig
from moldau.config.broker_config import RELOADABLE_TLS_CONFIGS
from moldau.config.schema import ConfigError
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.client_security import ClientSecurity
from moldau.security.tls import ListenerTls, TlsSettings

log = logging.getLogger(__name__)

CLUSTER_DEFAULT = ""  # the BROKER resource name of cluster-wide dynamic configs
OP_SET, OP_DELETE = 0, 1
_LISTENER_PREFIX = "listener.name."


def touches_tls(names: Iterable[str]) -> bool:
    """Whether any of these configs is a listener's key or trust store (plain or `listener.name.`-prefixed)."""
    for name in names:
        if name.startswith(_LISTENER_PREFIX):
            name = name[len(_LISTENER_PREFIX):].partition(".")[2]
        if name in RELOADABLE_TLS_CONFIGS:
            return True
    return False


class ListenerTlsReloader:
    def __init__(self, node_id: int, static: BrokerConfig, listeners: Mapping[str, ListenerTls],
                 image: Callable[[], MetadataImage], inter_broker_listener: str = "") -> None:
        self._node_id = node_id
        # Its new stores must also complete a handshake with the current ones (moldau.security.keystore_compat).
        self._inter_broker = inter_broker_listener
        self._static = static
        self._listeners = listeners
        self._image = image
        self._seen: tuple[object, object] | None = None
        self._clients: list[tuple[str, ClientSecurity]] = []  # this node's outgoing connections, per listener

    def add_client(self, listener: str, security: ClientSecurity) -> None:
        """Reload `security` with `listener`'s stores whenever they change (the node's connections to it)."""
        self._clients.append((listener, security))

    def check(self, resource_name: str, changes: Iterable[tuple[str, int, str | None]], replace_all: bool) -> None:
        """Refuse (KafkaError INVALID_CONFIG) a change of this broker's, or the cluster's, dynamic configs that
        would leave one of its TLS listeners with stores it cannot load. A change for another broker is left to
        that broker's own check: only it can read its files."""
        if resource_name not in (CLUSTER_DEFAULT, str(self._node_id)) or not self._listeners:
            return
        image = self._image()
        per_broker = resource_name != CLUSTER_DEFAULT
        layer = {} if replace_all else dict(image.broker_configs(self._node_id if per_broker else None))
        for name, op, value in changes:
            if op == OP_SET:
                layer[name] = value or ""
            elif op == OP_DELETE:
                layer.pop(name, None)
        cluster = dict(image.broker_configs()) if per_broker else layer
        mine = layer if per_broker else dict(image.broker_configs(self._node_id))
        try:
            config = self._effective(cluster, mine)
            for name, listener in self._listeners.items():
                listener.check(TlsSettings.for_listener(config, name), name == self._inter_broker)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.invalid_config, f"Validation of dynamic config update of the SSL key and "
                                                       f"trust stores failed: {exc}") from None

    def follow(self, image: MetadataImage) -> None:
        """Reload what this broker's dynamic configs changed (a metadata image listener)."""
        seen = (image.broker_configs(), image.broker_configs(self._node_id))
        if self._seen is not None and seen[0] is self._seen[0] and seen[1] is self._seen[1]:
            return
        self._seen = seen
        self.reload(image)

    def after_alter(self) -> None:
        """A change of the stores was accepted: reload now, also files named again under the same name."""
        self.reload(self._image())

    def reload(self, image: MetadataImage) -> None:
        try:
            config = self._effective(image.broker_configs(), image.broker_configs(self._node_id))
        except ConfigError as exc:
            log.error("TLS listeners keep their key and trust stores: the dynamic configs are invalid: %s", exc)
            return
        refused = set()
        for name, listener in self._listeners.items():
            try:
                if listener.reload(TlsSettings.for_listener(config, name)):
                    log.info("listener %s: key and trust stores reloaded; new connections use them", name)
            except ConfigError as exc:
                refused.add(name)
                log.error("listener %s keeps its key and trust stores: %s", name, exc)
        for name, security in self._clients:
            if name in refused:
                continue  # connections to it keep the stores the listener keeps
            try:
                if security.reload(TlsSettings.for_listener(config, name)):
                    log.info("connections to other nodes' listener %s: key and trust stores reloaded; new "
                             "connections use them", name)
            except ConfigError as exc:
                log.error("connections to other nodes' listener %s keep their key and trust stores: %s", name, exc)

    def _effective(self, cluster: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """Static configs, then cluster-wide dynamic ones, then this broker's own (Kafka's precedence)."""
        config = self._static.with_dynamic(dict(cluster)) if cluster else self._static
        return config.with_dynamic(dict(per_broker), per_broker=True) if per_broker else config
