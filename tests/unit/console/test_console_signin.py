"""The console's sessions (idle timeout, bound, sign-out) with a fake clock, and the sign-in pieces that need no
browser: a cluster that cannot be reached is a 502, not "sign-in failed"; the cross-site check; where to go after
signing in."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from starlette.requests import Request

from moldau.config import BrokerConfig
from moldau.console.clients import ClientFactory, Credentials
from moldau.console.cluster_access import ListenerAccess
from moldau.console.sessions import SessionStore
from moldau.console.signin import SignIn, SignInFailed, local_path, same_origin
from moldau.net.ports import free_port

ALICE = Credentials("PLAIN", "alice", "alice-secret")
BOB = Credentials("SCRAM-SHA-512", "bob", "bob-secret")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(clock: Clock, **kwargs: float) -> SessionStore:
    tokens = (f"t{i}" for i in itertools.count())
    return SessionStore(clock, new_token=lambda: next(tokens), **kwargs)  # type: ignore[arg-type]


def test_a_session_lives_while_used_and_ends_after_the_idle_timeout() -> None:
    clock = Clock()
    sessions = store(clock, idle_timeout_s=60)
    session, ended = sessions.create(ALICE)
    assert ended == [] and session.token == "t0"
    clock.now += 59
    assert sessions.get("t0") is session  # using it restarts the idle time
    clock.now += 59
    assert sessions.get("t0") is session
    clock.now += 61
    assert sessions.get("t0") is None
    assert len(sessions) == 0
    assert sessions.get("no-such-token") is None and sessions.get(None) is None


def test_the_least_recently_used_session_makes_way_past_the_bound() -> None:
    clock = Clock()
    sessions = store(clock, max_sessions=2)
    first, _ = sessions.create(ALICE)
    second, _ = sessions.create(BOB)
    clock.now += 1
    sessions.get(first.token)  # now the second is the least recently used
    third, ended = sessions.create(Credentials("PLAIN", "carol", "c"))
    assert ended == [BOB]
    assert sessions.get(second.token) is None
    assert sessions.get(first.token) is first and sessions.get(third.token) is third


def test_signing_out_forgets_the_session_and_the_users_clients_when_no_other_session_has_them() -> None:
    clock = Clock()
    factory = ClientFactory({"bootstrap.servers": "127.0.0.1:1"}, secured=True)
    signin = SignIn(factory, store(clock))
    one, two = signin.start(ALICE), signin.start(ALICE)
    clients = factory.for_user(ALICE)
    signin.end(one)
    assert factory.for_user(ALICE) is clients  # the other session still uses them
    signin.end(two)
    assert factory.for_user(ALICE) is not clients
    assert signin.sessions.get(two) is None


def test_a_session_that_timed_out_lets_its_users_clients_go_at_the_next_request() -> None:
    clock = Clock()
    factory = ClientFactory({"bootstrap.servers": "127.0.0.1:1"}, secured=True)
    signin = SignIn(factory, store(clock, idle_timeout_s=60))
    alice, bob = signin.start(ALICE), signin.start(BOB)
    alice_clients, bob_clients = factory.for_user(ALICE), factory.for_user(BOB)
    clock.now += 30
    assert signin.session(bob) is not None  # bob keeps using the console, alice does not
    clock.now += 40
    assert signin.session(bob) is not None  # any request ends alice's idle session ...
    assert factory.for_user(ALICE) is not alice_clients  # ... and closes her pooled connections
    assert factory.for_user(BOB) is bob_clients
    assert signin.session(alice) is None


def test_a_cluster_that_cannot_be_reached_is_a_502_not_a_wrong_password() -> None:
    access = ListenerAccess("127.0.0.1", free_port(), "SASL_PLAINTEXT", ("PLAIN",))
    signin = SignIn(ClientFactory({}, secured=True, access=access))
    with pytest.raises(SignInFailed) as failed:
        asyncio.run(signin.check(ALICE))
    assert failed.value.status == 502 and "cannot reach the cluster" in failed.value.message
    with pytest.raises(SignInFailed) as refused:
        asyncio.run(signin.check(BOB))  # a mechanism the listener does not enable
    assert refused.value.status == 400


def request(headers: dict[str, str], scheme: str = "http") -> Request:
    return Request({"type": "http", "method": "POST", "scheme": scheme, "path": "/acls", "query_string": b"",
                    "server": ("127.0.0.1", 8080),
                    "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()]})


@pytest.mark.parametrize(("headers", "allowed"), [
    ({"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:8080"}, True),
    ({"host": "127.0.0.1:8080", "referer": "http://127.0.0.1:8080/acls?x=1"}, True),
    ({"host": "127.0.0.1:8080"}, True),  # no Origin nor Referer: not a browser's cross-site request
    ({"host": "127.0.0.1:8080", "origin": "http://evil.example"}, False),
    ({"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:9999"}, False),
    ({"host": "127.0.0.1:8080", "origin": "https://127.0.0.1:8080"}, False),
    ({"host": "127.0.0.1:8080", "origin": "null"}, False),
    ({"host": "127.0.0.1:8080", "referer": "http://evil.example/"}, False),
])
def test_state_changing_requests_must_come_from_the_console_itself(headers: dict[str, str], allowed: bool) -> None:
    assert same_origin(request(headers)) is allowed


@pytest.mark.parametrize(("target", "path"), [
    ("/topics/orders?x=1", "/topics/orders?x=1"), (None, "/"), ("", "/"), ("https://evil.example/", "/"),
    ("//evil.example/", "/"), ("/\\evil.example", "/"), ("topics", "/"),
])
def test_after_signing_in_the_console_only_goes_to_its_own_pages(target: str | None, path: str) -> None:
    assert local_path(target) == path


def test_a_password_never_shows_in_a_repr() -> None:
    assert "alice-secret" not in repr(ALICE) and "alice-secret" not in repr(SessionStore(Clock()).create(ALICE)[0])


def test_sign_in_offers_only_the_password_mechanisms_of_the_listener() -> None:
    """OAUTHBEARER's tokens come from an identity provider: the sign-in form cannot offer it."""
    config = BrokerConfig.from_properties({
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9094", "sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-512"})
    access = ListenerAccess.for_listener(config, "SASL_PLAINTEXT", "127.0.0.1", 9094)
    assert access.mechanisms == ("SCRAM-SHA-512",)
