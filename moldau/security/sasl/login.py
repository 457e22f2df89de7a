"""OAUTHBEARER's client side for Moldau's own connections: where a token comes from, and when to get a new one.

The same settings a Kafka client takes say where tokens come from (a broker's inter-broker listener, the CLI's
`--command-config`, a Connect worker, the mirror), in the Java client's words or librdkafka's:

- **client credentials** (OAuth 2, what Kafka's `OAuthBearerLoginCallbackHandler` does):
  `sasl.oauthbearer.token.endpoint.url` and the client's id and secret, from the JAAS options `clientId` /
  `clientSecret` / `scope`, Kafka 4.1's `sasl.oauthbearer.client.credentials.client.id` / `.client.secret` /
  `sasl.oauthbearer.scope`, or librdkafka's `sasl.oauthbearer.client.id` / `.client.secret` / `.scope`. A
  `file:` token endpoint URL is a file holding the token itself (Kafka 4.1's FileJwtRetriever).
- **unsecured tokens** (Kafka's default `OAuthBearerUnsecuredLoginCallbackHandler`): the JAAS options
  `unsecuredLoginStringClaim_<claim>="<value>"` (`sub` at least), `unsecuredLoginListClaim_<claim>` (the first
  character separates the values), `unsecuredLoginNumberClaim_<claim>`, `unsecuredLoginLifetimeSeconds`
  (3600); or librdkafka's `enable.sasl.oauthbearer.unsecure.jwt=true` with
  `sasl.oauthbearer.config=principal=<sub> [scope=a,b] [lifeSeconds=N]`.

`TokenCache` hands out a token until 80 % of its lifetime has passed (Kafka's `sasl.login.refresh.window.factor`
default), then gets a new one; a token endpoint is called in a worker thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.security.sasl.file_urls import file_url_path

REFRESH_WINDOW_FACTOR = 0.8
REQUEST_TIMEOUT_S = 10.0
MAX_RESPONSE_BYTES = 1 << 20


class LoginError(Exception):
    """No token could be had: the endpoint refused or did not answer, or the settings cannot make one."""


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class UnsecuredLogin:
    claims: Mapping[str, Any]
    lifetime_s: int = 3600


Login = ClientCredentials | UnsecuredLogin


def login_from_options(jaas: Mapping[str, str], settings: Mapping[str, str]) -> Login:
    """The login that JAAS options and client settings (Java or librdkafka names) describe; raises ValueError."""
    url = settings.get("sasl.oauthbearer.token.endpoint.url")
    client_id = (jaas.get("clientId") or settings.get("sasl.oauthbearer.client.credentials.client.id")
                 or settings.get("sasl.oauthbearer.client.id"))
    secret = (jaas.get("clientSecret") or settings.get("sasl.oauthbearer.client.credentials.client.secret")
              or settings.get("sasl.oauthbearer.client.secret"))
    scope = jaas.get("scope") or settings.get("sasl.oauthbearer.scope")
    if url:
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme == "file":
            return ClientCredentials(url, "", "")
        if scheme not in ("https", "http"):
            raise ValueError(f"sasl.oauthbearer.token.endpoint.url {url}: expected an https, http or file URL")
        if not client_id or not secret:
            raise ValueError("OAUTHBEARER with a token endpoint needs the client's id and secret (JAAS clientId and "
                             "clientSecret, or sasl.oauthbearer.client.credentials.client.id and .client.secret)")
        return ClientCredentials(url, client_id, secret, scope)
    claims, lifetime = _unsecured_claims(jaas)
    if not claims:
        claims, lifetime = _librdkafka_unsecured(settings)
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise ValueError("OAUTHBEARER needs a way to get tokens: sasl.oauthbearer.token.endpoint.url with the "
                         "client's id and secret, or unsecured tokens (JAAS unsecuredLoginStringClaim_sub, or "
                         "enable.sasl.oauthbearer.unsecure.jwt=true with sasl.oauthbearer.config=principal=...)")
    return UnsecuredLogin(claims, lifetime)


def _unsecured_claims(jaas: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """Kafka's `unsecuredLogin*` JAAS options: the claims, and the lifetime in seconds."""
    claims: dict[str, Any] = {}
    for key, value in jaas.items():
        if key.startswith("unsecuredLoginStringClaim_"):
            claims[key.removeprefix("unsecuredLoginStringClaim_")] = value
        elif key.startswith("unsecuredLoginListClaim_") and value:
            claims[key.removeprefix("unsecuredLoginListClaim_")] = [v for v in value[1:].split(value[0]) if v]
        elif key.startswith("unsecuredLoginNumberClaim_"):
            claims[key.removeprefix("unsecuredLoginNumberClaim_")] = _number(key, value)
    lifetime = jaas.get("unsecuredLoginLifetimeSeconds")
    return claims, 3600 if lifetime is None else _number("unsecuredLoginLifetimeSeconds", lifetime)


def _librdkafka_unsecured(settings: Mapping[str, str]) -> tuple[dict[str, Any], int]:
    """librdkafka's `enable.sasl.oauthbearer.unsecure.jwt` and `sasl.oauthbearer.config`."""
    claims: dict[str, Any] = {}
    lifetime = 3600
    if settings.get("enable.sasl.oauthbearer.unsecure.jwt", "false").lower() != "true":
        return claims, lifetime
    for item in settings.get("sasl.oauthbearer.config", "").split():
        key, _, value = item.partition("=")
        if key == "principal":
            claims["sub"] = value
        elif key == "scope":
            claims["scope"] = [v for v in value.split(",") if v]
        elif key == "lifeSeconds":
            lifetime = _number(key, value)
        elif not key.startswith("extension_"):  # extensions are not sent by Moldau's client
            raise ValueError(f"sasl.oauthbearer.config: unknown item {key!r}")
    return claims, lifetime


def _number(name: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise ValueError(f"{name}: not a whole number: {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name}: must be positive: {value!r}")
    return number


def unsecured_token(login: UnsecuredLogin, now_s: float) -> tuple[str, float]:
    """An unsigned JWT (`alg: none`) with the login's claims, and its expiry."""
    expires = now_s + login.lifetime_s
    payload = {**login.claims, "iat": int(now_s), "exp": int(expires)}

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(payload)}.", float(int(expires))


def fetch_token(login: ClientCredentials, now_s: float, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[str, float]:
    """Blocking: a token from the endpoint (client-credentials grant, the client authenticated with HTTP Basic as
    RFC 6749 says), or from the file a `file:` URL names; and when it expires. Raises LoginError."""
    if urllib.parse.urlsplit(login.token_url).scheme.lower() == "file":
        path = file_url_path(login.token_url)
        try:
            token = path.read_text().strip()
        except OSError as exc:
            raise LoginError(f"cannot read the token file {path}: {exc}") from None
        return token, _expiry_of(token, now_s)
    form = {"grant_type": "client_credentials", **({"scope": login.scope} if login.scope else {})}
    basic = base64.b64encode(f"{urllib.parse.quote(login.client_id, safe='')}:"
                             f"{urllib.parse.quote(login.client_secret, safe='')}".encode()).decode()
    request = urllib.request.Request(login.token_url, data=urllib.parse.urlencode(form).encode(), method="POST",
                                     headers={"Authorization": f"Basic {basic}", "Accept": "application/json",
                                              "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = json.loads(response.read(MAX_RESPONSE_BYTES))
    except urllib.error.HTTPError as exc:
        raise LoginError(f"the token endpoint {login.token_url} refused: HTTP {exc.code}{_oauth_error(exc)}") from None
    except Exception as exc:  # refused connections, cut-short or non-JSON answers alike
        raise LoginError(f"the token endpoint {login.token_url} gave no token: {exc}") from None
    access = body.get("access_token") if isinstance(body, dict) else None
    if not isinstance(access, str) or not access:
        raise LoginError(f"the token endpoint {login.token_url} answered without an access_token")
    expires_in = body.get("expires_in")
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and 0 < expires_in < 10**9:
        return access, now_s + float(expires_in)
    return access, _expiry_of(access, now_s)


def _oauth_error(error: urllib.error.HTTPError) -> str:
    """RFC 6749's `error` and `error_description` of a refusal, when its body has them."""
    try:
        body = json.loads(error.read(4096))
    except (OSError, ValueError):
        return ""
    if not isinstance(body, dict) or not isinstance(body.get("error"), str):
        return ""
    description = body.get("error_description")
    return f" {body['error']}" + (f": {description}" if isinstance(description, str) else "")


def _expiry_of(token: str, now_s: float) -> float:
    """The `exp` claim of a JWT (unverified: the broker checks it), or an hour from now when it has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        exp = claims.get("exp")
        if isinstance(exp, int | float) and not isinstance(exp, bool) and exp < 10**13:
            return float(exp)
    except (IndexError, ValueError):
        pass
    return now_s + 3600.0


class TokenCache:
    """The current token of one login, renewed once 80 % of its lifetime has passed."""

    def __init__(self, login: Login, now: Callable[[], float] = time.time) -> None:
        self.login = login
        self._now = now
        self._token: str | None = None
        self._renew_at = 0.0
        self._lock = asyncio.Lock()

    def _due(self) -> bool:
        return self._token is None or self._now() >= self._renew_at

    def _obtain(self) -> None:
        """Blocking for a token endpoint: get a token and note when to renew it."""
        now = self._now()
        if isinstance(self.login, UnsecuredLogin):
            token, expires = unsecured_token(self.login, now)
        else:
            token, expires = fetch_token(self.login, now)
        self._token, self._renew_at = token, now + max(0.0, expires - now) * REFRESH_WINDOW_FACTOR

    async def token(self) -> str:
        async with self._lock:  # connections opening together share one request to the endpoint
            if self._due():
                await asyncio.to_thread(self._obtain)
            assert self._token is not None
            return self._token

    def token_now(self) -> str:
        """The same, blocking (for kafka-python's token provider, called from its own threads)."""
        if self._due():
            self._obtain()
        assert self._token is not None
        return self._token
