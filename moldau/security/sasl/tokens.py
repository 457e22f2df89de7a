"""Validating OAUTHBEARER tokens, as Kafka's two server callback handlers do.

- `UnsecuredTokenValidator` is Kafka's default (`OAuthBearerUnsecuredValidatorCallbackHandler`): unsigned JWTs
  (`alg: none`, empty signature), for development and tests. Its options are the `unsecuredValidator*` options of
  the listener's OAUTHBEARER JAAS config.
- `JwksTokenValidator` is Kafka's `OAuthBearerValidatorCallbackHandler` (KIP-768): a JWT signed by a key of the
  identity provider's JWKS (jwks.py), with `exp` and `iat`, the expected audience and issuer when configured,
  and the principal in `sasl.oauthbearer.sub.claim.name`. Signatures are checked by PyJWT; the claims against
  the injected clock, so tests choose the time.

Both raise `TokenRejected` with the reason, which is logged; the client is told only `invalid_token` or
`insufficient_scope`, as Kafka tells it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jwt

from moldau.clock import Clock
from moldau.security.sasl.oauthbearer import BearerToken, TokenRejected

log = logging.getLogger(__name__)


class KeySource(Protocol):
    """Where a JWKS validator finds verification keys (jwks.py's JwksKeySet)."""

    def verification_key(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        """The key for a token's `kid` and `alg`, or None (an unknown kid asks for a refresh)."""
        ...


def _b64_json(part: str, what: str) -> dict[str, Any]:
    try:
        # Kafka decodes with Java's basic decoder; JWTs are base64url without padding. Both are accepted.
        raw = base64.b64decode(part.replace("-", "+").replace("_", "/") + "=" * (-len(part) % 4), validate=True)
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise TokenRejected(f"malformed {what}: not base64-encoded JSON") from None
    if not isinstance(value, dict):
        raise TokenRejected(f"malformed {what}: not a JSON object")
    return value


# A NumericDate past this (about the year 318,000) is refused rather than computed with: JSON allows integers
# of any size, and Python's parser NaN and Infinity, none of which is a time.
MAX_NUMERIC_DATE_S = 10**13


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenRejected(f"The '{name}' claim was not of type Number")
    if not -MAX_NUMERIC_DATE_S <= value <= MAX_NUMERIC_DATE_S:  # NaN fails this too
        raise TokenRejected(f"The '{name}' claim is not a time: {value!r:.40}")
    return float(value)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    """A string scope is one value and a list many, as Kafka reads it (it does not split on spaces)."""
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset({value.strip()}) if value.strip() else frozenset()
    if isinstance(value, list):
        return frozenset(str(item).strip() for item in value if str(item).strip())
    raise TokenRejected(f"The '{name}' claim was not a String or a list of Strings")


def _principal(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    if not isinstance(value, str) or not value.strip():
        raise TokenRejected(f"No principal name in JWT claim: {name}")
    return value


@dataclass(frozen=True, slots=True)
class UnsecuredOptions:
    """The `unsecuredValidator*` JAAS options."""

    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> UnsecuredOptions:
        """Raises ValueError on a clock skew that is not a whole number of at least 0."""
        skew_text = options.get("unsecuredValidatorAllowableClockSkewMs", "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs: not a number: {skew_text}") from None
        if skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew_text}")
        return cls(options.get("unsecuredValidatorPrincipalClaimName", "").strip() or "sub",
                   options.get("unsecuredValidatorScopeClaimName", "").strip() or "scope",
                   tuple(options.get("unsecuredValidatorRequiredScope", "").split()),
                   skew)


class UnsecuredTokenValidator:
    def __init__(self, options: UnsecuredOptions, clock: Clock) -> None:
        self._options = options
        self._clock = clock

    def validate(self, token: str) -> BearerToken:
        options = self._options
        if ".." in token:
            raise TokenRejected("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRejected("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
                                "values")
        header = _b64_json(parts[0], "header")
        claims = _b64_json(parts[1], "claims")
        if header.get("alg") != "none":
            raise TokenRejected("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenRejected("Unsecured JWS must not contain a digital signature")
        scope = _scope(claims, options.scope_claim)
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenRejected("No expiration time in JWT")
        principal = _principal(claims, options.principal_claim)
        iat = _number(claims, "iat")
        now = self._clock.time_ms()
        skew = options.clock_skew_ms
        if iat is not None and iat * 1000 > now + skew:
            raise TokenRejected(f"The Issued At value ({iat} seconds) was after the indicated time ({now} ms) plus "
                                f"allowable clock skew ({skew} ms)")
        if now - skew >= exp * 1000:
            raise TokenRejected(f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was on or "
                                f"after the Expiration Time value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenRejected(f"The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} "
                                "seconds)")
        missing = [s for s in options.required_scope if s not in scope]
        if missing:
            raise TokenRejected(f"The provided scope ({sorted(scope)}) was missing a required scope ({missing})",
                                scope=" ".join(options.required_scope))
        return BearerToken(principal, round(exp * 1000), scope, None if iat is None else round(iat * 1000))


@dataclass(frozen=True, slots=True)
class JwtExpectations:
    """What a signed token must carry: Kafka's `sasl.oauthbearer.*` settings."""

    audience: tuple[str, ...] = ()
    issuer: str | None = None
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30


class JwksTokenValidator:
    def __init__(self, keys: KeySource, expectations: JwtExpectations, clock: Clock) -> None:
        self._keys = keys
        self._expect = expectations
        self._clock = clock

    def validate(self, token: str) -> BearerToken:
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise TokenRejected("Malformed JWT provided; expected three sections (header, payload, and signature)")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise TokenRejected(f"malformed JWT header: {exc}") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg.lower() == "none":
            raise TokenRejected("the JWT is not signed (alg none)")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRejected("the JWT's kid is not a string")
        key = self._keys.verification_key(kid, alg)
        if key is None:
            raise TokenRejected(f"no verification key for kid {kid!r} and alg {alg} in the JWKS")
        claims = self._verified_claims(token, key, alg)
        return self._check_claims(claims)

    @staticmethod
    def _verified_claims(token: str, key: jwt.PyJWK, alg: str) -> dict[str, Any]:
        # Only the signature here: the times are checked against the injected clock, the rest below.
        options: Any = {"verify_signature": True, "verify_exp": False, "verify_nbf": False, "verify_iat": False,
                        "verify_aud": False, "verify_iss": False, "require": []}
        try:
            claims = jwt.decode(token, key=key, algorithms=[alg], options=options)
        except (jwt.PyJWTError, TypeError, ValueError) as exc:
            raise TokenRejected(f"Could not validate the access token: {exc}") from None
        return dict(claims)

    def _check_claims(self, claims: Mapping[str, Any]) -> BearerToken:
        expect = self._expect
        now_s = self._clock.time_ms() / 1000
        skew = expect.clock_skew_s
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenRejected("No Expiration Time (exp) claim present")
        iat = _number(claims, "iat")
        if iat is None:
            raise TokenRejected("No Issued At (iat) claim present")
        if now_s - skew >= exp:
            raise TokenRejected(f"The JWT is no longer valid: now ({now_s:.0f}) is on or after exp ({exp:.0f}), "
                                f"with {skew} s of clock skew allowed")
        nbf = _number(claims, "nbf")
        if nbf is not None and now_s + skew < nbf:
            raise TokenRejected(f"The JWT is not yet valid: nbf ({nbf:.0f}) is after now ({now_s:.0f})")
        if expect.audience:
            self._check_audience(claims.get("aud"), expect.audience)
        if expect.issuer is not None and claims.get("iss") != expect.issuer:
            raise TokenRejected(f"Issuer (iss) claim value ({claims.get('iss')!r}) doesn't match expected value "
                                f"of {expect.issuer}")
        principal = _principal(claims, expect.sub_claim)
        scope = _scope(claims, expect.scope_claim)
        return BearerToken(principal, round(exp * 1000), scope, round(iat * 1000))

    @staticmethod
    def _check_audience(aud: object, expected: Sequence[str]) -> None:
        if aud is None:
            raise TokenRejected("No Audience (aud) claim present")
        values = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else None
        if values is None or not all(isinstance(v, str) for v in values):
            raise TokenRejected("The Audience (aud) claim is not a string or a list of strings")
        if not set(values) & set(expected):
            raise TokenRejected(f"Audience (aud) claim {values} doesn't contain an acceptable identifier; expected "
                                f"one of {list(expected)}")
