"""Checking a user name and password against the cluster's SASL users, for the HTTP services (the schema
registry's HTTP Basic authentication): the PLAIN users of the broker's JAAS configs and the SCRAM credentials
in the metadata log, so one set of users logs in to Kafka and to the registry alike.

A SCRAM credential keeps no password, only StoredKey = H(HMAC(Hi(password, salt, i), "Client Key")): a password
is checked by deriving that key again. Hi is PBKDF2 with at least 4096 iterations (milliseconds of CPU), and HTTP
clients send their password with every request, so verdicts are cached per (user, password digest, credential):
a changed or deleted credential is a different key, so the cache never outlives what it checked. A derivation
runs in a worker thread (hashlib's PBKDF2 releases the GIL), so a flood of wrong passwords does not stall the
event loop that serves Kafka clients.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from collections import OrderedDict
from collections.abc import Mapping

from moldau.security.sasl.mechanisms import SCRAM_MECHANISMS, CredentialLookup
from moldau.security.sasl.scram import ScramCredential, credential_from_salted_password, salted_password

__all__ = ["PasswordCheck"]

CACHE_ENTRIES = 1024


class PasswordCheck:
    def __init__(self, plain_users: Mapping[str, str], scram_lookup: CredentialLookup,
                 cache_entries: int = CACHE_ENTRIES) -> None:
        self._plain_users = plain_users
        self._scram_lookup = scram_lookup
        self._verdicts: OrderedDict[tuple[str, bytes, str, bytes], bool] = OrderedDict()
        self._cache_entries = cache_entries

    async def check(self, user: str, password: str) -> bool:
        """Whether `password` is `user`'s: a PLAIN user's password, or one matching a SCRAM credential."""
        expected = self._plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        for mechanism in SCRAM_MECHANISMS:
            if await self._matches_scram(user, password, mechanism):
                return True
        return False

    async def _matches_scram(self, user: str, password: str, mechanism: str) -> bool:
        credential = self._scram_lookup(mechanism, user)
        if credential is None:
            return False
        key = (user, hashlib.sha256(password.encode()).digest(), mechanism, credential.stored_key)
        verdict = self._verdicts.get(key)
        if verdict is not None:
            self._verdicts.move_to_end(key)
            return verdict
        derived = await asyncio.to_thread(_derive_stored_key, mechanism, password, credential)
        verdict = hmac.compare_digest(derived, credential.stored_key)
        self._remember(key, verdict)
        return verdict

    def _remember(self, key: tuple[str, bytes, str, bytes], verdict: bool) -> None:
        self._verdicts[key] = verdict
        while len(self._verdicts) > self._cache_entries:
            self._verdicts.popitem(last=False)


def _derive_stored_key(mechanism: str, password: str, credential: ScramCredential) -> bytes:
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    return credential_from_salted_password(mechanism, credential.salt, salted, credential.iterations).stored_key
