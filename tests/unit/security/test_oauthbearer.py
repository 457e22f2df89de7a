"""SASL/OAUTHBEARER: the client's message, the exchange, Kafka's two token validators, the JWKS key set, and the
session lifetime a token's expiry sets. Tokens are made with PyJWT and real RSA keys; time is a manual clock."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import http.client
import json

import jwt
import pytest
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from moldau.clock import ManualClock
from moldau.config import BrokerConfig, ConfigError
from moldau.protocol.errors import ErrorCode
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.sasl.authenticator import SaslAuthenticator, SaslListenerConfig, SaslState
from moldau.security.sasl.jwks import JwksError, JwksKeySet, check_url, parse_jwks, refresh_once
from moldau.security.sasl.mechanisms import AuthenticationFailed, credentials_failed
from moldau.security.sasl.oauthbearer import BearerToken, OAuthBearerServer, TokenRejected, parse_initial_response
from moldau.security.sasl.settings import JWKS_VALIDATORS, sasl_listener_config, token_validator
from moldau.security.sasl.tokens import (
    JwksTokenValidator,
    JwtExpectations,
    UnsecuredOptions,
    UnsecuredTokenValidator,
)
from tests.support.oauth import AUDIENCE, ISSUER, SigningKey, unsecured_token

NOW_S = 1_700_000_000


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in extensions.items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def clock() -> ManualClock:
    return ManualClock(NOW_S * 1000)


# -- the client's initial response -------------------------------------------------------------------------------

def test_initial_response_with_authzid_and_extensions() -> None:
    parsed = parse_initial_response(message("a.b.c", "al=2Cice", traceId="x y", cluster="c1"))
    assert parsed.token == "a.b.c" and parsed.authorization_id == "al,ice"
    assert parsed.extensions == {"traceId": "x y", "cluster": "c1"}


@pytest.mark.parametrize("raw", [
    b"", b"n,,\x01\x01", b"n,,\x01auth=Bearer\x01\x01", b"n,,\x01auth=Basic abc\x01\x01",
    b"y,,\x01auth=Bearer abc\x01\x01", b"n,,\x01auth=Bearer abc\x01", b"n,,\x01auth=Bearer a b\x01\x01",
    b"n,,\x01auth=Bearer abc\x01au th=1\x01\x01", b"n,,\x01auth=Bearer abc\x01x=1\x01x=2\x01\x01",
    b"n,,\x01auth=Bearer abc\x01k=\x01\x01", "n,,\x01auth=Bearer ab\u00e9\x01\x01".encode(),
    b"n,,\x01auth=Bearer " + b"a" * 70_000 + b"\x01\x01",
])
def test_malformed_initial_responses_are_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        parse_initial_response(raw)


# -- the exchange ------------------------------------------------------------------------------------------------

def unsecured(**options: str) -> UnsecuredTokenValidator:
    return UnsecuredTokenValidator(UnsecuredOptions.from_jaas(options), clock())


def test_a_valid_token_completes_with_an_empty_answer() -> None:
    server = OAuthBearerServer(unsecured())
    assert server.evaluate(message(unsecured_token("alice", now=NOW_S))) == b""
    assert server.complete and server.authorization_id == "alice"
    assert server.credential_expires_ms == (NOW_S + 300) * 1000


def test_a_refused_token_answers_json_then_fails_on_the_clients_control_a() -> None:
    server = OAuthBearerServer(unsecured())
    answer = server.evaluate(message(unsecured_token("alice", -10, now=NOW_S)))
    assert json.loads(answer) == {"status": "invalid_token"} and not server.complete
    with pytest.raises(AuthenticationFailed, match='"status":"invalid_token"'):
        server.evaluate(b"\x01")


def test_anything_but_control_a_after_a_refusal_fails_with_the_generic_message() -> None:
    server = OAuthBearerServer(unsecured())
    server.evaluate(message(unsecured_token("alice", -10, now=NOW_S)))
    with pytest.raises(AuthenticationFailed) as failed:
        server.evaluate(message(unsecured_token("alice", now=NOW_S)))
    assert str(failed.value) == credentials_failed("OAUTHBEARER")


def test_a_malformed_message_fails_at_once() -> None:
    with pytest.raises(AuthenticationFailed) as failed:
        OAuthBearerServer(unsecured()).evaluate(b"n,,auth=Bearer x")
    assert str(failed.value) == credentials_failed("OAUTHBEARER")


def test_an_authorization_id_must_name_the_tokens_principal() -> None:
    server = OAuthBearerServer(unsecured())
    server.evaluate(message(unsecured_token("alice", now=NOW_S), "alice"))
    assert server.complete
    with pytest.raises(AuthenticationFailed, match=r"authorization id \(bob\) .* principal name \(alice\)"):
        OAuthBearerServer(unsecured()).evaluate(message(unsecured_token("alice", now=NOW_S), "bob"))


def test_missing_scope_answers_insufficient_scope_with_the_required_scope() -> None:
    server = OAuthBearerServer(unsecured(unsecuredValidatorRequiredScope="kafka write"))
    answer = server.evaluate(message(unsecured_token("alice", now=NOW_S, scope=["kafka"])))
    assert json.loads(answer) == {"status": "insufficient_scope", "scope": "kafka write"}
    ok = OAuthBearerServer(unsecured(unsecuredValidatorRequiredScope="kafka write"))
    assert ok.evaluate(message(unsecured_token("alice", now=NOW_S, scope=["write", "kafka", "x"]))) == b""


# -- Kafka's unsecured validator ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("token", "reason"), [
    (unsecured_token("alice", now=NOW_S) + "sig", "must not contain a digital signature"),
    (unsecured_token("alice", now=NOW_S)[:-1], "3 dot-separated"),
    ("a..b", "'..'"),
    ("e30.e30.", "'none'"),  # {} header: no alg
    (unsecured_token("alice", now=NOW_S, exp=None), "No expiration time"),
    (unsecured_token("alice", now=NOW_S, exp="soon"), "not of type Number"),
    (unsecured_token("", now=NOW_S), "No principal name"),
    (unsecured_token("alice", -1, now=NOW_S), "on or after the Expiration Time"),
    (unsecured_token("alice", now=NOW_S, iat=NOW_S + 60), "Issued At value"),
    ("!!!.e30.", "base64"),
    ("W10.e30.", "JSON object"),  # [] header
    (unsecured_token("alice", now=NOW_S, exp=float("nan")), "not a time"),
    (unsecured_token("alice", now=NOW_S, exp=float("inf")), "not a time"),
    (unsecured_token("alice", now=NOW_S, exp=10**400), "not a time"),
    (unsecured_token("alice", now=NOW_S, iat=-(10**20)), "not a time"),
    (unsecured_token("alice", now=NOW_S, exp=True), "not of type Number"),
])
def test_unsecured_validator_refuses(token: str, reason: str) -> None:
    with pytest.raises(TokenRejected, match=reason):
        unsecured().validate(token)


def test_unsecured_options_name_the_principal_claim_and_allow_clock_skew() -> None:
    validator = unsecured(unsecuredValidatorPrincipalClaimName="user", unsecuredValidatorAllowableClockSkewMs="5000")
    token = validator.validate(unsecured_token("ignored", 97, now=NOW_S - 100, user="carol"))  # expired 3 s ago
    assert token.principal == "carol"
    with pytest.raises(TokenRejected, match="Expiration Time"):
        validator.validate(unsecured_token("ignored", 94, now=NOW_S - 100, user="carol"))


@pytest.mark.parametrize("skew", ["-1", "x", "1.5"])
def test_unsecured_options_refuse_a_bad_clock_skew(skew: str) -> None:
    with pytest.raises(ValueError):
        UnsecuredOptions.from_jaas({"unsecuredValidatorAllowableClockSkewMs": skew})


# -- Kafka's JWKS validator --------------------------------------------------------------------------------------

KEY = SigningKey("k1")


def key_set(*keys: SigningKey, at: ManualClock | None = None) -> JwksKeySet:
    keys_ = JwksKeySet("http://idp/jwks", at or clock())
    keys_.fetched(json.dumps({"keys": [k.jwk() for k in (keys or (KEY,))]}).encode())
    return keys_


def signed(expect: JwtExpectations | None = None, keys: JwksKeySet | None = None) -> JwksTokenValidator:
    return JwksTokenValidator(keys or key_set(), expect or JwtExpectations((AUDIENCE,), ISSUER), clock())


def test_jwks_validator_accepts_a_signed_token() -> None:
    token = signed().validate(KEY.token("alice", now=NOW_S, scope="read"))
    assert (token.principal, token.expires_ms, token.scope) == ("alice", (NOW_S + 300) * 1000, frozenset({"read"}))


@pytest.mark.parametrize(("token", "reason"), [
    (SigningKey("k1").token("alice", now=NOW_S), "Signature verification failed"),  # same kid, other key
    (SigningKey("k9").token("alice", now=NOW_S), "no verification key for kid 'k9'"),
    (KEY.token("alice", now=NOW_S, aud="other"), "Audience"),
    (KEY.token("alice", now=NOW_S, aud=None), "No Audience"),
    (KEY.token("alice", now=NOW_S, iss="https://evil"), "Issuer"),
    (KEY.token("alice", now=NOW_S, iat=None), "Issued At"),
    (KEY.token("alice", now=NOW_S, exp=None), "Expiration Time"),
    (KEY.token("alice", -31, now=NOW_S), "no longer valid"),
    (KEY.token("alice", now=NOW_S, nbf=NOW_S + 31), "not yet valid"),
    (KEY.token("", now=NOW_S), "No principal name"),
    (KEY.token(["alice"], now=NOW_S), "Subject must be a string"),
    (KEY.token("alice", now=NOW_S, exp=10**400), "not a time"),
    (KEY.token("alice", now=NOW_S, nbf=float("nan")), "not a time"),
    (unsecured_token("alice", now=NOW_S), "expected three sections"),
    (unsecured_token("alice", now=NOW_S) + "c2ln", "alg none"),
    ("a.b.c", "malformed JWT header"),
])
def test_jwks_validator_refuses(token: str, reason: str) -> None:
    with pytest.raises(TokenRejected, match=reason):
        signed().validate(token)


def test_jwks_validator_allows_clock_skew_and_checks_what_is_configured_only() -> None:
    assert signed().validate(KEY.token("alice", -29, now=NOW_S)).principal == "alice"
    loose = signed(JwtExpectations())
    assert loose.validate(KEY.token("alice", now=NOW_S, aud="other", iss="any")).principal == "alice"
    by_claim = signed(JwtExpectations(sub_claim="email", scope_claim="scp"))
    token = by_claim.validate(KEY.token("ignored", now=NOW_S, email="a@x", scp=["a", "b"]))
    assert token.principal == "a@x" and token.scope == {"a", "b"}


def test_hmac_with_the_public_key_is_refused() -> None:
    """An attacker signing HS256 with the provider's public key (key confusion) is not accepted."""
    public = KEY.private.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)

    def part(value: object) -> bytes:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")

    signing_input = part({"alg": "HS256", "kid": "k1"}) + b"." + part({"sub": "admin", "iat": NOW_S,
                                                                      "exp": NOW_S + 60})
    mac = base64.urlsafe_b64encode(hmac.new(public, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    forged = (signing_input + b"." + mac).decode()
    with pytest.raises(TokenRejected):
        signed(JwtExpectations()).validate(forged)


def test_a_token_without_kid_uses_the_only_key_that_can_sign_it() -> None:
    token = jwt.encode({"sub": "alice", "iat": NOW_S, "exp": NOW_S + 60}, KEY.private, algorithm="RS256")
    assert signed(JwtExpectations()).validate(token).principal == "alice"
    two = key_set(KEY, SigningKey("k2"))
    with pytest.raises(TokenRejected, match="no verification key"):
        signed(JwtExpectations(), two).validate(token)


# -- the key set -------------------------------------------------------------------------------------------------

def test_key_set_refreshes_on_schedule_and_backs_off_after_failures() -> None:
    at = clock()
    keys = JwksKeySet("http://idp/jwks", at, refresh_ms=60_000, backoff_ms=100, backoff_max_ms=1000)
    assert keys.fetch_in_ms() == 0
    delays = []
    for _ in range(6):
        keys.fetch_failed()
        delays.append(keys.fetch_in_ms())
    assert delays == [100, 200, 400, 800, 1000, 1000]
    keys.fetched(json.dumps({"keys": [KEY.jwk()]}).encode())
    assert keys.loaded and keys.fetch_in_ms() == 60_000 and keys.key_ids == ("k1",)
    keys.fetch_failed()
    assert keys.fetch_in_ms() == 100, "a success resets the backoff"
    assert keys.verification_key("k1", "RS256") is not None, "a failed fetch keeps the keys held"


def test_an_unknown_kid_asks_for_a_fetch_at_most_once_a_second() -> None:
    at = clock()
    keys = key_set(at=at)
    woken: list[int] = []
    keys.on_wanted = lambda: woken.append(1)
    assert keys.verification_key("new", "RS256") is None
    assert keys.fetch_in_ms() == 0 and woken == [1]
    keys.fetched(json.dumps({"keys": [KEY.jwk()]}).encode())
    assert keys.verification_key("other", "RS256") is None
    assert keys.fetch_in_ms() > 0 and woken == [1], "within a second of the last one: no fetch"
    at.advance(1000)
    assert keys.verification_key("x" * 300, "RS256") is None and woken == [1], "absurd key ids fetch nothing"
    assert keys.verification_key("other", "RS256") is None and woken == [1, 1]


def test_a_key_is_used_only_with_its_algorithm() -> None:
    keys = key_set()
    assert keys.verification_key("k1", "RS256") is not None
    assert keys.verification_key("k1", "RS384") is None  # the JWK says alg RS256
    loose = JwksKeySet("file:/k", clock())
    loose.fetched(json.dumps({"keys": [{k: v for k, v in KEY.jwk().items() if k != "alg"}]}).encode())
    assert loose.verification_key("k1", "RS384") is not None
    assert loose.verification_key("k1", "ES256") is None


@pytest.mark.parametrize("document", [
    b"not json", b"[]", b'{"keys": 1}', b'{"keys": []}', b'{"keys": [{"kty": "nope"}]}',
    json.dumps({"keys": [{**KEY.jwk(), "use": "enc"}]}).encode(),
])
def test_unusable_documents_are_refused_and_retried(document: bytes) -> None:
    with pytest.raises(JwksError):
        parse_jwks(document)
    keys = JwksKeySet("http://idp/jwks", clock(), backoff_ms=250)
    with pytest.raises(JwksError):
        keys.fetched(document)
    assert keys.fetch_in_ms() == 250 and not keys.loaded


@pytest.mark.parametrize("url", ["ftp://x/jwks", "jwks.json", "javascript:alert(1)"])
def test_only_https_http_and_file_urls(url: str) -> None:
    with pytest.raises(ValueError, match="unsupported URL scheme"):
        check_url(url)


# -- the session a token's expiry bounds -------------------------------------------------------------------------

class Conn:
    principal: KafkaPrincipal = ANONYMOUS


@pytest.mark.parametrize(("reauth_ms", "lifetime_s", "expected_ms"), [
    (0, 300, 300_000), (60_000, 300, 60_000), (600_000, 300, 300_000)])
def test_the_session_ends_with_the_token_at_the_latest(reauth_ms: int, lifetime_s: int, expected_ms: int) -> None:
    at = clock()
    config = SaslListenerConfig(("OAUTHBEARER",), {}, lambda m, u: None, reauth_ms,
                                token_validator=UnsecuredTokenValidator(UnsecuredOptions(), at))
    sasl = SaslAuthenticator(config, Conn(), at)
    sasl.handshake("OAUTHBEARER", 1)
    result = sasl.evaluate(message(unsecured_token("alice", lifetime_s, now=NOW_S)))
    assert result.error_code == ErrorCode.none and result.session_lifetime_ms == expected_ms
    assert sasl.principal == KafkaPrincipal.user("alice") and sasl.state is SaslState.COMPLETE
    at.advance(expected_ms - 1)
    assert not sasl.session_expired()
    at.advance(1)
    assert sasl.session_expired()


def test_a_refused_token_fails_the_connection_after_control_a() -> None:
    at = clock()
    config = SaslListenerConfig(("OAUTHBEARER",), {}, lambda m, u: None,
                                token_validator=UnsecuredTokenValidator(UnsecuredOptions(), at))
    sasl = SaslAuthenticator(config, Conn(), at)
    sasl.handshake("OAUTHBEARER", 1)
    challenge = sasl.evaluate(message(unsecured_token("alice", -5, now=NOW_S)))
    assert challenge.error_code == ErrorCode.none and b"invalid_token" in challenge.token
    failed = sasl.evaluate(b"\x01")
    assert failed.error_code == ErrorCode.sasl_authentication_failed
    assert failed.error_message == '{"status":"invalid_token"}' and sasl.close_after_response


# -- settings ----------------------------------------------------------------------------------------------------

def broker(**settings: str) -> BrokerConfig:
    return BrokerConfig.from_properties({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092",
        "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "OAUTHBEARER", **settings})


HANDLER = "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class"


def test_settings_default_to_the_unsecured_validator_with_the_jaas_options() -> None:
    config = broker(**{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                       "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                       'unsecuredValidatorPrincipalClaimName="user";'})
    listener = sasl_listener_config(config, "SASL_PLAINTEXT", lambda m, u: None, clock=clock())
    assert listener.mechanisms == ("OAUTHBEARER",)
    assert isinstance(listener.token_validator, UnsecuredTokenValidator)
    assert listener.token_validator.validate(unsecured_token("x", now=NOW_S, user="u")).principal == "u"


def test_settings_for_signed_tokens_share_one_key_set_per_url() -> None:
    config = broker(**{HANDLER: JWKS_VALIDATORS[1], "sasl.oauthbearer.jwks.endpoint.url": "http://idp/jwks",
                       "sasl.oauthbearer.expected.audience": "a,b",
                       "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "me",
                       "sasl.oauthbearer.jwks.endpoint.refresh.ms": "5000"})
    sets: dict[str, JwksKeySet] = {}
    first = token_validator(config, "SASL_PLAINTEXT", clock(), sets)
    token_validator(config, "SASL_PLAINTEXT", clock(), sets)
    assert list(sets) == ["http://idp/jwks"] and isinstance(first, JwksTokenValidator)
    assert first._expect == JwtExpectations(("a", "b"), "me")


@pytest.mark.parametrize(("settings", "message_part"), [
    ({HANDLER: "com.example.MyHandler"}, "cannot be used"),
    ({HANDLER: JWKS_VALIDATORS[0]}, "needs sasl.oauthbearer.jwks.endpoint.url"),
    ({HANDLER: JWKS_VALIDATORS[0], "sasl.oauthbearer.jwks.endpoint.url": "ldap://x"}, "unsupported URL scheme"),
    ({HANDLER: JWKS_VALIDATORS[0], "sasl.oauthbearer.jwks.endpoint.url": "http://x",
      "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.clock.skew.seconds": "-1"}, "clock.skew"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
      'unsecuredValidatorAllowableClockSkewMs="-5";'}, "must not be negative"),
])
def test_settings_that_cannot_work_are_refused_at_start(settings: dict[str, str], message_part: str) -> None:
    with pytest.raises(ConfigError, match=message_part):
        sasl_listener_config(broker(**settings), "SASL_PLAINTEXT", lambda m, u: None, clock=clock())


def test_a_validator_that_breaks_refuses_the_token_and_says_so_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def validate(self, token: str) -> BearerToken:
            raise RecursionError("deeply nested claims")

    with pytest.raises(AuthenticationFailed, match="internal error on the server"):
        OAuthBearerServer(Broken()).evaluate(message("a.b.c"))
    assert "deeply nested claims" in caplog.text


@pytest.mark.parametrize("error", [JwksError("too large"), OSError("refused"), http.client.IncompleteRead(b"")])
def test_a_failed_fetch_backs_off_whatever_it_raised(error: Exception) -> None:
    """Never a tight loop of fetches: every failure schedules the next attempt after the backoff."""
    keys = JwksKeySet("http://idp/jwks", clock(), backoff_ms=250)

    def fetch(url: str) -> bytes:
        raise error

    assert asyncio.run(refresh_once(keys, fetch)) is False
    assert keys.fetch_in_ms() == 250 and not keys.loaded
    assert asyncio.run(refresh_once(keys, lambda url: json.dumps({"keys": [KEY.jwk()]}).encode())) is True
    assert keys.loaded and keys.key_ids == ("k1",)
