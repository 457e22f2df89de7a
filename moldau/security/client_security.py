"""How this node connects to other nodes: the security of the listener it reaches them on.

Brokers reach each other on `inter.broker.listener.name` (replica fetchers, transaction markers) and the
controllers on the first of `controller.listener.names` (the Raft quorum, the controller channel). A
`ClientSecurity` is built once per such listener from the same configs the listener serves with
(`listener.name.<name>.ssl.*` first, then `ssl.*`), and `moldau.net.client` opens its connections with it:
over TLS for SSL and SASL_SSL, verifying the peer against the trust store and presenting the key store as the
client certificate (needed where the peer's listener has `ssl.client.auth=required`).

When the listener's key or trust store is replaced while the node runs (`moldau.server.listener_tls`), the
node's `ClientSecurity` for it is reloaded too (`reload`), as Kafka reconfigures the inter-broker listener's
client side with its server side: connections opened from then on present the new certificate and trust the new
stores; connections already open keep theirs.

SASL_PLAINTEXT and SASL_SSL also need a SASL exchange after connecting: that belongs to the SASL part, which
adds its mechanism and credentials here and runs the exchange in `ClientConnection._connect`.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from moldau.config.broker_config import BrokerConfig
from moldau.security.tls import StoreStamps, TlsSettings, client_context, store_stamps

TLS_PROTOCOLS = frozenset(("SSL", "SASL_SSL"))


@dataclass(slots=True, eq=False)
class ClientSecurity:
    """The security protocol of outgoing connections and, for TLS, their context. Connections read
    `ssl_context` when they open, so a reloaded one applies to every pool holding this object. Compared and hashed
    by identity: one object per listener is shared and reloaded in place (it also serves as a dataclass default)."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    # What `ssl_context` was loaded from (for_listener), so that `reload` knows whether anything changed.
    settings: TlsSettings | None = field(default=None, compare=False, repr=False)
    stamps: StoreStamps = field(default=(), compare=False, repr=False)

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> ClientSecurity:
        """Security for connecting to other nodes' `listener`. Raises ConfigError naming a bad config."""
        protocol = config.security_protocol(listener) if listener else "PLAINTEXT"
        if protocol not in TLS_PROTOCOLS:
            return cls(protocol)
        settings = TlsSettings.for_listener(config, listener)
        return cls(protocol, client_context(settings), settings, store_stamps(settings))

    def reload(self, settings: TlsSettings) -> bool:
        """Open new connections with these settings' stores if they, or the files they name, changed since the
        last load; True if so. A security built without settings (no TLS) is left alone. Raises ConfigError
        naming the bad config, and keeps the context it has then."""
        if self.settings is None:
            return False
        stamps = store_stamps(settings)
        if settings == self.settings and stamps == self.stamps:
            return False
        self.ssl_context = client_context(settings)
        self.settings, self.stamps = settings, stamps
        return True


PLAINTEXT = ClientSecurity()
