"""`moldau server --add-scram`: Kafka's `kafka-storage format --add-scram` syntax, and the controller writing the
credentials into a new metadata log only."""

from __future__ import annotations

import base64
import uuid

import pytest
import scramp

from moldau.metadata.controller import Controller
from moldau.metadata.records import RemoveUserScramCredentialRecord
from moldau.security.sasl.scram import MECHANISM_CODES, credential_of, salted_password
from moldau.security.sasl.scram_bootstrap import ScramSpecError, parse_add_scram
from tests.unit.metadata.builders import build
from tests.unit.metadata.test_reassignment import FakeQuorum, run


def _fixed_salt(size: int) -> bytes:
    return b"s" * size


def test_a_password_gives_the_credential_scramp_makes_from_it() -> None:
    record = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]", _fixed_salt)
    assert (record.name, record.mechanism, record.iterations) == ("alice", MECHANISM_CODES["SCRAM-SHA-256"], 4096)
    expected = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("alice-secret", 4096, b"s" * 32)
    credential = credential_of(record)
    assert (credential.salt, credential.stored_key, credential.server_key, credential.iterations) == expected


def test_a_salted_password_and_quoted_values_as_kafkas_docs_write_them() -> None:
    salt = b"1lv4pdnw4fwq7notcxm0yy1k7q"
    salted = salted_password("SCRAM-SHA-512", "bob-secret", salt, 8192)
    encoded_salt = base64.b64encode(salt).decode()
    spec = (f'SCRAM-SHA-512=[name=bob,iterations=8192,salt="{encoded_salt}",'
            f'saltedpassword="{base64.b64encode(salted).decode()}"]')
    from_salted = parse_add_scram(spec)
    from_password = parse_add_scram(f"SCRAM-SHA-512=[name=bob,password=bob-secret,iterations=8192,salt={encoded_salt}]")
    assert from_salted == from_password and from_salted.iterations == 8192


def test_a_quoted_value_may_hold_commas_and_equals_signs() -> None:
    quoted = parse_add_scram('SCRAM-SHA-256=[password="a,b=c",name=carol]', _fixed_salt)
    expected = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("a,b=c", 4096, b"s" * 32)
    assert quoted.name == "carol" and credential_of(quoted).stored_key == expected[1]


def test_without_a_salt_each_credential_gets_a_random_one() -> None:
    first = parse_add_scram("SCRAM-SHA-256=[name=alice,password=x]")
    second = parse_add_scram("SCRAM-SHA-256=[name=alice,password=x]")
    assert first.salt != second.salt and len(base64.b64decode(first.salt)) == 32


@pytest.mark.parametrize("spec,reason", [
    ("alice:secret", "expected MECHANISM=[name=...,password=...]"),
    ("SCRAM-SHA-1=[name=a,password=b]", "unknown mechanism SCRAM-SHA-1"),
    ("SCRAM-SHA-256=[password=b]", "a user name is required"),
    ("SCRAM-SHA-256=[name=a]", "give either password or saltedpassword"),
    ("SCRAM-SHA-256=[name=a,password=b,saltedpassword=Yg==,salt=Yg==]", "give either password or saltedpassword"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=Yg==]", "saltedpassword needs the salt"),
    ("SCRAM-SHA-256=[name=a,salt=Yg==,saltedpassword=Yg==]", "saltedpassword must be 32 bytes"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "iterations must be between 4096 and 16384"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=many]", "is not a number"),
    ("SCRAM-SHA-256=[name=a,password=b,salt=%%%]", "salt is not base64"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "unknown key colour"),
    ("SCRAM-SHA-256=[name=a,name=b,password=c]", "name is given twice"),
])
def test_malformed_specs_are_refused_with_the_reason(spec: str, reason: str) -> None:
    with pytest.raises(ScramSpecError, match=reason.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_add_scram(spec)


def test_the_credentials_are_written_with_the_first_registration_only() -> None:
    alice = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    quorum = FakeQuorum(build([], []))
    ctl = Controller(quorum, node_id=1, bootstrap_scram=[alice])  # type: ignore[arg-type]
    run(ctl.register_broker(1, uuid.UUID(int=1), (), None))
    assert quorum.image.scram_credentials[("alice", alice.mechanism)] == alice
    # Deleted later, it does not come back with another registration (a restart with the same arguments).
    quorum.image = quorum.image.apply([RemoveUserScramCredentialRecord(alice.name, alice.mechanism)],
                                      quorum.image.offset + 1)
    run(ctl.register_broker(1, uuid.UUID(int=2), (), None))
    run(ctl.register_broker(2, uuid.UUID(int=3), (), None))
    assert ("alice", alice.mechanism) not in quorum.image.scram_credentials
