"""Checking HTTP Basic passwords against PLAIN users and SCRAM credentials, and the verdict cache."""

from __future__ import annotations

import asyncio

from moldau.security.passwords import PasswordCheck
from moldau.security.sasl.scram import ScramCredential, credential_from_salted_password, salted_password


def scram(mechanism: str, password: str, salt: bytes = b"salt-123", iterations: int = 4096) -> ScramCredential:
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


def test_plain_users_and_scram_credentials() -> None:
    credentials = {("SCRAM-SHA-256", "bob"): scram("SCRAM-SHA-256", "bob-secret"),
                   ("SCRAM-SHA-512", "carol"): scram("SCRAM-SHA-512", "carol-secret")}
    check = PasswordCheck({"alice": "alice-secret"}, lambda mechanism, user: credentials.get((mechanism, user)))

    def ok(user: str, password: str) -> bool:
        return asyncio.run(check.check(user, password))

    assert ok("alice", "alice-secret") and ok("bob", "bob-secret") and ok("carol", "carol-secret")
    assert not ok("alice", "alice-secre") and not ok("bob", "carol-secret") and not ok("nobody", "")
    assert not ok("carol", "carol-secret ") and not ok("bob", "")


def test_a_changed_credential_is_checked_again_not_answered_from_the_cache() -> None:
    credentials = {("SCRAM-SHA-256", "bob"): scram("SCRAM-SHA-256", "one")}
    check = PasswordCheck({}, lambda mechanism, user: credentials.get((mechanism, user)), cache_entries=2)

    def ok(password: str) -> bool:
        return asyncio.run(check.check("bob", password))

    assert ok("one") and ok("one") and not ok("two")
    credentials[("SCRAM-SHA-256", "bob")] = scram("SCRAM-SHA-256", "two", salt=b"salt-456")
    assert ok("two") and not ok("one")
    del credentials[("SCRAM-SHA-256", "bob")]
    assert not ok("two")
    assert len(check._verdicts) <= 2  # bounded
