"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-342), the server side.

The client sends one message, its initial response::

    n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A ...]^A

(`^A` is the byte 0x01). The token is handed to a `TokenValidator` (tokens.py: Kafka's unsecured validator or
its JWKS one). A valid token completes the exchange with an empty answer, and the connection's principal is
the token's principal claim. A refused token is answered, as RFC 7628 says and Kafka does, with a JSON error
(`{"status":"invalid_token"}`, or `insufficient_scope` with the scope that was missing) and no error code;
the client must then send a lone 0x01, and only that answer fails with SASL_AUTHENTICATION_FAILED, carrying the
JSON as the message. A malformed message fails at once with Kafka's generic message.

Extensions (KIP-342) are checked for syntax (names of letters, printable values, `auth` reserved) and otherwise
accepted, as Kafka's validators accept every extension.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Protocol

from moldau.security.sasl.mechanisms import OAUTHBEARER, AuthenticationFailed, credentials_failed

log = logging.getLogger(__name__)

_SEPARATOR = "\x01"
# An authzid is a saslname (RFC 5801): ASCII without ',' or '=', those two written =2C and =3D.
_SASLNAME = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"
# Extension names are letters, values printable ASCII with blanks (RFC 7628 section 3.1).
_PAIR = r"[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01"
_INITIAL_RESPONSE = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<pairs>(?:{_PAIR})*)\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")
INTERNAL_ERROR = "Authentication could not be performed due to an internal error on the server"
MAX_TOKEN_CHARS = 64 * 1024  # a JWT with many claims is a few KiB; the frame itself is capped before this


@dataclass(frozen=True, slots=True)
class BearerToken:
    """A validated token: who it names, until when, and with which scope."""

    principal: str
    expires_ms: int  # wall clock, from `exp`
    scope: frozenset[str] = frozenset()
    issued_ms: int | None = None


class TokenRejected(Exception):
    """The token is not valid: `reason` is logged, never sent. A missing scope sets `scope` (the scope that was
    required), which makes the answer's status `insufficient_scope`, as Kafka's."""

    def __init__(self, reason: str, scope: str | None = None) -> None:
        super().__init__(reason)
        self.scope = scope

    def json_error(self) -> str:
        # Built as Kafka builds it, so clients that match its text see the same bytes.
        status = "insufficient_scope" if self.scope is not None else "invalid_token"
        text = '{"status":' + json.dumps(status)
        if self.scope is not None:
            text += ', "scope":' + json.dumps(self.scope)
        return text + "}"


class TokenValidator(Protocol):
    def validate(self, token: str) -> BearerToken:
        """The token's principal and lifetime; raises TokenRejected."""
        ...


@dataclass(frozen=True, slots=True)
class InitialResponse:
    token: str
    authorization_id: str
    extensions: dict[str, str]


def parse_initial_response(message: bytes) -> InitialResponse:
    """The client's OAUTHBEARER message; raises ValueError (Kafka's SaslException) when malformed."""
    try:
        text = message.decode("ascii")
    except UnicodeDecodeError:
        raise ValueError("Invalid OAUTHBEARER client first message") from None
    match = _INITIAL_RESPONSE.fullmatch(text)
    if match is None:
        raise ValueError("Invalid OAUTHBEARER client first message")
    pairs: dict[str, str] = {}
    for pair in match["pairs"].split(_SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        if key in pairs:
            raise ValueError(f"Invalid OAUTHBEARER client first message: '{key}' given twice")
        pairs[key] = value
    auth = pairs.pop("auth", None)
    if auth is None:
        raise ValueError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise ValueError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if auth_match["scheme"].lower() != "bearer":
        raise ValueError(f"Invalid scheme in OAUTHBEARER client first message: {auth_match['scheme']}")
    token = auth_match["token"]
    if len(token) > MAX_TOKEN_CHARS:
        raise ValueError("Invalid OAUTHBEARER client first message: token too long")
    authzid = (match["authzid"] or "").replace("=2C", ",").replace("=3D", "=")
    return InitialResponse(token, authzid, pairs)


class OAuthBearerServer:
    """One OAUTHBEARER exchange: the initial response, and after a refused token the client's 0x01."""

    mechanism = OAUTHBEARER

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: BearerToken | None = None
        self._error: str | None = None  # the JSON error sent; the client's 0x01 turns it into the failure
        self._started = False
        self.extensions: dict[str, str] = {}

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        assert self._token is not None
        return self._token.principal

    @property
    def credential_expires_ms(self) -> int | None:
        return None if self._token is None else self._token.expires_ms

    @property
    def token_authenticated(self) -> bool:
        return False  # an OAuth token, not a delegation token

    @property
    def token(self) -> BearerToken | None:
        return self._token

    def evaluate(self, token: bytes) -> bytes:
        if self._error is not None:
            if token == b"\x01":
                raise AuthenticationFailed(self._error)
            raise AuthenticationFailed(credentials_failed(OAUTHBEARER))
        if self._started:
            raise AuthenticationFailed("Authentication failed: OAUTHBEARER exchange already complete")
        self._started = True
        try:
            response = parse_initial_response(token)
        except ValueError:
            raise AuthenticationFailed(credentials_failed(OAUTHBEARER)) from None
        try:
            bearer = self._validator.validate(response.token)
        except TokenRejected as exc:
            log.debug("OAUTHBEARER token refused: %s", exc)  # the reason stays here: the client is told the status
            self._error = exc.json_error()
            return self._error.encode()
        except Exception:
            # A token that trips a library in a way nobody foresaw is refused, and the broker says why in its log.
            log.exception("OAUTHBEARER token could not be validated")
            raise AuthenticationFailed(INTERNAL_ERROR) from None
        if response.authorization_id and response.authorization_id != bearer.principal:
            raise AuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({response.authorization_id}) that "
                f"is different from the token's principal name ({bearer.principal})")
        self.extensions = response.extensions
        self._token = bearer
        return b""
