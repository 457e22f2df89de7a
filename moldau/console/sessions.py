"""The console's sign-in sessions on a secured cluster: a random token (the browser's cookie) per signed-in user,
kept on the server with the user's SASL credentials, in memory only (never written anywhere: a restarted broker
signs everyone out).

A session ends at sign-out, after `idle_timeout_s` without a request, or when `max_sessions` newer ones push out
the least recently used. No I/O and no wall clock: the clock and the token source are injected.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from moldau.console.clients import Credentials

__all__ = ["DEFAULT_IDLE_TIMEOUT_S", "DEFAULT_MAX_SESSIONS", "Session", "SessionStore"]

DEFAULT_IDLE_TIMEOUT_S = 30 * 60.0
DEFAULT_MAX_SESSIONS = 1000


@dataclass
class Session:
    token: str
    credentials: Credentials
    last_used: float


def _random_token() -> str:
    return secrets.token_urlsafe(32)


class SessionStore:
    def __init__(self, clock: Callable[[], float], idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 max_sessions: int = DEFAULT_MAX_SESSIONS, new_token: Callable[[], str] = _random_token) -> None:
        self._clock = clock
        self.idle_timeout_s = idle_timeout_s
        self.max_sessions = max_sessions
        self._new_token = new_token
        self._sessions: OrderedDict[str, Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._sessions)

    def create(self, credentials: Credentials) -> tuple[Session, list[Credentials]]:
        """A new session, and the credentials of sessions it pushed out (their clients can go)."""
        ended = self.expire()
        while len(self._sessions) >= self.max_sessions:
            ended.append(self._sessions.popitem(last=False)[1].credentials)
        session = Session(self._new_token(), credentials, self._clock())
        self._sessions[session.token] = session
        return session, ended

    def get(self, token: str | None) -> Session | None:
        """The live session with this token, now marked used; None when there is none or it has expired."""
        if not token:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        now = self._clock()
        if now - session.last_used > self.idle_timeout_s:
            del self._sessions[token]
            return None
        session.last_used = now
        self._sessions.move_to_end(token)
        return session

    def end(self, token: str | None) -> Session | None:
        return self._sessions.pop(token, None) if token else None

    def in_use(self, credentials: Credentials) -> bool:
        """Whether another live session signs in with the same credentials (and so shares their clients)."""
        return any(s.credentials == credentials for s in self._sessions.values())

    def expire(self) -> list[Credentials]:
        """End the sessions idle for longer than the timeout; their credentials (their clients can go)."""
        now = self._clock()
        stale = [t for t, s in self._sessions.items() if now - s.last_used > self.idle_timeout_s]
        return [self._sessions.pop(t).credentials for t in stale]
