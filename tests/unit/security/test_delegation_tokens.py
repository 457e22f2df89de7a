"""Delegation tokens (KIP-48): the controller's decisions, the metadata they leave, logins with a token, and the
Envelope that carries a client's principal to the controller."""

from __future__ import annotations

import asyncio
import base64
import datetime
import random
from types import SimpleNamespace
from typing import Any

import pytest
import scramp

from moldau.clock import ManualClock
from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord, decode_record, encode_record
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security import delegation_tokens as tokens
from moldau.security.delegation_tokens import TokenCredentials, TokenSettings, token_hmac
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.sasl.authenticator import SaslAuthenticator, SaslListenerConfig
from moldau.security.sasl.mechanisms import AuthenticationFailed, ScramServer
from moldau.security.sasl.scram import ScramCredential
from moldau.server.envelope import deserialize_principal, host_bytes, host_text, serialize_principal
from moldau.server.handlers.token_requests import token_requests_allowed
from tests.unit.metadata.builders import build
from tests.unit.metadata.test_reassignment import FakeQuorum, run

SECRET = "s3cret"
SETTINGS = TokenSettings(SECRET, max_lifetime_ms=7_000, expiry_time_ms=1_000)
ALICE, BOB, CAROL = (KafkaPrincipal.user(n) for n in ("alice", "bob", "carol"))


def token(owner: str = "User:alice", renewers: tuple[str, ...] = ("User:bob",), issued: int = 0,
          max_ts: int = 7_000, expiry: int = 1_000, token_id: str = "t1") -> DelegationTokenRecord:
    return DelegationTokenRecord(token_id, owner, owner, renewers, issued, max_ts, expiry)


def code_of(call: Any) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call()
    return raised.value.code


# -- decisions --------------------------------------------------------------------------------------------------

def test_a_new_token_lives_the_expiry_time_and_never_past_the_max_lifetime() -> None:
    record = tokens.create(SETTINGS, 100, "t1", ALICE, BOB, [CAROL], max_lifetime_ms=-1)
    assert record == DelegationTokenRecord("t1", "User:alice", "User:bob", ("User:carol",), 100, 7_100, 1_100)
    shorter = tokens.create(SETTINGS, 100, "t2", ALICE, ALICE, [], max_lifetime_ms=500)
    assert (shorter.max_timestamp, shorter.expiry_timestamp) == (600, 600)
    longer = tokens.create(SETTINGS, 100, "t3", ALICE, ALICE, [], max_lifetime_ms=10**9)
    assert longer.max_timestamp == 7_100  # cut to delegation.token.max.lifetime.ms


def test_creation_refuses_non_user_renewers_and_works_only_with_a_secret() -> None:
    group = KafkaPrincipal("Group", "ops")
    assert code_of(lambda: tokens.create(SETTINGS, 0, "t", ALICE, ALICE, [group], -1)) == \
        ErrorCode.invalid_principal_type
    off = TokenSettings(None)
    assert code_of(lambda: tokens.create(off, 0, "t", ALICE, ALICE, [], -1)) == \
        ErrorCode.delegation_token_auth_disabled


def test_owner_and_renewers_renew_up_to_the_max_time_others_may_not() -> None:
    record = token()
    assert tokens.renew(SETTINGS, 500, record, BOB, -1).expiry_timestamp == 1_500  # the configured expiry time
    assert tokens.renew(SETTINGS, 500, record, ALICE, 200).expiry_timestamp == 700
    assert tokens.renew(SETTINGS, 500, record, ALICE, 10**9).expiry_timestamp == 1_500  # never longer than that
    near_end = token(max_ts=1_200, expiry=1_000)
    assert tokens.renew(SETTINGS, 900, near_end, ALICE, -1).expiry_timestamp == 1_200
    assert code_of(lambda: tokens.renew(SETTINGS, 500, record, CAROL, -1)) == ErrorCode.delegation_token_owner_mismatch
    assert code_of(lambda: tokens.renew(SETTINGS, 1_001, record, ALICE, -1)) == ErrorCode.delegation_token_expired


def test_expiring_at_once_deletes_the_token_a_period_moves_its_expiry() -> None:
    record = token()
    assert tokens.expire(500, record, BOB, -1) == RemoveDelegationTokenRecord("t1")
    assert tokens.expire(500, record, ALICE, 100).expiry_timestamp == 600  # type: ignore[union-attr]
    assert code_of(lambda: tokens.expire(500, record, CAROL, -1)) == ErrorCode.delegation_token_owner_mismatch


def test_a_token_is_found_by_its_hmac_only() -> None:
    records = [token(token_id="a"), token(token_id="b")]
    assert tokens.find_by_hmac(records, SECRET, token_hmac(SECRET, "b")).token_id == "b"
    assert code_of(lambda: tokens.find_by_hmac(records, SECRET, token_hmac("other", "b"))) == \
        ErrorCode.delegation_token_not_found
    assert len(token_hmac(SECRET, "a")) == 64  # HMAC-SHA512, as Kafka's


def test_the_sweep_deletes_exactly_the_tokens_past_their_expiry() -> None:
    records = [token(token_id="old", expiry=99), token(token_id="now", expiry=100), token(token_id="new", expiry=200)]
    assert tokens.expired(records, 100) == [RemoveDelegationTokenRecord("old")]


def test_who_sees_a_token_in_describe() -> None:
    record = DelegationTokenRecord("t", "User:alice", "User:dave", ("User:bob",), 0, 1, 1)

    def sees(who: KafkaPrincipal, owners: frozenset[str] | None = None, token_acl: bool = False,
             owner_acl: bool = False) -> bool:
        return tokens.visible_to(record, who, owners, lambda _: token_acl, lambda _: owner_acl)

    assert sees(ALICE) and sees(BOB) and sees(KafkaPrincipal.user("dave"))
    assert not sees(CAROL)
    assert sees(CAROL, token_acl=True) and sees(CAROL, owner_acl=True)  # DESCRIBE on it, DESCRIBE_TOKENS (KIP-373)
    assert not sees(ALICE, owners=frozenset({"User:bob"}))


def test_token_ids_are_kafka_shaped() -> None:
    assert len(tokens.new_token_id(bytes(16))) == 22


# -- the controller and the metadata image ------------------------------------------------------------------------

def test_the_controller_issues_renews_expires_and_sweeps_tokens_through_the_log() -> None:
    quorum = FakeQuorum(build([], []))
    ctl = Controller(quorum, node_id=1, rng=random.Random(7), token_settings=SETTINGS)  # type: ignore[arg-type]
    issued = run(ctl.create_delegation_token(1_000, ALICE, ALICE, [BOB], -1))
    assert quorum.image.delegation_tokens[issued.token_id] == issued
    hmac = token_hmac(SECRET, issued.token_id)
    assert run(ctl.renew_delegation_token(1_500, hmac, BOB, -1)) == 2_500
    assert run(ctl.expire_delegation_token(1_600, hmac, ALICE, 50)) == 1_650
    assert quorum.image.delegation_tokens[issued.token_id].expiry_timestamp == 1_650
    assert run(ctl.remove_expired_delegation_tokens(1_650)) == 0
    assert run(ctl.remove_expired_delegation_tokens(1_651)) == 1
    assert issued.token_id not in quorum.image.delegation_tokens
    with pytest.raises(KafkaError) as raised:
        run(ctl.renew_delegation_token(1_700, hmac, ALICE, -1))
    assert raised.value.code == ErrorCode.delegation_token_not_found


def test_a_controller_without_a_secret_refuses_every_token_change() -> None:
    ctl = Controller(FakeQuorum(build([], [])), node_id=1)  # type: ignore[arg-type]
    for call in (lambda: run(ctl.create_delegation_token(0, ALICE, ALICE, [], -1)),
                 lambda: run(ctl.renew_delegation_token(0, b"x", ALICE, -1)),
                 lambda: run(ctl.expire_delegation_token(0, b"x", ALICE, -1))):
        assert code_of(call) == ErrorCode.delegation_token_auth_disabled


def test_tokens_survive_a_snapshot_and_a_round_trip_through_the_log_encoding() -> None:
    record = token()
    image = MetadataImage().apply([record, token(token_id="t2"), RemoveDelegationTokenRecord("t2")], 2)
    assert dict(image.delegation_tokens) == {"t1": record}
    assert MetadataImage().apply(image.to_records(), 2).delegation_tokens == image.delegation_tokens
    assert decode_record(encode_record(record)) == record


# -- logging in with a token ----------------------------------------------------------------------------------------

def credentials(records: list[DelegationTokenRecord], now_ms: int = 500, secret: str | None = SECRET
                ) -> TokenCredentials:
    image = SimpleNamespace(delegation_tokens={r.token_id: r for r in records})
    return TokenCredentials(secret, lambda: image, lambda: now_ms)  # type: ignore[arg-type, return-value]


def password_of(token_id: str) -> str:
    return base64.b64encode(token_hmac(SECRET, token_id)).decode()


def scram_login(server: ScramServer, user: str, password: str, extension: str = ",tokenauth=true") -> None:
    """A SCRAM exchange as Kafka's Java client makes it with tokenauth="true"; raises AuthenticationFailed."""
    client = scramp.ScramClient([server.mechanism], user, password)
    first = client.get_client_first() + extension
    client.client_first_bare += extension
    client.set_server_first(server.evaluate(first.encode()).decode())
    client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_token_logs_in_as_its_owner_until_it_expires(mechanism: str) -> None:
    lookup = credentials([token()]).lookup
    server = ScramServer(mechanism, lambda m, u: None, lookup)
    scram_login(server, "t1", password_of("t1"))
    assert (server.authorization_id, server.token_authenticated, server.credential_expires_ms) == ("alice", True,
                                                                                                    1_000)
    with pytest.raises(AuthenticationFailed):
        scram_login(ScramServer(mechanism, lambda m, u: None, lookup), "t1", "wrong")
    with pytest.raises(AuthenticationFailed):
        scram_login(ScramServer(mechanism, lambda m, u: None, lookup), "t9", password_of("t9"))
    late = credentials([token()], now_ms=1_001).lookup
    with pytest.raises(AuthenticationFailed):
        scram_login(ScramServer(mechanism, lambda m, u: None, late), "t1", password_of("t1"))
    off = credentials([token()], secret=None).lookup
    with pytest.raises(AuthenticationFailed):
        scram_login(ScramServer(mechanism, lambda m, u: None, off), "t1", password_of("t1"))


def test_other_extensions_are_refused_and_without_tokenauth_the_name_is_a_user() -> None:
    lookup = credentials([token()]).lookup
    with pytest.raises(AuthenticationFailed):
        scram_login(ScramServer("SCRAM-SHA-256", lambda m, u: None, lookup), "t1", password_of("t1"),
                    ",tokenauth=true,other=1")
    with pytest.raises(AuthenticationFailed):  # the token id is not a SCRAM user
        scram_login(ScramServer("SCRAM-SHA-256", lambda m, u: None, lookup), "t1", password_of("t1"), "")
    salt, stored, server_key, i = scramp.ScramMechanism("SCRAM-SHA-256").make_auth_info("bob-secret", 4096)
    users = {("SCRAM-SHA-256", "bob"): ScramCredential(salt, stored, server_key, i)}
    user_server = ScramServer("SCRAM-SHA-256", lambda m, u: users.get((m, u)), lookup)
    scram_login(user_server, "bob", "bob-secret", ",tokenauth=false")
    assert (user_server.authorization_id, user_server.token_authenticated) == ("bob", False)


def test_a_token_credential_is_derived_once_and_forgotten_with_the_token() -> None:
    records = [token()]
    image = SimpleNamespace(delegation_tokens={"t1": records[0]})
    creds = TokenCredentials(SECRET, lambda: image, lambda: 0)  # type: ignore[arg-type, return-value]
    first, again = creds.lookup("SCRAM-SHA-256", "t1"), creds.lookup("SCRAM-SHA-256", "t1")
    assert first is not None and again is not None and first.credential is again.credential
    image.delegation_tokens = {}
    assert creds.lookup("SCRAM-SHA-256", "t1") is None
    assert not creds._cache


def test_the_session_of_a_token_login_ends_when_the_token_expires() -> None:
    clock = ManualClock(start_ms=500)
    config = SaslListenerConfig(("SCRAM-SHA-256",), {}, lambda m, u: None, 0, 0,
                                delegation_tokens=credentials([token()]).lookup)

    class Conn:
        principal = ANONYMOUS

    conn = Conn()
    auth = SaslAuthenticator(config, conn, clock)
    assert auth.handshake("SCRAM-SHA-256", 1).error_code == ErrorCode.none
    client = scramp.ScramClient(["SCRAM-SHA-256"], "t1", password_of("t1"))
    first = client.get_client_first() + ",tokenauth=true"
    client.client_first_bare += ",tokenauth=true"
    client.set_server_first(bytes(auth.evaluate(first.encode()).token).decode())
    result = auth.evaluate(client.get_client_final().encode())
    assert result.error_code == ErrorCode.none and result.session_lifetime_ms == 500
    assert conn.principal == ALICE and conn.principal.token_authenticated


# -- who may ask, and the Envelope ------------------------------------------------------------------------------

@pytest.mark.parametrize(("protocol", "principal", "enveloped", "allowed"), [
    ("SASL_PLAINTEXT", ALICE, False, True),
    ("SASL_SSL", ALICE, False, True),
    ("SSL", ALICE, False, True),  # a client certificate
    ("SSL", ANONYMOUS, False, False),  # one-way TLS
    ("PLAINTEXT", ANONYMOUS, False, False),
    ("PLAINTEXT", ALICE, True, True),  # forwarded: the broker that took it checked
    ("SASL_PLAINTEXT", KafkaPrincipal("User", "alice", token_authenticated=True), False, False),
    ("PLAINTEXT", KafkaPrincipal("User", "alice", token_authenticated=True), True, False),
])
def test_token_requests_need_a_connection_authenticated_without_a_token(
        protocol: str, principal: KafkaPrincipal, enveloped: bool, allowed: bool) -> None:
    ctx: Any = SimpleNamespace(principal=principal, enveloped=enveloped, security_protocol=protocol)
    assert token_requests_allowed(ctx) is allowed


def test_the_envelope_carries_the_principal_and_address_as_kafka_serializes_them() -> None:
    principal = KafkaPrincipal("User", "alice", token_authenticated=True)
    data = serialize_principal(principal)
    assert data[:2] == b"\x00\x00"  # DefaultPrincipalData's version first
    back = deserialize_principal(data)
    assert back == principal and back.token_authenticated
    for broken in (b"", b"\x00\x01" + data[2:], data[:5]):
        with pytest.raises(KafkaError) as raised:
            deserialize_principal(broken)
        assert raised.value.code == ErrorCode.principal_deserialization_failure
    assert host_text(host_bytes("10.1.2.3")) == "10.1.2.3" and host_text(host_bytes("::1")) == "::1"
    assert host_bytes("not-an-address") == b"" and host_text(b"\x01") == ""


def test_the_controller_refuses_envelopes_it_should_not_serve() -> None:
    from kio.schema.envelope.v0.request import EnvelopeRequest
    from kio.schema.metadata.v12.request import MetadataRequest
    from kio.schema.renew_delegation_token.v2.request import RenewDelegationTokenRequest
    from kio.static.primitive import i64Timedelta

    from moldau.net.client import encode_request
    from moldau.protocol import codec
    from moldau.server.context import RequestContext
    from moldau.server.handlers import envelope as handler

    def answer(inner: Any, principal: bytes, from_node: bool = True, active: bool = True) -> ErrorCode:
        broker: Any = SimpleNamespace(quorum=SimpleNamespace(is_active_controller=lambda: active))
        ctx = RequestContext(codec.RequestHeader(58, 0, 1, "node", 0), codec.api_schema(58, 0), broker, "peer",
                             True, "CONTROLLER", from_node=from_node)
        request = EnvelopeRequest(request_data=encode_request(inner, 5, "cli"), request_principal=principal,
                                  client_host_address=host_bytes("127.0.0.1"))
        response = asyncio.run(handler.handle(ctx, request))
        assert response.response_data is None
        return ErrorCode(response.error_code)

    alice = serialize_principal(ALICE)
    renew = RenewDelegationTokenRequest(hmac=b"x", renew_period=i64Timedelta.parse(datetime.timedelta(0)))
    assert answer(renew, alice, from_node=False) == ErrorCode.cluster_authorization_failed
    assert answer(renew, alice, active=False) == ErrorCode.not_controller
    assert answer(renew, b"\x00\x00junk") == ErrorCode.principal_deserialization_failure
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)
    assert answer(metadata, alice) == ErrorCode.invalid_request  # only token requests travel in an Envelope


@pytest.mark.parametrize("client_first", [
    "n,,n=t1,r=abc,tokenauth",  # an extension without a value
    "n,,n=t1,r=abc,,tokenauth=true",  # an empty attribute
    "n,,n=t1,r=abc," + ",".join(f"x{i}=1" for i in range(10_000)),  # a flood of extensions
    "n,,n=" + "t" * 100_000 + ",r=abc,tokenauth=true",  # a huge token id
    "n,,n=t1,tokenauth=true",  # no nonce
    "n,,tokenauth=true",  # nothing else
])
def test_malformed_token_logins_fail_authentication_and_nothing_else(client_first: str) -> None:
    server = ScramServer("SCRAM-SHA-256", lambda m, u: None, credentials([token()]).lookup)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(client_first.encode())
    assert not server.complete and not server.token_authenticated
