"""A seeded simulation of the console's sign-in sessions (moldau.console.sessions) on a manual clock: users sign in
(several times, with the same or other credentials), come back after short or long pauses, sign out, and sign in
with stale or made-up tokens, past the bound on sessions.

Checked after every step, against a model that knows each session's last use:
- a token finds its session exactly when the model says it is live (signed in, not signed out, used within the
  idle timeout, not pushed out as the least recently used);
- a session always carries the credentials it was created with;
- there are never more than `max_sessions` sessions;
- `create` reports, as ended, exactly the sessions the model expects to go (expired, then least recently used).

Replay one seed: `python -m tests.sim.console_sessions_simulation --seed N`.
"""

from __future__ import annotations

import argparse
import random
from collections import Counter

from moldau.console.clients import Credentials
from moldau.console.sessions import SessionStore

STEPS = 400
IDLE_S = 100.0
USERS = [Credentials("PLAIN", "alice", "a"), Credentials("SCRAM-SHA-256", "bob", "b"),
         Credentials("SCRAM-SHA-512", "carol", "c"), Credentials("PLAIN", "alice", "other")]


def _order(credentials: Credentials) -> tuple[str, str, str]:
    return credentials.mechanism, credentials.username, credentials.password


class ConsoleSessionsSimulation:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.now = 0.0
        self.max_sessions = self.rng.randint(1, 5)
        counter = iter(range(10**9))
        self.store = SessionStore(lambda: self.now, IDLE_S, self.max_sessions,
                                  new_token=lambda: f"s{seed}-{next(counter)}")
        # token -> (credentials, time of last use, order of last use): what the store should hold.
        self.model: dict[str, tuple[Credentials, float, int]] = {}
        self.uses = 0
        self.tokens: list[str] = []  # every token ever given, live or not
        self.stats: Counter[str] = Counter()

    def fail(self, what: str) -> None:
        raise AssertionError(f"seed {self.seed} at t={self.now}: {what}")

    def expected_live(self, token: str) -> bool:
        entry = self.model.get(token)
        return entry is not None and self.now - entry[1] <= IDLE_S

    def use(self, token: str, credentials: Credentials) -> None:
        self.uses += 1
        self.model[token] = (credentials, self.now, self.uses)

    def step(self) -> None:
        self.now += self.rng.choice([0.0, 0.0, 1.0, 10.0, 60.0, IDLE_S, IDLE_S + 1, 250.0])
        action = self.rng.random()
        if action < 0.35:
            self.sign_in()
        elif action < 0.8 and self.tokens:
            self.visit(self.rng.choice(self.tokens))
        elif action < 0.9 and self.tokens:
            self.sign_out(self.rng.choice(self.tokens))
        else:
            self.visit(f"made-up-{self.rng.randint(0, 9)}")
        if len(self.store) > self.max_sessions:
            self.fail(f"{len(self.store)} sessions, bound {self.max_sessions}")

    def sign_in(self) -> None:
        credentials = self.rng.choice(USERS)
        expired = [t for t in self.model if not self.expected_live(t)]
        expected_ended = [self.model.pop(t)[0] for t in expired]
        self.stats["expired"] += len(expired)
        while len(self.model) >= self.max_sessions:
            least_recent = min(self.model, key=lambda t: self.model[t][2])
            expected_ended.append(self.model.pop(least_recent)[0])
            self.stats["pushed out"] += 1
        session, ended = self.store.create(credentials)
        if sorted(ended, key=_order) != sorted(expected_ended, key=_order):
            self.fail(f"create ended {ended}, expected {expected_ended}")
        if session.token in self.tokens:
            self.fail(f"token {session.token} given twice")
        self.use(session.token, credentials)
        self.tokens.append(session.token)
        self.stats["signed in"] += 1

    def visit(self, token: str) -> None:
        session = self.store.get(token)
        if session is None:
            if self.expected_live(token):
                self.fail(f"live session {token} not found")
            self.model.pop(token, None)  # the store forgets an expired session it is asked for
            self.stats["refused"] += 1
            return
        if not self.expected_live(token):
            self.fail(f"session {token} should have ended")
        credentials = self.model[token][0]
        if session.credentials != credentials:
            self.fail(f"session {token} has {session.credentials}, made for {credentials}")
        self.use(token, credentials)
        self.stats["visited"] += 1

    def sign_out(self, token: str) -> None:
        ended = self.store.end(token)
        if (ended is not None) != (token in self.model):
            self.fail(f"sign-out of {token}: the store had it: {ended is not None}, the model: {not ended}")
        self.model.pop(token, None)
        if self.store.get(token) is not None:
            self.fail(f"session {token} still there after signing out")
        self.stats["signed out"] += 1

    def run(self) -> dict[str, int]:
        for _ in range(STEPS):
            self.step()
        return dict(self.stats)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, required=True)
    print(ConsoleSessionsSimulation(parser.parse_args().seed).run())


if __name__ == "__main__":
    main()
