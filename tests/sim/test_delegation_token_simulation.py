"""A seeded, deterministic simulation of delegation tokens (KIP-48) at the controller: principals create, renew,
expire and look up tokens at random times, the periodic sweep runs now and then, and a node logs in with tokens.
After every step the metadata image is checked against a model kept by the test, and against the rules:

- a token's expiry never passes its max time, and only its owner or a renewer ever moved it;
- renewing or expiring a token past its expiry fails (DELEGATION_TOKEN_EXPIRED), and nothing changes;
- the sweep deletes exactly the tokens past their expiry;
- a token logs in as its owner exactly while it exists and is not past its expiry;
- replaying the committed entries from nothing gives the same tokens (what a restarted node or a follower sees).

Replay one seed: `pytest tests/sim/test_delegation_token_simulation.py -k 'seed and N'`.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import replace

import pytest

from moldau.metadata.controller import Controller
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import DelegationTokenRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.delegation_tokens import TokenCredentials, TokenSettings, token_hmac
from moldau.security.principal import KafkaPrincipal
from tests.unit.metadata.builders import build
from tests.unit.metadata.test_reassignment import FakeQuorum

SECRET = "sim-secret"
SETTINGS = TokenSettings(SECRET, max_lifetime_ms=5_000, expiry_time_ms=1_000)
USERS = [KafkaPrincipal.user(name) for name in ("alice", "bob", "carol", "dave")]


def run(seed: int, steps: int = 400) -> None:
    rng = random.Random(seed)
    quorum = FakeQuorum(build([], []))
    controller = Controller(quorum, node_id=1, rng=random.Random(seed), token_settings=SETTINGS)  # type: ignore[arg-type]
    now = 1_000_000
    model: dict[str, DelegationTokenRecord] = {}
    logins = TokenCredentials(SECRET, lambda: quorum.image, lambda: now)

    async def step() -> None:
        nonlocal now
        now += rng.choice((0, 1, 50, 300, 900, 2_000))
        action = rng.random()
        who = rng.choice(USERS)
        if action < 0.3 or not model:
            renewers = rng.sample(USERS, rng.randint(0, 2))
            made = await controller.create_delegation_token(now, who, who, renewers, rng.choice((-1, 500, 10**9)))
            assert made.max_timestamp - made.issue_timestamp <= SETTINGS.max_lifetime_ms
            model[made.token_id] = made
        elif action < 0.85:
            token_id = rng.choice(sorted(model))
            token = model[token_id]
            renew = action < 0.6
            period = rng.choice((-1, 0, 200, 5_000))
            allowed = str(who) == token.owner or str(who) in token.renewers
            past = token.expiry_timestamp < now
            try:
                if renew:
                    expiry = await controller.renew_delegation_token(now, token_hmac(SECRET, token_id), who, period)
                else:
                    expiry = await controller.expire_delegation_token(now, token_hmac(SECRET, token_id), who, period)
            except KafkaError as exc:
                expected = ErrorCode.delegation_token_expired if past else ErrorCode.delegation_token_owner_mismatch
                assert exc.code == expected and (past or not allowed), (exc.code, past, allowed)
                return
            assert allowed and not past
            if not renew and period < 0:
                del model[token_id]
            else:
                assert expiry <= token.max_timestamp
                model[token_id] = replace(token, expiry_timestamp=expiry)
        else:
            await controller.remove_expired_delegation_tokens(now)
            for token_id in [t for t, token in model.items() if token.expiry_timestamp < now]:
                del model[token_id]

    async def simulate() -> None:
        for _ in range(steps):
            await step()
            assert dict(quorum.image.delegation_tokens) == model
            for token_id, token in list(model.items())[:3]:
                login = logins.lookup("SCRAM-SHA-256", token_id)
                live = token.expiry_timestamp >= now
                assert (login is not None) == live and (login is None or str(login.owner) == token.owner)
        replayed = MetadataImage()
        for entry in quorum.entries:
            replayed = replayed.apply(entry, replayed.offset + len(entry))
        assert replayed.delegation_tokens == quorum.image.delegation_tokens

    asyncio.run(simulate())


@pytest.mark.parametrize("seed", range(20))
def test_seed(seed: int) -> None:
    run(seed)
