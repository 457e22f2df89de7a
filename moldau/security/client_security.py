"""How this node connects to other nodes: the security of the listener it reaches them on.

Brokers reach each other on `inter.broker.listener.name` (replica fetchers, transaction markers) and the
controllers on the first of `controller.listener.names` (the Raft quorum, the controller channel). A
`ClientSecurity` is built once per such listener from the same configs the listener serves with
(`listener.name.<name>.ssl.*` first, then `ssl.*`), and `moldau.net.client` opens its connections with it:
over TLS for SSL and SASL_SSL, verifying the peer against the trust store and presenting the key store as the
client certificate (needed where the peer's listener has `ssl.client.auth=required`).

SASL_PLAINTEXT and SASL_SSL also need a SASL exchange after connecting: that belongs to the SASL part, which
adds its mechanism and credentials here and runs the exchange in `ClientConnection._connect`.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from moldau.config.broker_config import BrokerConfig
from moldau.security.tls import TlsSettings, client_context

TLS_PROTOCOLS = frozenset(("SSL", "SASL_SSL"))


@dataclass(frozen=True, slots=True)
class ClientSecurity:
    """The security protocol of outgoing connections and, for TLS, their context."""

    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str) -> ClientSecurity:
        """Security for connecting to other nodes' `listener`. Raises ConfigError naming a bad config."""
        protocol = config.security_protocol(listener) if listener else "PLAINTEXT"
        context = client_context(TlsSettings.for_listener(config, listener)) if protocol in TLS_PROTOCOLS else None
        return cls(protocol, context)


PLAINTEXT = ClientSecurity()
