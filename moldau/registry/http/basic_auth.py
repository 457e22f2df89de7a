"""HTTP Basic authentication for the registry (`schema.registry.authentication.method=BASIC`), as Confluent
Schema Registry's `authentication.method=BASIC` answers it: a request without valid credentials gets 401 with
`WWW-Authenticate: Basic realm="<realm>"` and `{"error_code": 401, "message": "Unauthorized"}`.

Users and passwords are the cluster's SASL users (see moldau.security.passwords). A refused request is answered
after `delay_s`, as Kafka delays a failed SASL authentication, so guessing passwords is slow; other requests
are not held up meanwhile.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json

from starlette.types import ASGIApp, Receive, Scope, Send

from moldau.security.passwords import PasswordCheck

__all__ = ["BasicAuth", "credentials"]

DEFAULT_REALM = "SchemaRegistry"


def credentials(authorization: str | None) -> tuple[str, str] | None:
    """(user, password) from an `Authorization: Basic ...` header; None when absent or malformed."""
    if not authorization:
        return None
    scheme, _, encoded = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else None


class BasicAuth:
    def __init__(self, app: ASGIApp, check: PasswordCheck, realm: str = DEFAULT_REALM, delay_s: float = 0.1) -> None:
        self.app = app
        self.check = check
        self.realm = realm
        self.delay_s = delay_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = credentials(_header(scope, b"authorization"))
        if given is not None and await self.check.check(*given):
            await self.app({**scope, "user": given[0]}, receive, send)
            return
        if given is not None:
            await asyncio.sleep(self.delay_s)
        await self._unauthorized(send)

    async def _unauthorized(self, send: Send) -> None:
        body = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
        await send({"type": "http.response.start", "status": 401, "headers": [
            (b"content-type", b"application/vnd.schemaregistry.v1+json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", f'Basic realm="{self.realm}"'.encode()),
        ]})
        await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None
