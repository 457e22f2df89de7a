"""The server side of each SASL mechanism: fed the client's tokens, answering the server's.

`evaluate(token)` returns the server's next token, or raises `AuthenticationFailed` with the message the
client is told. `complete` says the exchange succeeded; `authorization_id` is then the user the connection
acts as. PLAIN is parsed here (RFC 4616 is one message); SCRAM's messages, nonces and proofs are `scramp`'s.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from moldau.security.delegation_tokens import TokenCredential
    from moldau.security.sasl.scram import ScramCredential

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
OAUTHBEARER = "OAUTHBEARER"
# Mechanisms with a username and password: what Moldau's own clients (inter-broker, CLI, Connect) log in with.
PASSWORD_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
# What SASL listeners serve: OAUTHBEARER's tokens come from the client's identity provider (oauthbearer.py).
SERVER_MECHANISMS = (*PASSWORD_MECHANISMS, OAUTHBEARER)

# What Kafka tells clients; the same text for a wrong password and an unknown user, so users cannot be probed.
PLAIN_FAILED = "Authentication failed: Invalid username or password"


def credentials_failed(mechanism: str) -> str:
    """Kafka's answer to a SASL exchange that failed without a message of its own (a malformed message, a wrong
    SCRAM proof)."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class AuthenticationFailed(Exception):
    """The client's credentials were refused; the message is sent to the client."""


class SaslServer(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...
    @property
    def authorization_id(self) -> str: ...
    @property
    def credential_expires_ms(self) -> int | None:
        """Wall-clock expiry of the credential presented (an OAuth token's `exp`, a delegation token's expiry),
        None when it has none: a session ends there at the latest (KIP-368)."""
        ...
    @property
    def token_authenticated(self) -> bool:
        """The client logged in with a delegation token (KIP-48) and acts as its owner."""
        ...
    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """PLAIN: one message `[authzid] NUL authcid NUL password`, checked against the JAAS `user_<name>` options."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._user: str | None = None

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        assert self._user is not None
        return self._user

    @property
    def credential_expires_ms(self) -> int | None:
        return None

    @property
    def token_authenticated(self) -> bool:
        return False

    def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            raise AuthenticationFailed("Authentication failed: PLAIN exchange already complete")
        try:
            authzid, username, password = token.decode("utf-8").split("\0")
        except ValueError:
            raise AuthenticationFailed("Authentication failed: invalid PLAIN message (expected 3 NUL-separated "
                                       "fields)") from None
        if not username:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if authzid and authzid != username:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        expected = self._users.get(username)
        # Compared in constant time; an unknown user costs the same as a wrong password.
        if not hmac.compare_digest((expected or "").encode(), password.encode()) or expected is None:
            raise AuthenticationFailed(PLAIN_FAILED)
        self._user = username
        return b""


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (mechanism, user) -> credential
TokenLookup = Callable[[str, str], "TokenCredential | None"]  # (mechanism, token id) -> a delegation token's
# The SCRAM extension (RFC 5802 extensions in the client's first message) by which a client says that its user name
# is a delegation token's id and its password the token's HMAC (KIP-48); Kafka accepts no other extension.
TOKEN_AUTH_EXTENSION = "tokenauth"


class ScramServer:
    """SCRAM-SHA-256/512: client-first, server-first, client-final, server-final; credentials from the image.

    With `tokenauth=true` in the client's first message, the user name is a delegation token's id, checked against
    the token's credential (`token_lookup`), and the connection acts as the token's owner until the token expires.
    """

    def __init__(self, mechanism: str, lookup: CredentialLookup, token_lookup: TokenLookup | None = None) -> None:
        # scramp is imported where a SCRAM exchange happens, not with the mechanisms' names: every command of the
        # CLI reads those, and scramp (with asn1crypto) was a tenth of their start.
        import scramp

        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info)
        self._user: str | None = None
        self._step = 0
        self._complete = False
        self._with_token = False
        self._token_expires_ms: int | None = None

    def _auth_info(self, username: str) -> tuple[bytes, bytes, bytes, int] | None:
        if self._with_token:
            token = self._token_lookup(self.mechanism, username) if self._token_lookup is not None else None
            if token is None:
                return None
            credential = token.credential
            self._user = token.owner.name
            self._token_expires_ms = token.expiry_ms
        else:
            user_credential = self._lookup(self.mechanism, username)
            if user_credential is None:
                return None
            credential = user_credential
            self._user = username
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete and self._user is not None
        return self._user

    @property
    def credential_expires_ms(self) -> int | None:
        return self._token_expires_ms

    @property
    def token_authenticated(self) -> bool:
        return self._complete and self._with_token

    def evaluate(self, token: bytes) -> bytes:
        import scramp

        failed = credentials_failed(self.mechanism)
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(failed) from None
        try:
            if self._step == 0:
                self._step = 1
                self._check_authzid(message)
                self._with_token = self._asks_token_auth(message)
                without_extensions = ",".join(message.split(",")[:4])
                self._server.set_client_first(without_extensions)
                # Kafka's extension name is longer than RFC 5802's one-letter attributes, which scramp insists on:
                # it parses the message without it, but both sides sign the message as the client sent it.
                self._server.client_first_bare = message.split(",", 2)[2]
                return str(self._server.get_server_first()).encode()
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(message)
                final = str(self._server.get_server_final()).encode()
                self._complete = True
                return final
        except scramp.ScramException:
            raise AuthenticationFailed(failed) from None
        raise AuthenticationFailed("Authentication failed: SCRAM exchange already complete")

    @staticmethod
    def _asks_token_auth(client_first: str) -> bool:
        """Whether the client's first message carries `tokenauth=true`; any other extension is refused, as Kafka
        refuses it."""
        import scramp

        attributes = client_first.split(",")[4:]  # after the gs2 header's two fields, n= and r=
        extensions = dict(a.partition("=")[::2] for a in attributes)
        if set(extensions) - {TOKEN_AUTH_EXTENSION}:
            raise scramp.ScramException("unsupported SCRAM extensions")
        return extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"

    @staticmethod
    def _check_authzid(client_first: str) -> None:
        # gs2-header "n,a=<authzid>,": Kafka allows an authorization id only when it names the user itself.
        import scramp

        parts = client_first.split(",", 3)
        if (len(parts) >= 3 and parts[1].startswith("a=") and parts[2].startswith("n=")
                and _sasl_name(parts[1][2:]) != _sasl_name(parts[2][2:])):
            raise scramp.ScramException("authorization id differs from the user")


def _sasl_name(text: str) -> str:
    return text.replace("=2C", ",").replace("=3D", "=")
