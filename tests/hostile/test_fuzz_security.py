"""Hostile input on secured listeners, against a real broker: every API's frames, valid and mangled, sent to a
SASL listener before authenticating; random SCRAM tokens; random and malicious OAUTHBEARER messages and tokens;
garbage and cut-off handshakes on a TLS listener.

What must hold: before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are ever answered
(anything else closes the connection, with nothing said); nothing hangs; the broker keeps serving real clients
on every listener; failed TLS handshakes are logged, but not without bound.
"""

from __future__ import annotations

import base64
import os
import random
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from moldau.net.ports import free_ports
from moldau.protocol import codec
from moldau.protocol.errors import ErrorCode
from tests.hostile.frames import KINDS, make_frame
from tests.hostile.test_fuzz_frames import read_frame
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.oauth import unsecured_token
from tests.support.raw_client import RawClient
from tests.support.sasl import JAAS, MECHANISMS, USERS, can_authenticate, ck_conf, create_scram_users, records
from tests.support.tls import Pki, make_pki

SEED = int(os.environ.get("MOLDAU_FUZZ_SEED", "20261124"))
SASL_FRAMES = int(os.environ.get("MOLDAU_FUZZ_SASL_FRAMES", "1500"))
TLS_CONNECTIONS = int(os.environ.get("MOLDAU_FUZZ_TLS_CONNECTIONS", "300"))
ANSWER_TIMEOUT_S = 10.0
PRE_AUTH_KEYS = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate
LOG_PER_MINUTE = 20  # moldau.security.tls: failed handshakes logged per listener and minute


@dataclass
class SecuredBroker:
    proc: BrokerProcess
    pki: Pki
    plain: str
    sasl: str
    tls: str


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    directory = tmp_path_factory.mktemp("fuzz-security")
    pki = make_pki(directory / "pki")
    plain, sasl, tls = free_ports(3)
    proc = BrokerProcess(directory, {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{tls}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join([*MECHANISMS, "OAUTHBEARER"]),  # Kafka's unsecured validator
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connection.failed.authentication.delay.ms": "20",
        **pki.broker_config(client_auth="required"),
    }, port=plain)
    proc.start()
    try:
        broker = SecuredBroker(proc, pki, proc.bootstrap, f"127.0.0.1:{sasl}", f"127.0.0.1:{tls}")
        create_scram_users(broker.sasl, USERS)
        yield broker
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def client_api_schemas(bootstrap: str) -> list[codec.ApiSchema]:
    """Every (API, version) the broker's client listeners serve: asked over the SASL listener, where ApiVersions
    is one of the three requests allowed before authentication."""
    with RawClient(bootstrap) as client:
        response = client.request(ApiVersionsRequest(client_software_name="fuzz", client_software_version="1"))
    assert response.error_code == ErrorCode.none
    return [codec.api_schema(k.api_key, v) for k in response.api_keys for v in range(k.min_version, k.max_version + 1)]


def send_alone(address: str, data: bytes) -> list[bytes]:
    """Send `data` on a new connection, half-close it, and return every response frame until the broker closes."""
    host, port = address.split(":")
    frames = []
    with socket.create_connection((host, int(port)), timeout=ANSWER_TIMEOUT_S) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while (frame := read_frame(sock)) is not None:
            frames.append(frame)
    return frames


def test_before_authentication_only_the_three_sasl_apis_are_answered(secured: SecuredBroker) -> None:
    rng = random.Random(SEED)
    schemas = client_api_schemas(secured.sasl)
    failures: list[str] = []
    answered_other = 0
    for i in range(SASL_FRAMES):
        schema, kind = rng.choice(schemas), rng.choice(KINDS)
        frame = make_frame(schema, kind, 100 + i, rng)
        try:
            responses = send_alone(secured.sasl, frame.data)
        except TimeoutError:
            failures.append(f"api {frame.api_key} v{frame.version} {kind}: neither answered nor closed")
            continue
        if responses and frame.api_key not in PRE_AUTH_KEYS:
            answered_other += 1
            failures.append(f"api {frame.api_key} v{frame.version} {kind}: answered before authentication")
    assert not failures, f"{len(failures)} of {SASL_FRAMES} (seed {SEED}): {failures[:10]}"
    assert answered_other == 0
    assert_still_serving(secured)


def test_random_scram_tokens_fail_authentication_and_nothing_else(secured: SecuredBroker) -> None:
    rng = random.Random(SEED + 1)
    client_first = b"n,,n=bob,r=" + b"a" * 24
    for i in range(200):
        token = rng.randbytes(rng.choice((0, 1, 8, 64, 1000)))
        # Every other time a proper client-first message comes first, and the mangled token is the final one.
        prefix = [SaslAuthenticateRequest(auth_bytes=client_first)] if i % 2 else []
        with RawClient(secured.sasl, timeout_s=ANSWER_TIMEOUT_S) as client:
            assert client.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == ErrorCode.none
            for request in prefix:
                assert client.request(request).error_code == ErrorCode.none
            answer = client.request(SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code == ErrorCode.sasl_authentication_failed, (i, token[:40])
    assert_still_serving(secured)


def hostile_oauth_message(rng: random.Random) -> bytes:
    """An OAUTHBEARER initial response that must not authenticate: noise, a broken frame around a good token, or
    a well-framed unsigned token whose claims are wrong in type, size or value."""
    choice = rng.randrange(4)
    if choice == 0:
        return rng.randbytes(rng.choice((0, 1, 8, 64, 1000, 60_000)))
    if choice == 1:
        good = f"n,,\x01auth=Bearer {unsecured_token('alice')}\x01\x01".encode()
        cut = rng.randrange(len(good) - 1)  # never the whole message, and NUL is never allowed
        return good[:cut] + b"\x00" * rng.randrange(0, 3)
    if choice == 2:  # base64 of random bytes in the JWT's parts
        parts = [base64.urlsafe_b64encode(rng.randbytes(rng.randrange(0, 300))).rstrip(b"=") for _ in range(3)]
        return b"n,,\x01auth=Bearer " + b".".join(parts[: rng.randrange(1, 4)]) + b"\x01\x01"
    weird: list[Any] = [float("nan"), float("inf"), 10**400, -(10**20), "soon", [1, 2], {"a": 1}, True, ""]
    claim = rng.choice(["exp", "iat", "sub", "scope"])
    if claim == "sub":
        token = unsecured_token(rng.choice([w for w in weird if w != "soon"] + [None, "   "]))
    elif claim == "scope":  # a scope of any shape leaves a valid token: make it expired as well
        token = unsecured_token("alice", -3600, now=time.time() - 7200, scope=rng.choice(weird))
    else:
        token = unsecured_token("alice", **{claim: rng.choice(weird)})
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def test_hostile_oauthbearer_messages_never_authenticate(secured: SecuredBroker) -> None:
    rng = random.Random(SEED + 2)
    for i in range(200):
        token = hostile_oauth_message(rng)
        with RawClient(secured.sasl, timeout_s=ANSWER_TIMEOUT_S) as client:
            assert client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER")).error_code == ErrorCode.none
            answer = client.request(SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code == ErrorCode.none:  # a refused token: the JSON error, then 0x01 fails
                assert answer.auth_bytes.startswith(b'{"status":"'), (i, token[:80], answer.auth_bytes)
                answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\x01"))
            assert answer.error_code == ErrorCode.sasl_authentication_failed, (i, token[:80])
            assert client.is_closed_by_peer()
    assert_still_serving(secured)
    assert "could not be validated" not in secured.proc.log_path.read_text(errors="replace")


def client_hello(pki: Pki) -> bytes:
    """The first flight of a real TLS client, to cut short or corrupt."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = pki.client_context().wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def garbage(rng: random.Random, hello: bytes) -> bytes:
    choice = rng.randrange(5)
    if choice == 0:
        return rng.randbytes(rng.randrange(1, 20_000))
    if choice == 1:  # a TLS record header announcing a handshake, then noise
        return b"\x16\x03\x01" + struct.pack(">H", rng.randrange(1, 2**14)) + rng.randbytes(rng.randrange(0, 2000))
    if choice == 2:
        return hello[: rng.randrange(1, len(hello))]
    if choice == 3:
        flipped = bytearray(hello)
        for _ in range(rng.randrange(1, 8)):
            flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    # a Kafka request in the clear, as a client that forgot security.protocol=SSL sends
    return struct.pack(">i", 10) + struct.pack(">hhi", 18, 0, 1) + b"\x00\x00"


def test_garbage_tls_handshakes_are_closed_and_logged_within_bounds(secured: SecuredBroker) -> None:
    rng = random.Random(SEED + 2)
    hello = client_hello(secured.pki)
    log_before = secured.proc.log_path.read_text(errors="replace").count("TLS handshake failed on listener SSL")
    hung = []
    for i in range(TLS_CONNECTIONS):
        data = garbage(rng, hello)
        try:
            send_alone(secured.tls, data)
        except TimeoutError:
            hung.append(f"connection {i}: {data[:40].hex()}")
        except (ConnectionResetError, BrokenPipeError):
            pass  # the broker may close before all of the garbage is sent
    assert not hung, hung[:10]
    assert_still_serving(secured)
    logged = secured.proc.log_path.read_text(errors="replace").count("TLS handshake failed on listener SSL")
    assert 1 <= logged - log_before <= 2 * LOG_PER_MINUTE  # at most two minutes' worth in any run of this test


def assert_still_serving(secured: SecuredBroker) -> None:
    """Real clients on every listener: SCRAM over SASL, mutual TLS, and PLAINTEXT."""
    assert secured.proc.running
    assert can_authenticate(secured.sasl, "SCRAM-SHA-512", *USERS["SCRAM-SHA-512"])
    topic = f"after-fuzz-{random.randrange(10**9)}"
    create_topic(secured.plain, topic)
    ck_produce(secured.tls, topic, records(5), **secured.pki.confluent())
    conf = ck_conf(secured.sasl, "SCRAM-SHA-256", *USERS["SCRAM-SHA-256"])
    conf.pop("bootstrap.servers")
    assert len(ck_consume(secured.sasl, topic, 5, conf=conf)) == 5
