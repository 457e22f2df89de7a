"""How the console reaches its cluster on a secured listener: which SASL mechanisms its users may sign in with, the
TLS settings its clients need to trust the broker, and single requests with Moldau's own client (for the APIs
confluent-kafka lacks, and to check a user's password at sign-in).

The console connects to the broker's first client listener. When that listener is SSL or SASL_SSL, the console's
clients verify the broker's certificate against the broker's own trust store for that listener
(`listener.name.<name>.ssl.truststore.*`, else `ssl.truststore.*`): the CA that signs the brokers' certificates,
which a cluster whose brokers talk TLS to each other must trust anyway. Without a trust store the system's CAs are
used. The certificate's host check follows the listener's `ssl.endpoint.identification.algorithm`. A client
certificate (the listener's key store) is presented only where the listener requires one
(`ssl.client.auth=required`), since presenting one elsewhere would change who the console is on an SSL listener.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.net.client import Authenticator, ClientConnection
from moldau.security.client_security import TLS_PROTOCOLS, ClientSecurity
from moldau.security.sasl.client import RoundTrip, SaslClientConfig, authenticate
from moldau.security.sasl.mechanisms import PASSWORD_MECHANISMS
from moldau.security.sasl.settings import SASL_PROTOCOLS, enabled_mechanisms
from moldau.security.tls import TlsSettings, client_context

if TYPE_CHECKING:
    from moldau.config.broker_config import BrokerConfig
    from moldau.console.clients import Credentials

__all__ = ["ListenerAccess"]

REQUEST_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ListenerAccess:
    """The console's client listener as a client sees it."""

    host: str
    port: int
    protocol: str  # the listener's security protocol
    # SASL mechanisms users may sign in with: those the listener enables that take a password (not OAUTHBEARER,
    # whose tokens come from the user's identity provider); empty when it is not SASL.
    mechanisms: tuple[str, ...] = ()
    tls: TlsSettings | None = None

    @classmethod
    def for_listener(cls, config: BrokerConfig, listener: str, host: str, port: int) -> ListenerAccess:
        protocol = config.security_protocol(listener)
        mechanisms = (tuple(m for m in enabled_mechanisms(config, listener) if m in PASSWORD_MECHANISMS)
                      if protocol in SASL_PROTOCOLS else ())
        tls = TlsSettings.for_listener(config, listener) if protocol in TLS_PROTOCOLS else None
        return cls(host, port, protocol, mechanisms, tls)

    @property
    def secured(self) -> bool:
        return self.protocol in SASL_PROTOCOLS

    def librdkafka_tls(self) -> dict[str, Any]:
        """librdkafka's settings for trusting the broker (and, where required, presenting the key store)."""
        tls = self.tls
        if tls is None:
            return {}
        out: dict[str, Any] = {"ssl.endpoint.identification.algorithm":
                               "https" if tls.endpoint_identification_algorithm.lower() == "https" else "none"}
        if tls.truststore_location:
            out["ssl.ca.location"] = tls.truststore_location
        elif tls.truststore_certificates:
            out["ssl.ca.pem"] = _pem_text(tls.truststore_certificates)
        else:
            out["ssl.ca.location"] = "probe"  # the system's CAs, wherever this OS keeps them
        if tls.client_auth == "required" and tls.has_keystore:
            if tls.keystore_location:
                out["ssl.certificate.location"] = out["ssl.key.location"] = tls.keystore_location
            else:
                out["ssl.certificate.pem"] = _pem_text(tls.keystore_certificate_chain or "")
                out["ssl.key.pem"] = _pem_text(tls.keystore_key or "")
            if tls.key_password:
                out["ssl.key.password"] = tls.key_password
        return out

    def client_security(self) -> ClientSecurity:
        if self.tls is None:
            return ClientSecurity(self.protocol)
        return ClientSecurity(self.protocol, client_context(self.tls, client_certificate=self.tls.client_auth
                                                            == "required"))

    async def request(self, credentials: Credentials | None, request: Any) -> Any:
        """One request as `credentials`' user on a fresh connection. Raises ConnectionFailed (its cause a
        SaslClientError when the credentials were refused) or TimeoutError."""
        authenticator: Authenticator | None = None
        if credentials is not None:
            sasl = SaslClientConfig(credentials.mechanism, credentials.username, credentials.password)

            async def authenticator(send: RoundTrip) -> int:
                return await authenticate(sasl, send)

        conn = ClientConnection(self.host, self.port, "moldau-console", self.client_security(), authenticator)
        try:
            return await conn.request(request, REQUEST_TIMEOUT_S)
        finally:
            conn.close()


def _pem_text(value: str) -> str:
    """Inline PEM as Kafka's properties write it (newlines may be escaped as `\\n`)."""
    return value.replace("\\n", "\n")
