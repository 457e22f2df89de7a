"""One connection's SASL state, as a sans-I/O state machine.

States, as Kafka's server authenticator has them::

    HANDSHAKE  -- SaslHandshake v1 --> AUTHENTICATE (framed: SaslAuthenticate requests carry the tokens)
               -- SaslHandshake v0 --> AUTHENTICATE (unframed: the next frames are bare tokens, no header)
    AUTHENTICATE -- last token accepted --> COMPLETE (the connection's principal is User:<authorization id>)
    COMPLETE   -- SaslHandshake (re-authentication, KIP-368) --> AUTHENTICATE ... --> COMPLETE
    any        -- refused credentials, unsupported mechanism, illegal request --> FAILED (the connection closes
                  once the answer is sent)

Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate are legal; anything else is an illegal SASL
state and closes the connection, as Kafka does. Once the session lifetime (`connections.max.reauth.ms`) has
passed, only re-authentication is legal. Dispatch asks `check_request` before decoding anything, and hands bare
tokens of the unframed exchange to `evaluate`; the two handlers drive `handshake` and `evaluate`.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from moldau.clock import Clock
from moldau.protocol.codec import InvalidRequest
from moldau.protocol.errors import ErrorCode
from moldau.protocol.wire import ResponsePart
from moldau.security.principal import USER_TYPE, KafkaPrincipal
from moldau.security.sasl.mechanisms import (
    OAUTHBEARER,
    PLAIN,
    SCRAM_MECHANISMS,
    AuthenticationFailed,
    CredentialLookup,
    PlainServer,
    SaslServer,
    ScramServer,
    TokenLookup,
)
from moldau.security.sasl.oauthbearer import OAuthBearerServer, TokenValidator

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class IllegalSaslState(InvalidRequest):
    """A request that is not allowed in the connection's SASL state: the connection closes."""


class PrincipalHolder(Protocol):
    principal: KafkaPrincipal


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    """What one SASL listener accepts (see settings.py)."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    scram_lookup: CredentialLookup
    max_reauth_ms: int = 0  # 0: sessions do not expire
    failed_delay_ms: int = 100
    max_receive_bytes: int = 524288  # sasl.server.max.receive.size: the largest frame before authentication
    token_validator: TokenValidator | None = None  # OAUTHBEARER's (settings.token_validator)
    delegation_tokens: TokenLookup | None = None  # SCRAM logins with a delegation token (KIP-48)


@dataclass(frozen=True, slots=True)
class HandshakeResult:
    error_code: ErrorCode
    mechanisms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AuthenticateResult:
    error_code: ErrorCode
    error_message: str | None
    token: bytes
    session_lifetime_ms: int = 0
    delay_ms: int = 0  # hold the answer this long (failed authentication)


class SaslAuthenticator:
    def __init__(self, config: SaslListenerConfig, owner: PrincipalHolder, clock: Clock) -> None:
        self._config = config
        self._owner = owner
        self._clock = clock
        self.state = SaslState.HANDSHAKE
        self.framed = True
        self._server: SaslServer | None = None
        self._mechanism: str | None = None  # of the completed authentication (re-authentication keeps it)
        self.principal: KafkaPrincipal | None = None
        self.session_expires_ms: float | None = None
        self.close_after_response = False

    # -- what dispatch asks -------------------------------------------------------------------------------------

    @property
    def expects_bare_token(self) -> bool:
        """The next frame is a bare SASL token (after SaslHandshake v0), not a Kafka request."""
        return self.state is SaslState.AUTHENTICATE and not self.framed

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def session_expired(self) -> bool:
        return self.session_expires_ms is not None and self._clock.monotonic_ms() >= self.session_expires_ms

    def check_request(self, api_key: int) -> None:
        """Raise IllegalSaslState unless a request with this key may be served now."""
        if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return
        if self.state is SaslState.FAILED:
            raise IllegalSaslState("SASL authentication failed on this connection")
        if not self.authenticated:
            if api_key == API_VERSIONS and self.state is SaslState.HANDSHAKE:
                return
            raise IllegalSaslState(f"unexpected request (API key {api_key}) before SASL authentication completed")
        if self.session_expired():
            raise IllegalSaslState(f"request (API key {api_key}) after the SASL session expired; the client "
                                   "had to re-authenticate")

    # -- SaslHandshake ------------------------------------------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> HandshakeResult:
        enabled = self._config.mechanisms
        if self.state is SaslState.AUTHENTICATE or self.state is SaslState.FAILED:
            self._fail()
            return HandshakeResult(ErrorCode.illegal_sasl_state, enabled)
        reauthenticating = self.state is SaslState.COMPLETE
        if reauthenticating and version < 1:
            self._fail()
            return HandshakeResult(ErrorCode.illegal_sasl_state, enabled)
        if mechanism not in enabled or (reauthenticating and mechanism != self._mechanism):
            self._fail()
            return HandshakeResult(ErrorCode.unsupported_sasl_mechanism, enabled)
        self._server = self._new_server(mechanism)
        self.framed = version >= 1
        self.state = SaslState.AUTHENTICATE
        return HandshakeResult(ErrorCode.none, enabled)

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainServer(self._config.plain_users)
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, self._config.scram_lookup, self._config.delegation_tokens)
        if mechanism == OAUTHBEARER and self._config.token_validator is not None:
            return OAuthBearerServer(self._config.token_validator)
        raise ValueError(f"unsupported SASL mechanism {mechanism}")  # settings only enable the ones above

    # -- SaslAuthenticate, or a bare token -----------------------------------------------------------------------

    def authenticate_request(self) -> AuthenticateResult | None:
        """Refusal of a SaslAuthenticate request that is not legal now (None when it is)."""
        if self.state is SaslState.AUTHENTICATE and self.framed:
            return None
        self._fail()
        return AuthenticateResult(ErrorCode.illegal_sasl_state, "Unexpected SaslAuthenticate request: no SASL "
                                  "handshake (v1 or later) in progress", b"")

    def evaluate(self, token: bytes) -> AuthenticateResult:
        """Feed one client token; the answer to send. On success the owner's principal is set."""
        if self.state is not SaslState.AUTHENTICATE or self._server is None:
            self._fail()
            return AuthenticateResult(ErrorCode.illegal_sasl_state, "no SASL exchange in progress", b"")
        server = self._server
        try:
            answer = server.evaluate(token)
        except AuthenticationFailed as exc:
            self._fail()
            return AuthenticateResult(ErrorCode.sasl_authentication_failed, str(exc), b"",
                                      delay_ms=self._config.failed_delay_ms)
        if not server.complete:
            return AuthenticateResult(ErrorCode.none, None, answer)
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id, server.token_authenticated)
        if self.principal is not None and principal != self.principal:
            self._fail()  # KIP-368: re-authentication may not change who the connection is
            return AuthenticateResult(ErrorCode.sasl_authentication_failed,
                                      f"Cannot change principals during re-authentication from {self.principal}: "
                                      f"{principal}", b"", delay_ms=self._config.failed_delay_ms)
        self.principal = principal
        self._owner.principal = principal
        self._mechanism = server.mechanism
        self._server = None
        self.state = SaslState.COMPLETE
        lifetime = self._session_lifetime_ms(server.credential_expires_ms)
        self.session_expires_ms = self._clock.monotonic_ms() + lifetime if lifetime is not None else None
        return AuthenticateResult(ErrorCode.none, None, answer, lifetime or 0)

    def _session_lifetime_ms(self, credential_expires_ms: int | None) -> int | None:
        """KIP-368, as Kafka computes it: `connections.max.reauth.ms` when set, bounded by the credential's own
        expiry (an OAuth token's `exp`), which alone also ends the session. None: the session does not expire."""
        max_reauth = self._config.max_reauth_ms
        if credential_expires_ms is None:
            return max_reauth if max_reauth > 0 else None
        remaining = max(0, credential_expires_ms - self._clock.time_ms())
        return min(remaining, max_reauth) if max_reauth > 0 else remaining

    def _fail(self) -> None:
        self.state = SaslState.FAILED
        self._server = None
        self.close_after_response = True




async def bare_sasl_token(sasl: SaslAuthenticator, token: bytes | memoryview) -> list[ResponsePart]:
    """The unframed exchange (after SaslHandshake v0): a bare token in, a bare token out (size-prefixed by the
    connection). There is no error field, so refused credentials close the connection, after the failure delay."""
    result = sasl.evaluate(bytes(token))
    if result.error_code != ErrorCode.none:
        if result.delay_ms > 0:
            await asyncio.sleep(result.delay_ms / 1000)
        raise IllegalSaslState(f"SASL authentication failed: {result.error_message}")
    return [result.token]
