"""An identity provider for OAUTHBEARER tests: signing keys, tokens, and a real HTTP server publishing the JWKS
and issuing tokens to clients with client credentials (OAuth 2 client_credentials grant, what librdkafka's
`sasl.oauthbearer.method=oidc` asks for).

The server is the standard library's threading HTTP server on 127.0.0.1 and a free port, so brokers fetch keys
and clients fetch tokens over real sockets.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://idp.example.test"
AUDIENCE = "moldau"


@dataclass
class SigningKey:
    kid: str
    private: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))

    def jwk(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.private.public_key()))
        return {**data, "kid": self.kid, "use": "sig", "alg": "RS256"}

    def token(self, sub: Any, lifetime_s: float = 300, *, now: float | None = None, **claims: Any) -> str:
        """A signed token for `sub` (any JSON value, to test refusals); `claims` add or replace (None drops)."""
        issued = time.time() if now is None else now
        payload = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(issued),
                   "exp": int(issued + lifetime_s), **claims}
        return jwt.encode({k: v for k, v in payload.items() if v is not None}, self.private, algorithm="RS256",
                          headers={"kid": self.kid})


def unsecured_token(sub: str, lifetime_s: float = 300, *, now: float | None = None, **claims: Any) -> str:
    """An unsigned JWT (`alg: none`), as librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` makes them."""
    issued = time.time() if now is None else now

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    payload = {"sub": sub, "iat": int(issued), "exp": int(issued + lifetime_s), **claims}
    return f"{part({'alg': 'none'})}.{part({k: v for k, v in payload.items() if v is not None})}."


class IdentityProvider:
    """Published keys (the first signs new tokens) and registered clients (client id -> (secret, subject))."""

    def __init__(self) -> None:
        self.keys = [SigningKey("key-1")]
        self.clients: dict[str, tuple[str, str]] = {}
        self.jwks_fetches = 0
        self.tokens_issued = 0
        self.token_lifetime_s = 300.0
        self.lock = threading.Lock()

    def jwks(self) -> dict[str, Any]:
        return {"keys": [key.jwk() for key in self.keys]}

    def rotate(self, kid: str) -> SigningKey:
        """A new signing key, published beside the old ones and used for new tokens."""
        key = SigningKey(kid)
        with self.lock:
            self.keys.insert(0, key)
        return key

    def issue(self, client_id: str, secret: str) -> str | None:
        known = self.clients.get(client_id)
        if known is None or known[0] != secret:
            return None
        self.tokens_issued += 1
        return self.keys[0].token(known[1], self.token_lifetime_s)


def _handler(idp: IdentityProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _json(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/jwks":
                with idp.lock:
                    idp.jwks_fetches += 1
                    body = idp.jwks()
                self._json(200, body)
            else:
                self._json(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            client_id, secret = _basic_credentials(self.headers.get("Authorization"))
            client_id = client_id or form.get("client_id", [""])[0]
            secret = secret or form.get("client_secret", [""])[0]
            if self.path != "/token" or form.get("grant_type") != ["client_credentials"]:
                self._json(400, {"error": "unsupported_grant_type"})
                return
            token = idp.issue(client_id, secret)
            if token is None:
                self._json(401, {"error": "invalid_client"})
                return
            self._json(200, {"access_token": token, "token_type": "Bearer",
                             "expires_in": int(idp.token_lifetime_s)})

    return Handler


def _basic_credentials(header: str | None) -> tuple[str, str]:
    if not header or not header.lower().startswith("basic "):
        return "", ""
    user, _, secret = base64.b64decode(header[6:]).decode().partition(":")
    return urllib.parse.unquote(user), urllib.parse.unquote(secret)


@contextmanager
def identity_provider() -> Iterator[tuple[IdentityProvider, str]]:
    """A running provider and its base URL (`<url>/jwks`, `<url>/token`)."""
    idp = IdentityProvider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(idp))
    thread = threading.Thread(target=server.serve_forever, name="identity-provider", daemon=True)
    thread.start()
    try:
        yield idp, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
