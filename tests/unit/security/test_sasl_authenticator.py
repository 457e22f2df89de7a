"""The per-connection SASL state machine, with scramp's client on the other side."""

import pytest
import scramp

from moldau.clock import ManualClock
from moldau.protocol.errors import ErrorCode
from moldau.security.principal import ANONYMOUS, KafkaPrincipal
from moldau.security.sasl.authenticator import (
    IllegalSaslState,
    SaslAuthenticator,
    SaslListenerConfig,
    SaslState,
)
from moldau.security.sasl.mechanisms import PLAIN_FAILED, credentials_failed
from moldau.security.sasl.scram import ScramCredential

PRODUCE, METADATA, API_VERSIONS, HANDSHAKE, AUTHENTICATE = 0, 3, 18, 17, 36


class Conn:
    principal: KafkaPrincipal = ANONYMOUS


def _credentials() -> dict[tuple[str, str], ScramCredential]:
    out = {}
    for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        salt, stored, server, i = scramp.ScramMechanism(mech).make_auth_info("bob-secret", 4096)
        out[(mech, "bob")] = ScramCredential(salt, stored, server, i)
    return out


CREDS = _credentials()


def _auth(mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), reauth_ms: int = 0,
          clock: ManualClock | None = None) -> tuple[SaslAuthenticator, Conn, ManualClock]:
    clock = clock or ManualClock()
    conn = Conn()
    users = {"alice": "alice-secret", "carol": "carol-secret"}
    config = SaslListenerConfig(mechanisms, users, lambda m, u: CREDS.get((m, u)), reauth_ms, 100)
    return SaslAuthenticator(config, conn, clock), conn, clock


def test_only_api_versions_and_sasl_before_authentication() -> None:
    auth, _, _ = _auth()
    auth.check_request(API_VERSIONS)
    auth.check_request(HANDSHAKE)
    for key in (PRODUCE, METADATA):
        with pytest.raises(IllegalSaslState):
            auth.check_request(key)


def test_plain_framed_success_sets_principal() -> None:
    auth, conn, _ = _auth()
    assert auth.handshake("PLAIN", 1).error_code == ErrorCode.none
    assert auth.authenticate_request() is None and not auth.expects_bare_token
    result = auth.evaluate(b"\0alice\0alice-secret")
    assert result.error_code == ErrorCode.none and result.session_lifetime_ms == 0
    assert conn.principal == KafkaPrincipal.user("alice") and auth.state is SaslState.COMPLETE
    auth.check_request(PRODUCE)


@pytest.mark.parametrize("token", [b"\0alice\0wrong", b"\0mallory\0alice-secret", b"alice\0alice-secret"])
def test_plain_refused(token: bytes) -> None:
    auth, conn, _ = _auth()
    auth.handshake("PLAIN", 1)
    result = auth.evaluate(token)
    assert result.error_code == ErrorCode.sasl_authentication_failed
    assert result.delay_ms == 100 and auth.close_after_response and conn.principal == ANONYMOUS
    if token.startswith(b"\0"):
        assert result.error_message == PLAIN_FAILED


def test_unframed_exchange_after_handshake_v0() -> None:
    auth, _, _ = _auth()
    auth.handshake("PLAIN", 0)
    assert auth.expects_bare_token
    assert auth.authenticate_request() is not None  # SaslAuthenticate is illegal in the unframed exchange
    auth2, conn2, _ = _auth()
    auth2.handshake("PLAIN", 0)
    assert auth2.evaluate(b"\0alice\0alice-secret").error_code == ErrorCode.none
    assert conn2.principal.name == "alice" and not auth2.expects_bare_token


def test_unsupported_mechanism_lists_enabled_ones() -> None:
    auth, _, _ = _auth(("SCRAM-SHA-512",))
    result = auth.handshake("PLAIN", 1)
    assert result.error_code == ErrorCode.unsupported_sasl_mechanism
    assert result.mechanisms == ("SCRAM-SHA-512",) and auth.close_after_response


def test_authenticate_before_handshake_is_illegal() -> None:
    auth, _, _ = _auth()
    refused = auth.authenticate_request()
    assert refused is not None and refused.error_code == ErrorCode.illegal_sasl_state


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("user,password,ok", [("bob", "bob-secret", True), ("bob", "nope", False),
                                               ("nobody", "bob-secret", False)])
def test_scram(mech: str, user: str, password: str, ok: bool) -> None:
    auth, conn, _ = _auth()
    assert auth.handshake(mech, 1).error_code == ErrorCode.none
    client = scramp.ScramClient([mech], user, password)
    first = auth.evaluate(client.get_client_first().encode())
    if user == "nobody":
        assert first.error_code == ErrorCode.sasl_authentication_failed
        assert first.error_message == credentials_failed(mech)
        return
    assert first.error_code == ErrorCode.none
    client.set_server_first(first.token.decode())
    final = auth.evaluate(client.get_client_final().encode())
    if not ok:
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert final.error_message == credentials_failed(mech)
        assert conn.principal == ANONYMOUS
        return
    assert final.error_code == ErrorCode.none
    client.set_server_final(final.token.decode())  # the server proved it knows the credential
    assert conn.principal == KafkaPrincipal.user("bob")


def test_session_expiry_and_reauthentication() -> None:
    auth, conn, clock = _auth(reauth_ms=1000)
    auth.handshake("PLAIN", 1)
    assert auth.evaluate(b"\0alice\0alice-secret").session_lifetime_ms == 1000
    clock.advance(999)
    auth.check_request(PRODUCE)
    clock.advance(1)
    with pytest.raises(IllegalSaslState):
        auth.check_request(PRODUCE)
    auth.check_request(HANDSHAKE)
    assert auth.handshake("PLAIN", 1).error_code == ErrorCode.none
    assert auth.evaluate(b"\0alice\0alice-secret").error_code == ErrorCode.none
    auth.check_request(PRODUCE)
    assert conn.principal.name == "alice"


def test_reauthentication_cannot_change_principal_or_mechanism() -> None:
    auth, _, _ = _auth()
    auth.handshake("PLAIN", 1)
    auth.evaluate(b"\0alice\0alice-secret")
    assert auth.handshake("SCRAM-SHA-256", 1).error_code == ErrorCode.unsupported_sasl_mechanism
    auth, _, _ = _auth()
    auth.handshake("PLAIN", 1)
    auth.evaluate(b"\0alice\0alice-secret")
    auth.handshake("PLAIN", 1)
    assert auth.evaluate(b"\0carol\0carol-secret").error_code == ErrorCode.sasl_authentication_failed
