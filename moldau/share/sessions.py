"""Share sessions (KIP-932): the partitions a member fetches from one broker, and the epoch that orders its requests.

- ShareFetch with epoch 0 opens a session for the (group, member), replacing any it had, with the partitions named;
- epoch N > 0 must be the session's next epoch (else INVALID_SHARE_SESSION_EPOCH; no session:
  SHARE_SESSION_NOT_FOUND); the request's partitions are added and its forgotten topics removed;
- epoch -1 closes the session once the request's acknowledgements are applied;
- every request accepted moves the next epoch on by one (wrapping to 1 past the largest int32);
- a session ends with the connection its last request came over, as in Kafka: a consumer that is gone gives
  back what it held without waiting for its locks to expire;
- a broker holds at most `group.share.max.share.sessions` sessions: opening one more is
  SHARE_SESSION_LIMIT_REACHED (re-opening a member's own session is not one more), so clients inventing member
  ids cannot make the broker's memory grow.

ShareAcknowledge follows the same epochs but cannot open a session (epoch 0 is INVALID_SHARE_SESSION_EPOCH).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from moldau.protocol.errors import ErrorCode, KafkaError

OPEN_EPOCH = 0
CLOSE_EPOCH = -1
MAX_EPOCH = 2**31 - 1

P = TypeVar("P")  # how a partition is named: (topic id, partition) on the wire


@dataclass
class ShareSession(Generic[P]):
    group_id: str
    member_id: str
    next_epoch: int = 1
    partitions: set[P] = field(default_factory=set)
    last_used_ms: int = 0
    connection: str = ""  # the connection of its last request: the session ends when that connection does

    def bump(self) -> None:
        self.next_epoch = 1 if self.next_epoch >= MAX_EPOCH else self.next_epoch + 1


DEFAULT_MAX_SESSIONS = 2000


class ShareSessions(Generic[P]):
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: dict[tuple[str, str], ShareSession[P]] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession[P] | None:
        return self._sessions.get((group_id, member_id))

    def all(self) -> list[ShareSession[P]]:
        return list(self._sessions.values())

    def fetch(self, group_id: str, member_id: str, epoch: int, added: Iterable[P], forgotten: Iterable[P],
              now_ms: int, connection: str = "") -> ShareSession[P]:
        """The session a ShareFetch runs in (opened, or checked and moved on); raises KafkaError."""
        if epoch == OPEN_EPOCH:
            if (group_id, member_id) not in self._sessions and len(self._sessions) >= self.max_sessions:
                raise KafkaError(ErrorCode.share_session_limit_reached,
                                 f"this broker holds its {self.max_sessions} share sessions "
                                 "(group.share.max.share.sessions)")
            session = ShareSession[P](group_id, member_id, partitions=set(added), last_used_ms=now_ms,
                                      connection=connection)
            self._sessions[(group_id, member_id)] = session
            return session
        session = self._checked(group_id, member_id, epoch)
        session.partitions.update(added)
        session.partitions.difference_update(forgotten)
        session.last_used_ms = now_ms
        session.connection = connection
        if epoch != CLOSE_EPOCH:
            session.bump()
        return session

    def acknowledge(self, group_id: str, member_id: str, epoch: int, now_ms: int,
                    connection: str = "") -> ShareSession[P]:
        if epoch == OPEN_EPOCH:
            raise KafkaError(ErrorCode.invalid_share_session_epoch, "ShareAcknowledge cannot open a share session")
        session = self._checked(group_id, member_id, epoch)
        session.last_used_ms = now_ms
        session.connection = connection
        if epoch != CLOSE_EPOCH:
            session.bump()
        return session

    def close(self, group_id: str, member_id: str) -> ShareSession[P] | None:
        return self._sessions.pop((group_id, member_id), None)

    def close_connection(self, connection: str) -> list[ShareSession[P]]:
        """End the sessions whose last request came over this connection; them."""
        gone = [s for s in self._sessions.values() if s.connection == connection]
        for session in gone:
            del self._sessions[(session.group_id, session.member_id)]
        return gone

    def _checked(self, group_id: str, member_id: str, epoch: int) -> ShareSession[P]:
        session = self._sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.share_session_not_found,
                             f"no share session for member {member_id} of group {group_id}")
        if epoch != CLOSE_EPOCH and epoch != session.next_epoch:
            raise KafkaError(ErrorCode.invalid_share_session_epoch,
                             f"share session epoch {epoch}, expected {session.next_epoch}")
        return session
