"""Delegation tokens (KIP-48): what the controller decides and how a broker authenticates one.

A delegation token is a shared secret a user obtains over an authenticated connection and hands to processes that
have no credentials of their own (a Spark executor, a Connect task): they log in with SCRAM as the token's owner,
sending the token id as the user name, the base64 of its HMAC as the password and the SCRAM extension
`tokenauth=true`. The HMAC is HMAC-SHA512 of the token id keyed with `delegation.token.secret.key`, which every
node has, so the metadata log holds only who owns a token and until when (`DelegationTokenRecord`); no node stores
or sends the HMAC except in answer to the owner or a renewer.

The decisions are pure functions of a token record, the principal asking and the time, so the controller and the
tests run them alike:

- a token lives until its expiry time (`delegation.token.expiry.time.ms` after it was issued or last renewed) and
  never past its max time (issue + `delegation.token.max.lifetime.ms`, or less when the creator asks);
- its owner and the renewers named at creation may renew it (a new expiry, never past the max time) or expire it
  (at once, or sooner); anyone else gets DELEGATION_TOKEN_OWNER_MISMATCH;
- a token past its expiry cannot be renewed or used to log in; the active controller deletes such tokens every
  `delegation.token.expiry.check.interval.ms`;
- without a secret key, tokens are off: every token request gets DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from moldau.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.principal import USER_TYPE, KafkaPrincipal
from moldau.security.sasl.scram import MIN_ITERATIONS, ScramCredential, credential_from_salted_password, salted_password

if TYPE_CHECKING:
    from moldau.metadata.image import MetadataImage

DISABLED_MESSAGE = "Delegation tokens are not enabled: delegation.token.secret.key is not set"
# The expiry Kafka answers with when a request is refused before a token is looked at.
ERROR_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """The broker configs that govern tokens (all read-only, as in Kafka)."""

    secret_key: str | None = None  # delegation.token.secret.key; None or empty: tokens are off
    max_lifetime_ms: int = 604_800_000  # delegation.token.max.lifetime.ms (7 days)
    expiry_time_ms: int = 86_400_000  # delegation.token.expiry.time.ms (1 day)

    @property
    def enabled(self) -> bool:
        return bool(self.secret_key)

    def check_enabled(self) -> str:
        if not self.secret_key:
            raise KafkaError(ErrorCode.delegation_token_auth_disabled, DISABLED_MESSAGE)
        return self.secret_key


TOKENS_OFF = TokenSettings()


def token_hmac(secret_key: str, token_id: str) -> bytes:
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def new_token_id(random_bytes: bytes) -> str:
    """A token id in Kafka's form (a UUID as 22 characters of URL-safe base64), from 16 random bytes."""
    return base64.urlsafe_b64encode(random_bytes).rstrip(b"=").decode("ascii")


# -- the controller's decisions -----------------------------------------------------------------------------------

def create(settings: TokenSettings, now_ms: int, token_id: str, owner: KafkaPrincipal, requester: KafkaPrincipal,
           renewers: Iterable[KafkaPrincipal], max_lifetime_ms: int) -> DelegationTokenRecord:
    """A new token's record. `max_lifetime_ms` <= 0 takes the configured maximum; a larger one is cut to it."""
    settings.check_enabled()
    renewer_list = tuple(renewers)
    for renewer in renewer_list:
        if renewer.principal_type != USER_TYPE:
            raise KafkaError(ErrorCode.invalid_principal_type,
                             f"renewer {renewer} is not a {USER_TYPE} principal")
    if owner.principal_type != USER_TYPE:
        raise KafkaError(ErrorCode.invalid_principal_type, f"owner {owner} is not a {USER_TYPE} principal")
    lifetime = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        lifetime = min(lifetime, max_lifetime_ms)
    max_timestamp = now_ms + lifetime
    expiry = min(max_timestamp, now_ms + settings.expiry_time_ms)
    return DelegationTokenRecord(token_id, str(owner), str(requester), tuple(str(r) for r in renewer_list), now_ms,
                                 max_timestamp, expiry)


def find_by_hmac(tokens: Iterable[DelegationTokenRecord], secret_key: str, presented: bytes) -> DelegationTokenRecord:
    """The token whose HMAC was presented; DELEGATION_TOKEN_NOT_FOUND otherwise. Compared in constant time."""
    for record in tokens:
        if hmac.compare_digest(token_hmac(secret_key, record.token_id), presented):
            return record
    raise KafkaError(ErrorCode.delegation_token_not_found, "Delegation token not found")


def may_renew(record: DelegationTokenRecord, principal: KafkaPrincipal) -> bool:
    name = str(principal)
    return record.owner == name or name in record.renewers


def _check_renewable(record: DelegationTokenRecord, principal: KafkaPrincipal, now_ms: int) -> None:
    if record.max_timestamp < now_ms or record.expiry_timestamp < now_ms:
        raise KafkaError(ErrorCode.delegation_token_expired, f"Delegation token {record.token_id} has expired")
    if not may_renew(record, principal):
        raise KafkaError(ErrorCode.delegation_token_owner_mismatch,
                         f"{principal} is neither the owner nor a renewer of the delegation token")


def renew(settings: TokenSettings, now_ms: int, record: DelegationTokenRecord, principal: KafkaPrincipal,
          renew_period_ms: int) -> DelegationTokenRecord:
    """The renewed token: expiry `renew_period_ms` from now (the configured expiry time when <= 0 or longer), never
    past the token's max time."""
    _check_renewable(record, principal, now_ms)
    period = settings.expiry_time_ms
    if renew_period_ms > 0:
        period = min(period, renew_period_ms)
    return replace(record, expiry_timestamp=min(record.max_timestamp, now_ms + period))


def expire(now_ms: int, record: DelegationTokenRecord, principal: KafkaPrincipal,
           expiry_period_ms: int) -> DelegationTokenRecord | RemoveDelegationTokenRecord:
    """A negative period deletes the token at once; otherwise it expires that long from now (never later than its
    max time)."""
    _check_renewable(record, principal, now_ms)
    if expiry_period_ms < 0:
        return RemoveDelegationTokenRecord(record.token_id)
    return replace(record, expiry_timestamp=min(record.max_timestamp, now_ms + expiry_period_ms))


def expired(tokens: Iterable[DelegationTokenRecord], now_ms: int) -> list[RemoveDelegationTokenRecord]:
    """Deletions of the tokens past their expiry (the controller's periodic sweep)."""
    return [RemoveDelegationTokenRecord(t.token_id) for t in tokens if t.expiry_timestamp < now_ms]


def visible_to(record: DelegationTokenRecord, principal: KafkaPrincipal, owners: frozenset[str] | None,
               may_describe_token: Callable[[str], bool], may_describe_owner: Callable[[str], bool]) -> bool:
    """Whether DescribeDelegationToken shows the token: owned by one of `owners` (None: anyone), and the principal
    is its owner, requester or a renewer, may DESCRIBE the token, or may DESCRIBE_TOKENS of its owner (KIP-373)."""
    if owners is not None and record.owner not in owners:
        return False
    name = str(principal)
    return (record.owner == name or record.requester == name or name in record.renewers
            or may_describe_token(record.token_id) or may_describe_owner(record.owner))


# -- logging in with a token ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TokenCredential:
    """What a SCRAM exchange with `tokenauth=true` checks the client against, and who it then is."""

    credential: ScramCredential
    owner: KafkaPrincipal
    expiry_ms: int


class TokenCredentials:
    """SCRAM credentials of the live tokens, derived on a token's first use on this node and kept while it exists.

    The password a client proves is the base64 of the token's HMAC; its salted form costs a PBKDF2 of 4,096
    rounds, so it is made once per token and mechanism (with a salt of this node's), not at every login.
    """

    def __init__(self, secret_key: str | None, image: Callable[[], MetadataImage], now_ms: Callable[[], int]) -> None:
        self._secret_key = secret_key or None
        self._image = image
        self._now_ms = now_ms
        self._cache: dict[tuple[str, str], ScramCredential] = {}

    def lookup(self, mechanism: str, token_id: str) -> TokenCredential | None:
        """The token's credential; None when tokens are off, or there is no such token or it has expired (the
        controller deletes expired tokens only every `delegation.token.expiry.check.interval.ms`)."""
        if self._secret_key is None:
            return None
        tokens = self._image().delegation_tokens
        record = tokens.get(token_id)
        if record is None:
            self._forget_removed(tokens)
            return None
        if record.expiry_timestamp < self._now_ms():
            return None
        key = (token_id, mechanism)
        credential = self._cache.get(key)
        if credential is None:
            password = base64.b64encode(token_hmac(self._secret_key, token_id)).decode("ascii")
            salt = os.urandom(32)
            credential = credential_from_salted_password(
                mechanism, salt, salted_password(mechanism, password, salt, MIN_ITERATIONS), MIN_ITERATIONS)
            self._cache[key] = credential
        return TokenCredential(credential, KafkaPrincipal.parse(record.owner), record.expiry_timestamp)

    def _forget_removed(self, tokens: Mapping[str, DelegationTokenRecord]) -> None:
        stale = [key for key in self._cache if key[0] not in tokens]
        for key in stale:
            del self._cache[key]
