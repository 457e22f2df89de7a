"""What an authentication costs the broker, per SASL mechanism: PLAIN (the baseline of the same run),
SCRAM-SHA-256, SCRAM-SHA-256 with a delegation token (KIP-48, `tokenauth=true`), OAUTHBEARER with signed tokens
(RS256, checked against a JWKS) and OAUTHBEARER with unsecured tokens.

One broker serves a SIGNED listener (PLAIN, SCRAM-SHA-256, and OAUTHBEARER with Kafka's JWKS validator; the keys
in a file: URL made for the run) and a DEV listener (OAUTHBEARER, Kafka's unsecured validator). Client processes
each open connections one after another, as a client reconnecting after a broker restart does: connect,
SaslHandshake, SaslAuthenticate (two round trips for SCRAM), one Metadata request, close. Each mechanism runs for
`--seconds` in turn, the order rotated each round. Printed per mechanism: authentications per second (bounded by
the Python clients, whose SCRAM key derivation alone is a few milliseconds) and the broker's CPU per
authentication from /proc/PID/stat, which does not depend on the clients' speed, as a ratio to PLAIN's (with
`network.idle.poll.us=0`: otherwise the loop's polling while it waits for the slower SCRAM clients would count).

Run from the repository root:  python -m bench.sasl_auth [--seconds 5] [--rounds 3] [--clients 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import scramp
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from bench.common import scratch_dir, server_with
from bench.proc_cpu import process_cpu
from moldau.net.ports import free_ports
from tests.support.delegation_tokens import create_token, plain_properties
from tests.support.oauth import SigningKey, unsecured_token
from tests.support.raw_client import RawClient
from tests.support.sasl import JAAS, create_scram_users

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-256-token", "OAUTHBEARER-signed", "OAUTHBEARER-unsecured")
SCRAM_USER = ("bench", "bench-secret")
JWKS_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


@contextlib.contextmanager
def broker(tmp: Path, key: SigningKey) -> Iterator[tuple[int, dict[str, str]]]:
    """The broker's pid, and each listener's address."""
    plain, signed, dev = free_ports(3)
    jwks = tmp / "jwks.json"
    jwks.write_text(json.dumps({"keys": [key.jwk()]}))
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SIGNED://127.0.0.1:{signed},DEV://127.0.0.1:{dev}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SIGNED:SASL_PLAINTEXT,DEV:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT", "log.dirs": str(tmp / "data"), "node.id": "1",
        "listener.name.signed.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
        "listener.name.signed.plain.sasl.jaas.config": JAAS,
        "listener.name.signed.oauthbearer.sasl.server.callback.handler.class": JWKS_HANDLER,
        "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "listener.name.dev.sasl.enabled.mechanisms": "OAUTHBEARER",
        "connection.failed.authentication.delay.ms": "0",
        "delegation.token.secret.key": "bench-secret",
        # The event loop polls for a while after each request instead of sleeping (docs/benchmarks.md, idle
        # polling): CPU spent waiting for slow clients, not authenticating them. Off, so CPU is the work.
        "network.idle.poll.us": "0",
        "schema.registry.listeners": "", "console.listeners": "",
    }
    with server_with(overrides, tmp, plain) as proc:
        address = {"signed": f"127.0.0.1:{signed}", "dev": f"127.0.0.1:{dev}"}
        create_scram_users(address["signed"], {"SCRAM-SHA-256": SCRAM_USER})
        token = create_token(address["signed"], plain_properties(tmp, "alice", "alice-secret"))
        address["token"] = f"{token['token_id']} {token['hmac']}"  # the token's SCRAM user name and password
        yield proc.pid, address


def authenticate(client: RawClient, mechanism: str, token: str) -> None:
    """One SASL exchange; raises AssertionError when the broker refuses it."""
    name = "OAUTHBEARER" if mechanism.startswith("OAUTHBEARER") else mechanism
    assert client.request(SaslHandshakeRequest(mechanism=name.removesuffix("-token"))).error_code == 0
    if mechanism == "PLAIN":
        answer = client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
    elif name.startswith("SCRAM-SHA-256"):
        with_token = name.endswith("-token")
        user, password = token.split(" ") if with_token else SCRAM_USER
        scram = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
        extension = ",tokenauth=true" if with_token else ""
        client_first = scram.get_client_first() + extension
        scram.client_first_bare += extension  # signed as sent (scramp has no option for the extension)
        first = client.request(SaslAuthenticateRequest(auth_bytes=client_first.encode()))
        assert first.error_code == 0, first
        scram.set_server_first(first.auth_bytes.decode())
        answer = client.request(SaslAuthenticateRequest(auth_bytes=scram.get_client_final().encode()))
    else:
        answer = client.request(SaslAuthenticateRequest(auth_bytes=f"n,,\x01auth=Bearer {token}\x01\x01".encode()))
    assert answer.error_code == 0 and not (name == "OAUTHBEARER" and answer.auth_bytes), answer


def client_loop(address: str, mechanism: str, token: str, seconds: float) -> int:
    """Authenticated connections made, one after another, for `seconds`."""
    done = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with RawClient(address) as client:
            authenticate(client, mechanism, token)
            client.request(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
        done += 1
    return done


def measure(pool: ProcessPoolExecutor, pid: int, address: dict[str, str], mechanism: str, token: str,
            clients: int, seconds: float) -> tuple[float, float]:
    """Authentications per second, and the broker's CPU microseconds per authentication."""
    listener = address["dev"] if mechanism == "OAUTHBEARER-unsecured" else address["signed"]
    before, started = process_cpu(pid), time.monotonic()
    counts = list(pool.map(client_loop, *zip(*[(listener, mechanism, token, seconds)] * clients, strict=True)))
    cpu, elapsed = process_cpu(pid) - before, time.monotonic() - started
    total = sum(counts)
    return total / elapsed, cpu.total / total * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per mechanism and round (default 5)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=2, help="client processes (default 2)")
    args = parser.parse_args()
    key = SigningKey("bench")
    tokens = {"OAUTHBEARER-signed": key.token("alice", 24 * 3600),
              "OAUTHBEARER-unsecured": unsecured_token("alice", 24 * 3600)}
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in MECHANISMS}
    with scratch_dir("sasl-auth") as tmp, broker(tmp, key) as (pid, address), \
            ProcessPoolExecutor(args.clients) as pool:
        tokens["SCRAM-SHA-256-token"] = address["token"]
        for mechanism in MECHANISMS:  # warm-up: imports, first connections, the JWKS key parsed
            measure(pool, pid, address, mechanism, tokens.get(mechanism, ""), args.clients, 0.5)
        for round_ in range(args.rounds):
            order = MECHANISMS[round_ % len(MECHANISMS):] + MECHANISMS[:round_ % len(MECHANISMS)]
            for mechanism in order:
                rate, cpu_us = measure(pool, pid, address, mechanism, tokens.get(mechanism, ""), args.clients,
                                       args.seconds)
                results[mechanism].append((rate, cpu_us))
                print(f"round {round_ + 1} {mechanism:22} {rate:8.0f} auth/s  {cpu_us:6.0f} us broker CPU each",
                      flush=True)
    baseline = statistics.median(cpu for _, cpu in results["PLAIN"])
    print("\n| mechanism | authentications/s | broker CPU µs per authentication | CPU vs PLAIN |")
    print("|---|---|---|---|")
    for mechanism, runs in results.items():
        cpu = statistics.median(c for _, c in runs)
        print(f"| {mechanism} | {statistics.median(r for r, _ in runs):,.0f} | {cpu:,.0f} | {cpu / baseline:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
