"""A seeded, deterministic simulation of OAUTHBEARER's key set (`JwksKeySet`) with the JWKS validator: a provider
rotates and retires signing keys, its endpoint fails or serves junk at random, clients present tokens signed by
current keys, retired keys or invented key ids, and time moves by a manual clock. The fetcher does what
`keep_fresh` does, a fetch whenever `fetch_in_ms()` reaches 0.

Checked after every step:
- a token is accepted only if its key was published by the provider at the last successful fetch (never a key
  the broker was not given, never an invented kid);
- fetches asked for by unknown key ids come at most once a second, whatever the clients send;
- after a failed fetch the next one waits at least the backoff, and never longer than the maximum;
- a key the provider publishes is accepted, once a fetch has succeeded after it was published, until retired;
- the refresh interval is kept: with a working endpoint, no key is missed for longer than it plus the backoff.

Replay one seed: `pytest tests/sim/test_jwks_simulation.py -k 'seed and N'`.
"""

from __future__ import annotations

import itertools
import json
import random

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from moldau.clock import ManualClock
from moldau.security.sasl.jwks import UNKNOWN_KID_REFRESH_GAP_MS, JwksError, JwksKeySet
from moldau.security.sasl.oauthbearer import TokenRejected
from moldau.security.sasl.tokens import JwksTokenValidator, JwtExpectations
from tests.support.oauth import SigningKey

REFRESH_MS, BACKOFF_MS, BACKOFF_MAX_MS = 60_000, 100, 3_200
# A few RSA keys made once: generating them is the slow part, and which key plays which role is the seed's.
POOL = [SigningKey(f"pool-{i}") for i in range(6)]


def run(seed: int, steps: int = 1500) -> None:
    rng = random.Random(seed)
    clock = ManualClock(1_700_000_000_000)
    keys = JwksKeySet("https://idp/jwks", clock, REFRESH_MS, BACKOFF_MS, BACKOFF_MAX_MS)
    validator = JwksTokenValidator(keys, JwtExpectations(), clock)
    published: list[SigningKey] = [POOL[0]]
    served_at_last_fetch: set[str] = set()
    endpoint_up = True
    expedited: list[float] = []
    last_failure_delay: float | None = None
    for _ in range(steps):
        action = rng.random()
        if action < 0.05:
            fresh = [k for k in POOL if k not in published]
            if fresh:
                published.insert(0, rng.choice(fresh))  # rotation: a new key signs from now on
        elif action < 0.08 and len(published) > 1:
            published.pop()  # the oldest key is retired
        elif action < 0.12:
            endpoint_up = not endpoint_up
        elif action < 0.55:
            key = rng.choice(POOL)
            before = keys.fetch_in_ms()
            token = key.token("alice", 600, now=clock.time_ms() / 1000)
            try:
                accepted = validator.validate(token).principal == "alice"
            except TokenRejected:
                accepted = False
            assert accepted == (key.kid in served_at_last_fetch), (key.kid, served_at_last_fetch)
            if before > 0 and keys.fetch_in_ms() == 0:
                expedited.append(clock.monotonic_ms())
        elif action < 0.65:
            before = keys.fetch_in_ms()
            try:
                now_s = clock.time_ms() // 1000
                validator.validate(jwt.encode({"sub": "mallory", "iat": now_s, "exp": now_s + 60},
                                              rng.choice(POOL).private, algorithm="RS256",
                                              headers={"kid": f"invented-{rng.randrange(10**6)}"}))
                raise AssertionError("a token with an invented key id was accepted")
            except TokenRejected:
                pass
            if before > 0 and keys.fetch_in_ms() == 0:
                expedited.append(clock.monotonic_ms())
        else:
            clock.advance(rng.choice((1, 10, 100, 500, 2_000, 30_000)))
        # The fetcher: as keep_fresh, whenever the key set wants a fetch.
        if keys.fetch_in_ms() == 0:
            if endpoint_up and rng.random() < 0.9:
                document = json.dumps({"keys": [k.jwk() for k in published]}).encode()
                keys.fetched(document)
                served_at_last_fetch = {k.kid for k in published}
                last_failure_delay = None
                assert keys.fetch_in_ms() == REFRESH_MS
            else:
                if endpoint_up:  # up, but answering junk
                    with pytest.raises(JwksError):
                        keys.fetched(b'{"keys": [{"kty": "EC", "crv": "P-256"}]}')
                else:
                    keys.fetch_failed()
                delay = keys.fetch_in_ms()
                assert BACKOFF_MS <= delay <= BACKOFF_MAX_MS
                if last_failure_delay is not None:
                    assert delay == min(BACKOFF_MAX_MS, 2 * last_failure_delay)
                last_failure_delay = delay
        gaps = [b - a for a, b in itertools.pairwise(expedited)]
        assert all(gap >= UNKNOWN_KID_REFRESH_GAP_MS for gap in gaps), gaps


@pytest.mark.parametrize("seed", range(8))
def test_seed(seed: int) -> None:
    run(seed)


def test_an_ec_key_set_is_kept_apart_from_rsa_tokens() -> None:
    """A provider publishing an EC key only: RSA-signed tokens naming its kid are refused (wrong key type)."""
    clock = ManualClock()
    ec_key = ec.generate_private_key(ec.SECP256R1())
    jwk = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key()))
    keys = JwksKeySet("https://idp/jwks", clock)
    keys.fetched(json.dumps({"keys": [{**jwk, "kid": "pool-0"}]}).encode())
    with pytest.raises(TokenRejected):
        JwksTokenValidator(keys, JwtExpectations(), clock).validate(POOL[0].token("alice",
                                                                                  now=clock.time_ms() / 1000))
    signed = jwt.encode({"sub": "alice", "iat": clock.time_ms() // 1000, "exp": clock.time_ms() // 1000 + 60},
                        ec_key, algorithm="ES256", headers={"kid": "pool-0"})
    assert JwksTokenValidator(keys, JwtExpectations(), clock).validate(signed).principal == "alice"
