"""Delegation tokens (KIP-48) on a real broker: made with `moldau delegation-tokens`, used by kafka-python.

The broker has a SASL_PLAINTEXT listener (PLAIN users alice, bob and carol, and SCRAM for token logins), a
PLAINTEXT one, Kafka's StandardAuthorizer (with allow.everyone.if.no.acl.found, so only the token ACLs below
restrict anyone) and `delegation.token.secret.key`. No Python client library has the token APIs, so tokens are
made with Moldau's CLI; kafka-python logs in with one through its public hook for SASL mechanisms, with SCRAM
that adds the `tokenauth=true` extension (what Java clients send for a ScramLoginModule with tokenauth="true").
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.security.sasl.client import SaslClientConfig
from tests.support.delegation_tokens import (
    REPO,
    Token,
    create_token,
    describe_tokens,
    kafka_python_token_logins,
    logs_in,
    plain_properties,
    token_cli,
    token_logs_in,
    token_properties,
)
from tests.support.sasl import kafka_python_round_trip
from tests.support.sasl_broker import SaslBroker, password, start_sasl_broker

SECRET = "a-secret-every-node-shares"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    started = start_sasl_broker(tmp_path_factory.mktemp("tokens"), ("alice", "bob", "carol"),
                                ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
                                {"delegation.token.secret.key": SECRET, "allow.everyone.if.no.acl.found": "true",
                                 "delegation.token.expiry.check.interval.ms": "1000"})
    try:
        yield started
    finally:
        started.stop()


def properties(broker: SaslBroker, user: str) -> Path:
    return plain_properties(broker.proc.data_dir, user, password(user))


def cli(bootstrap: str, config: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    return token_cli(bootstrap, config, *args)


def create(broker: SaslBroker, user: str, *args: str) -> Token:
    return create_token(broker.bootstrap, properties(broker, user), *args)


def describe(broker: SaslBroker, user: str, *args: str) -> list[Token]:
    return describe_tokens(broker.bootstrap, properties(broker, user), *args)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes_as_the_token_owner(broker: SaslBroker, mechanism: str) -> None:
    topic = f"tokens-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(broker.conf("admin"))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    token = create(broker, "bob")
    assert token["owner"] == token["requester"] == "User:bob"
    auth = {"bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": token["token_id"],
            "sasl_plain_password": token["hmac"]}
    with kafka_python_token_logins(mechanism):
        assert kafka_python_round_trip(auth, topic, 10) == [f"v{i}".encode() for i in range(10)]


def test_a_token_login_acts_as_the_owner_and_may_not_ask_for_tokens(broker: SaslBroker) -> None:
    token = create(broker, "bob")
    # The CLI logs in with the token from a Java-style JAAS config; token requests over it are refused.
    done = cli(broker.bootstrap, token_properties(broker.proc.data_dir, token), "describe")
    assert done.returncode != 0
    assert "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in done.stderr
    # A wrong HMAC, or a token id that does not exist, is refused like a wrong password.
    assert token_logs_in(broker.bootstrap, token)
    wrong = base64.b64encode(b"\0" * 64).decode()
    assert not token_logs_in(broker.bootstrap, {**token, "hmac": wrong})
    assert not token_logs_in(broker.bootstrap, {**token, "token_id": "no-such-token"})
    # Without the extension, the token id is looked up as a user name, which it is not.
    assert not logs_in(broker.bootstrap, SaslClientConfig("SCRAM-SHA-256", token["token_id"], token["hmac"]))


def test_renewers_renew_others_are_refused_and_expiry_deletes_the_token(broker: SaslBroker) -> None:
    token = create(broker, "bob", "--renewer-principal", "User:carol", "--max-life-time-period", "3600000")
    assert token["renewers"] == "User:carol"
    renewed = cli(broker.bootstrap, properties(broker, "carol"), "renew", "--hmac", token["hmac"],
                  "--renew-time-period", "600000", "-o", "json")
    assert renewed.returncode == 0, renewed.stderr
    expiry = json.loads(renewed.stdout)[0]["expiry_date"]
    assert expiry < token["expiry_date"]  # ten minutes from now, sooner than the default day
    refused = cli(broker.bootstrap, properties(broker, "alice"), "renew", "--hmac", token["hmac"])
    assert refused.returncode != 0 and "DELEGATION_TOKEN_OWNER_MISMATCH" in refused.stderr
    mine = [t for t in describe(broker, "bob", "--owner-principal", "User:bob") if t["token_id"] == token["token_id"]]
    assert mine and mine[0]["expiry_date"] == expiry and mine[0]["hmac"] == token["hmac"]
    assert not [t for t in describe(broker, "bob", "--owner-principal", "User:carol")
                if t["token_id"] == token["token_id"]]
    expired = cli(broker.bootstrap, properties(broker, "bob"), "expire", "--hmac", token["hmac"])
    assert expired.returncode == 0, expired.stderr
    assert token["token_id"] not in [t["token_id"] for t in describe(broker, "bob")]
    assert not token_logs_in(broker.bootstrap, token)
    gone = cli(broker.bootstrap, properties(broker, "bob"), "renew", "--hmac", token["hmac"])
    assert gone.returncode != 0 and "DELEGATION_TOKEN_NOT_FOUND" in gone.stderr


def test_a_token_past_its_life_is_refused_and_deleted(broker: SaslBroker) -> None:
    token = create(broker, "alice", "--max-life-time-period", "1500")
    assert token_logs_in(broker.bootstrap, token)
    time.sleep(1.7)
    assert not token_logs_in(broker.bootstrap, token)
    refused = cli(broker.bootstrap, properties(broker, "alice"), "renew", "--hmac", token["hmac"])
    assert refused.returncode != 0
    assert "DELEGATION_TOKEN_EXPIRED" in refused.stderr or "DELEGATION_TOKEN_NOT_FOUND" in refused.stderr
    # The controller's check (every second here) deletes it.
    deadline = time.monotonic() + 15
    while token["token_id"] in [t["token_id"] for t in describe(broker, "alice")]:
        assert time.monotonic() < deadline, "the expired token was never deleted"
        time.sleep(0.3)


def test_creating_a_token_for_another_owner_takes_create_tokens(broker: SaslBroker) -> None:
    def acls(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "moldau", "acls", *args, "-b", broker.bootstrap,
                               "--command-config", str(broker.admin_properties())],
                              capture_output=True, text=True, cwd=REPO, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    acls("add", "--allow-principal", "User:alice", "--operation", "CreateTokens", "--user-principal", "User:carol")
    assert "resourceType=USER, name=User:carol" in acls("list", "--user-principal", "User:carol")
    token = create(broker, "alice", "--owner-principal", "User:carol")
    assert (token["owner"], token["requester"]) == ("User:carol", "User:alice")
    assert token_logs_in(broker.bootstrap, token)
    refused = cli(broker.bootstrap, properties(broker, "bob"), "create", "--owner-principal", "User:carol")
    assert refused.returncode != 0 and "DELEGATION_TOKEN_AUTHORIZATION_FAILED" in refused.stderr
    bad_renewer = cli(broker.bootstrap, properties(broker, "bob"), "create", "--renewer-principal", "Group:ops")
    assert bad_renewer.returncode != 0 and "INVALID_PRINCIPAL_TYPE" in bad_renewer.stderr


def test_token_requests_need_an_authenticated_connection(broker: SaslBroker) -> None:
    listeners = broker.proc.overrides["listeners"].split(",")
    plaintext = next(lsn for lsn in listeners if lsn.startswith("PLAINTEXT://")).removeprefix("PLAINTEXT://")
    done = cli(plaintext, None, "describe")
    assert done.returncode != 0 and "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED" in done.stderr


def test_tokens_are_off_without_a_secret_key(tmp_path: Path) -> None:
    plain = start_sasl_broker(tmp_path, ("alice",))
    try:
        done = cli(plain.bootstrap, properties(plain, "alice"), "create")
        assert done.returncode != 0 and "DELEGATION_TOKEN_AUTH_DISABLED" in done.stderr
        described = cli(plain.bootstrap, properties(plain, "alice"), "describe")
        assert described.returncode != 0 and "DELEGATION_TOKEN_AUTH_DISABLED" in described.stderr
    finally:
        plain.stop()
