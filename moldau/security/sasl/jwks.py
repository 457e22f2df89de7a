"""The identity provider's signing keys (a JWKS document, RFC 7517), kept fresh as Kafka keeps them.

`JwksKeySet` holds the keys and decides when to fetch, with no I/O of its own (the clock is injected): every
`sasl.oauthbearer.jwks.endpoint.refresh.ms`, after a failed fetch again with a backoff that doubles from
`...retry.backoff.ms` to `...retry.backoff.max.ms`, and at once when a token names a key id the set does not
hold, which is how a provider's key rotation reaches the broker (at most once a second, so tokens with invented
key ids cannot make the broker hammer the provider). The token that named the unknown key is refused; the
client's next attempt finds it.

`keep_fresh` is the asyncio side: it fetches the URL (`https:`, `http:` or `file:`, as Kafka accepts) in a
worker thread, so a slow provider never holds up the event loop, and feeds the result to the key set. HTTPS is
checked against the system's certificate authorities (OpenSSL's `SSL_CERT_FILE` names another bundle).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt

from moldau.clock import Clock
from moldau.security.sasl.file_urls import file_url_path

log = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 1 << 20
FETCH_TIMEOUT_S = 10.0
UNKNOWN_KID_REFRESH_GAP_MS = 1000.0
MAX_KID_CHARS = 256


class JwksError(ValueError):
    """A JWKS document that cannot be used."""


def check_url(url: str) -> str:
    """The URL if Moldau can fetch it; raises ValueError naming what is wrong."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("https", "http", "file"):
        raise ValueError(f"unsupported URL scheme {scheme or '(none)'!r} in {url}; expected https, http or file")
    return url


def parse_jwks(document: bytes) -> dict[str, dict[str, Any]]:
    """Signing keys of a JWKS by key id (keys without one under ""); raises JwksError."""
    try:
        value = json.loads(document)
    except ValueError as exc:
        raise JwksError(f"not JSON: {exc}") from None
    keys = value.get("keys") if isinstance(value, dict) else None
    if not isinstance(keys, list):
        raise JwksError("not a JWK Set: no \"keys\" list")
    usable: dict[str, dict[str, Any]] = {}
    for key in keys:
        if not isinstance(key, dict) or key.get("use", "sig") != "sig":
            continue  # encryption keys and junk are not for verifying signatures
        try:
            jwt.PyJWK(key)  # one that PyJWT cannot read (an unknown kty or curve) is skipped
        except jwt.PyJWTError:
            continue
        kid = key.get("kid", "")
        usable[kid if isinstance(kid, str) else str(kid)] = key
    if not usable:
        raise JwksError("the JWK Set holds no usable signing key")
    return usable


class JwksKeySet:
    def __init__(self, url: str, clock: Clock, refresh_ms: int = 3_600_000, backoff_ms: int = 100,
                 backoff_max_ms: int = 10_000) -> None:
        self.url = url
        self._clock = clock
        self._refresh_ms = refresh_ms
        self._backoff_ms = max(1, backoff_ms)
        self._backoff_max_ms = max(self._backoff_ms, backoff_max_ms)
        self._keys: dict[str, dict[str, Any]] = {}
        self._prepared: dict[tuple[str, str], jwt.PyJWK] = {}
        self._failures = 0
        self._next_fetch_ms = clock.monotonic_ms()  # fetch at once
        self._last_expedited_ms = float("-inf")
        self.on_wanted: Callable[[], None] | None = None  # the refresher's wake-up
        self.loaded = False

    # -- what validators ask -------------------------------------------------------------------------------------

    def verification_key(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        key_id = kid if kid is not None else self._only_kid(alg)
        if key_id is None:
            return None
        jwk = self._keys.get(key_id)
        if jwk is None:
            self._expedite(key_id)
            return None
        if jwk.get("alg", alg) != alg:
            return None  # the key is for another algorithm
        prepared = self._prepared.get((key_id, alg))
        if prepared is None:
            try:
                prepared = jwt.PyJWK(jwk, algorithm=alg)
            except jwt.PyJWTError:
                return None  # e.g. an RSA key with an EC algorithm
            self._prepared[(key_id, alg)] = prepared
        return prepared

    def _only_kid(self, alg: str) -> str | None:
        """A token without a key id is checked with the only key that could sign it."""
        family = alg[:2]
        kty = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP", "HS": "oct"}.get(family)
        matching = [k for k, jwk in self._keys.items() if jwk.get("kty") == kty]
        return matching[0] if len(matching) == 1 else None

    def _expedite(self, kid: str) -> None:
        now = self._clock.monotonic_ms()
        if len(kid) > MAX_KID_CHARS or now - self._last_expedited_ms < UNKNOWN_KID_REFRESH_GAP_MS:
            return
        self._last_expedited_ms = now
        if self._next_fetch_ms > now:
            self._next_fetch_ms = now
            if self.on_wanted is not None:
                self.on_wanted()

    # -- what the refresher asks and tells -----------------------------------------------------------------------

    def fetch_in_ms(self) -> float:
        return max(0.0, self._next_fetch_ms - self._clock.monotonic_ms())

    def fetched(self, document: bytes) -> None:
        """A fetched document; raises JwksError (and schedules a retry) when it is unusable."""
        try:
            keys = parse_jwks(document)
        except JwksError:
            self.fetch_failed()
            raise
        self._keys = keys
        self._prepared = {}
        self._failures = 0
        self.loaded = True
        self._next_fetch_ms = self._clock.monotonic_ms() + (self._refresh_ms if self._refresh_ms > 0
                                                            else float("inf"))

    def fetch_failed(self) -> None:
        """Retry with a backoff that doubles up to its maximum; the keys already held stay in use."""
        delay = min(self._backoff_max_ms, self._backoff_ms * 2 ** min(self._failures, 30))
        self._failures += 1
        self._next_fetch_ms = self._clock.monotonic_ms() + delay

    @property
    def key_ids(self) -> tuple[str, ...]:
        return tuple(self._keys)


def fetch_document(url: str, timeout_s: float = FETCH_TIMEOUT_S) -> bytes:
    """Blocking: the document at an https, http or file URL (at most MAX_DOCUMENT_BYTES)."""
    if urllib.parse.urlsplit(url).scheme.lower() == "file":
        with file_url_path(url).open("rb") as file:
            body = file.read(MAX_DOCUMENT_BYTES + 1)
    else:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    if len(body) > MAX_DOCUMENT_BYTES:
        raise JwksError(f"the document at {url} is larger than {MAX_DOCUMENT_BYTES} bytes")
    return body


async def refresh_once(keys: JwksKeySet, fetch: Callable[[str], bytes] = fetch_document) -> bool:
    """One fetch, in a worker thread; True when the keys were replaced."""
    try:
        document = await asyncio.to_thread(fetch, keys.url)
    except Exception as exc:  # urllib and http.client raise many kinds: each is a failed fetch
        keys.fetch_failed()
        log.warning("cannot read the JWKS at %s: %s (retrying in %.1f s)", keys.url, exc, keys.fetch_in_ms() / 1000)
        return False
    try:
        keys.fetched(document)  # schedules the retry itself when the document is unusable
    except JwksError as exc:
        log.warning("cannot read the JWKS at %s: %s (retrying in %.1f s)", keys.url, exc, keys.fetch_in_ms() / 1000)
        return False
    log.info("JWKS at %s loaded: key ids %s", keys.url, ", ".join(keys.key_ids) or "(none)")
    return True


async def keep_fresh(keys: JwksKeySet, fetch: Callable[[str], bytes] = fetch_document) -> None:
    """Fetch whenever the key set wants it, until cancelled."""
    wanted = asyncio.Event()
    keys.on_wanted = wanted.set
    try:
        while True:
            delay = keys.fetch_in_ms()
            if delay > 0:
                wanted.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wanted.wait(), None if delay == float("inf") else delay / 1000)
                continue
            await refresh_once(keys, fetch)
    finally:
        keys.on_wanted = None
