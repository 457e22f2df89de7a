"""The client side of SASL, for the broker's own connections to other brokers (inter-broker listener).

When `inter.broker.listener.name` is a SASL listener, the broker authenticates its outbound connections with
`sasl.mechanism.inter.broker.protocol` and the `username` / `password` of that mechanism's JAAS config on that
listener, as Kafka does; with OAUTHBEARER, tokens from the login that JAAS config and the
`sasl.oauthbearer.*` client settings describe (login.py). The exchange is KIP-152's: SaslHandshake v1, then
SaslAuthenticate requests; SCRAM is `scramp`'s client, which also checks the server's final signature (the
server knew the credential). The CLI, Connect and the mirror use the same `authenticate`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from moldau.config import BrokerConfig, ConfigError
from moldau.protocol.errors import ErrorCode
from moldau.security.sasl.login import LoginError, TokenCache, login_from_options
from moldau.security.sasl.mechanisms import (
    OAUTHBEARER,
    PASSWORD_MECHANISMS,
    PLAIN,
    SCRAM_MECHANISMS,
    TOKEN_AUTH_EXTENSION,
)
from moldau.security.sasl.settings import SASL_PROTOCOLS, jaas_config, listener_override

# Send one request on the connection being set up and return its response.
RoundTrip = Callable[[Any], Awaitable[Any]]


class SaslClientError(Exception):
    """The peer refused the broker's credentials (or the exchange went wrong)."""


@dataclass(frozen=True, slots=True)
class SaslClientConfig:
    mechanism: str
    username: str
    password: str
    tokens: TokenCache | None = None  # OAUTHBEARER's
    token_auth: bool = False  # SCRAM with a delegation token: username is the token id, password its HMAC (KIP-48)

    def __repr__(self) -> str:
        return f"SaslClientConfig({self.mechanism!r}, {self.username!r}, password=[hidden])"

    @classmethod
    def oauthbearer(cls, tokens: TokenCache) -> SaslClientConfig:
        return cls(OAUTHBEARER, "", "", tokens)


async def authenticate(config: SaslClientConfig, send: RoundTrip) -> int:
    """Authenticate a fresh connection; returns the session lifetime in ms (0: none). Raises SaslClientError."""
    handshake = await send(SaslHandshakeRequest(mechanism=config.mechanism))
    if handshake.error_code != ErrorCode.none:
        raise SaslClientError(f"SASL handshake for {config.mechanism} refused: {handshake.error_code.name.upper()} "
                              f"(enabled: {', '.join(handshake.mechanisms)})")
    if config.mechanism == PLAIN:
        response = await _step(send, f"\0{config.username}\0{config.password}".encode())
    elif config.mechanism == OAUTHBEARER:
        response = await _oauthbearer(config, send)
    else:
        import scramp  # only where SCRAM is used: every command of the CLI imports this module

        client = scramp.ScramClient([config.mechanism], config.username, config.password)
        client_first = client.get_client_first()
        if config.token_auth:
            # The extension goes into the client's first message and so into the message both sides sign; scramp
            # has no option for it (and takes only RFC 5802's one-letter attributes), so its record of that message
            # is extended too.
            client_first += f",{TOKEN_AUTH_EXTENSION}=true"
            client.client_first_bare += f",{TOKEN_AUTH_EXTENSION}=true"
        first = await _step(send, client_first.encode())
        try:
            client.set_server_first(bytes(first.auth_bytes).decode())
            response = await _step(send, client.get_client_final().encode())
            client.set_server_final(bytes(response.auth_bytes).decode())
        except scramp.ScramException as exc:
            raise SaslClientError(f"SCRAM exchange failed: {exc}") from exc
    return int(response.session_lifetime.total_seconds() * 1000)


async def _step(send: RoundTrip, token: bytes) -> Any:
    response = await send(SaslAuthenticateRequest(auth_bytes=token))
    if response.error_code != ErrorCode.none:
        raise SaslClientError(f"SASL authentication failed: {response.error_code.name.upper()}: "
                              f"{response.error_message}")
    return response


async def _oauthbearer(config: SaslClientConfig, send: RoundTrip) -> Any:
    """RFC 7628: the token in one message; a refusal comes back as a JSON error, answered with 0x01."""
    assert config.tokens is not None
    try:
        token = await config.tokens.token()
    except LoginError as exc:
        raise SaslClientError(f"no OAUTHBEARER token: {exc}") from exc
    response = await _step(send, f"n,,\x01auth=Bearer {token}\x01\x01".encode())
    if response.auth_bytes:
        await _step(send, b"\x01")  # the broker answers it with SASL_AUTHENTICATION_FAILED, which _step raises
        raise SaslClientError(f"SASL authentication failed: {bytes(response.auth_bytes).decode(errors='replace')}")
    return response


def inter_broker_sasl(config: BrokerConfig) -> SaslClientConfig | None:
    """The broker's own SASL settings when its inter-broker listener is a SASL one, else None.

    Raises ConfigError when they cannot work (unsupported mechanism, no credentials)."""
    listener = config.inter_broker_listener_name or next(
        (lsn.name for lsn in config.listeners if lsn.name not in set(config.controller_listener_names)), None)
    if listener is None or config.security_protocol(listener) not in SASL_PROTOCOLS:
        return None
    mechanism = config.sasl_mechanism_inter_broker_protocol or "GSSAPI"
    if mechanism == OAUTHBEARER:
        return _own_tokens(config, listener)
    if mechanism not in PASSWORD_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol {mechanism} is not supported; the inter-broker "
                          f"listener {listener} uses SASL, so set it to one of "
                          f"{', '.join((*PASSWORD_MECHANISMS, OAUTHBEARER))}", "sasl.mechanism.inter.broker.protocol")
    assert mechanism == PLAIN or mechanism in SCRAM_MECHANISMS
    return _own_credentials(config, f"the inter-broker listener {listener}", listener, mechanism)


# The client-side OAUTHBEARER settings a broker reads for its own login, as Kafka's brokers do (each may be given
# for the listener as listener.name.<listener>.oauthbearer.<config>).
OWN_LOGIN_CONFIGS = ("sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.client.credentials.client.id",
                     "sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.scope")


def _own_tokens(config: BrokerConfig, listener: str) -> SaslClientConfig:
    """The broker's own tokens for the inter-broker listener: its OAUTHBEARER JAAS config there and the
    `sasl.oauthbearer.*` client settings."""
    jaas = jaas_config(config, listener, OAUTHBEARER)
    settings: dict[str, str] = {}
    for name in OWN_LOGIN_CONFIGS:
        value = listener_override(config, listener, f"oauthbearer.{name}")
        if value is None:
            raw = config.value(name)
            value = None if raw is None else str(raw)
        if value:
            settings[name] = value
    try:
        login = login_from_options(jaas.options if jaas is not None else {}, settings)
    except ValueError as exc:
        raise ConfigError(f"the inter-broker listener {listener} uses SASL OAUTHBEARER, but the broker cannot log in: "
                          f"{exc} (listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config)",
                          "sasl.jaas.config") from None
    return SaslClientConfig.oauthbearer(TokenCache(login))


def controller_sasl(config: BrokerConfig) -> SaslClientConfig | None:
    """The node's SASL settings for its connections to the controllers (quorum, registration, forwarding) when the
    controller listener is a SASL one, else None. Only PLAIN: SCRAM credentials live in the metadata log, which
    the controllers must already share before anyone could look them up.

    Raises ConfigError when they cannot work."""
    names = config.controller_listener_names
    listener = names[0] if names else None
    if listener is None or config.security_protocol(listener) not in SASL_PROTOCOLS:
        return None
    mechanism = config.sasl_mechanism_controller_protocol or "GSSAPI"
    if mechanism != PLAIN:
        raise ConfigError(f"sasl.mechanism.controller.protocol {mechanism} is not supported; the controller listener "
                          f"{listener} uses SASL, so set it to PLAIN (SCRAM credentials are kept in the metadata log "
                          "the controllers replicate, so they cannot authenticate the controllers themselves)",
                          "sasl.mechanism.controller.protocol")
    return _own_credentials(config, f"the controller listener {listener}", listener, mechanism)


def _own_credentials(config: BrokerConfig, what: str, listener: str, mechanism: str) -> SaslClientConfig:
    """The node's own username and password: those of the mechanism's JAAS config on the listener."""
    jaas = jaas_config(config, listener, mechanism)
    if jaas is None or jaas.username is None or jaas.password is None:
        raise ConfigError(f"{what} uses SASL {mechanism}, but its JAAS config (listener.name.{listener.lower()}."
                          f"{mechanism.lower()}.sasl.jaas.config) has no username and password for the node itself",
                          "sasl.jaas.config")
    return SaslClientConfig(mechanism, jaas.username, jaas.password)
