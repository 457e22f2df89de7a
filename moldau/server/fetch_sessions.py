"""Incremental fetch sessions (KIP-227): the broker's cache of what each fetcher last asked for and was told.

A fetcher that keeps a session sends only the partitions whose fetch position changed (and, as forgotten, those
it stopped fetching); the broker answers only the partitions with records, an error, a diverging epoch, or a high
watermark, last stable offset or log start offset other than the one it last sent in that session. A follower
copying many idle partitions, or a consumer of many quiet ones, then exchanges almost nothing per round trip.

What a request's session id and epoch mean (`begin`):

- id 0, epoch -1 (FINAL_EPOCH): a full fetch that neither uses nor creates a session (all requests before v7);
- id 0, epoch 0 (INITIAL_EPOCH): a full fetch that creates a session if the cache has room; the response carries
  its id (0 if none was made) and the next request of the session has epoch 1;
- id N, epoch 0: the same, after closing session N;
- id N, epoch -1: close session N, then a full fetch without a session;
- id N, epoch E > 0: an incremental fetch of session N, which must expect epoch E: else INVALID_FETCH_SESSION_EPOCH,
  or FETCH_SESSION_ID_NOT_FOUND for an unknown N; FETCH_SESSION_TOPIC_ID_ERROR if the session was made with topic
  ids (v13+) and this request names topics, or the other way round. Epochs wrap from 2^31-1 to 1.

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When it is full, a new session takes
the place of one that has not been used for `min.incremental.fetch.session.eviction.ms` (the least recently used);
failing that, of one that has existed that long and is worth less: a consumer's session is worth less than a
follower's (followers' sessions are privileged), and among equals one with fewer partitions. Else no session is
made and the fetcher goes on with full fetches.

Sessions belong to the broker, not to a connection: a fetcher may reconnect and carry on with its session. This
module does no I/O: the time comes with each call and session ids from an injected random source.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, MAX_EPOCH, next_epoch

__all__ = [
    "CachedPartition",
    "FetchSession",
    "FetchSessionCache",
    "PartitionKey",
    "SessionStart",
]

PartitionKey = tuple[Any, int]  # (topic name before v13, topic id from v13; partition index)


@dataclass(slots=True)
class CachedPartition:
    """One partition of a session: the fetcher's last stated position (named as in a Fetch request's partition, so
    the handler reads it like one) and what the broker last told it."""

    topic_key: Any
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's (a follower's log start)
    sent_high_watermark: int = -1
    sent_last_stable_offset: int = -1
    sent_log_start_offset: int = -1

    @classmethod
    def from_request(cls, topic_key: Any, part: Any) -> CachedPartition:
        return cls(topic_key, part.partition, part.fetch_offset, part.partition_max_bytes,
                   getattr(part, "current_leader_epoch", -1), getattr(part, "last_fetched_epoch", -1),
                   getattr(part, "log_start_offset", -1))

    def update_from_request(self, part: Any) -> None:
        self.fetch_offset = part.fetch_offset
        self.partition_max_bytes = part.partition_max_bytes
        self.current_leader_epoch = getattr(part, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(part, "last_fetched_epoch", -1)
        self.log_start_offset = getattr(part, "log_start_offset", -1)

    def must_send(self, has_records: bool, failed: bool, high_watermark: int, last_stable_offset: int,
                  log_start_offset: int) -> bool:
        """Whether an incremental response includes this partition; remembers what it then tells. After an error
        the high watermark sent is forgotten, so the partition is sent again once the error is gone."""
        if failed:
            self.sent_high_watermark = -1
            return True
        changed = (high_watermark != self.sent_high_watermark or last_stable_offset != self.sent_last_stable_offset
                   or log_start_offset != self.sent_log_start_offset)
        if changed:
            self.sent_high_watermark = high_watermark
            self.sent_last_stable_offset = last_stable_offset
            self.sent_log_start_offset = log_start_offset
        return changed or has_records


@dataclass(slots=True)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    created_ms: float
    last_used_ms: float
    epoch: int = 1  # what the next request must carry
    # In fetch order: partitions that returned records move to the end, so a response limited by max_bytes does
    # not always favour the same ones (full fetchers rotate their own lists for the same reason).
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)

    def apply(self, added: Iterable[CachedPartition], forgotten: Iterable[PartitionKey]) -> None:
        """An incremental request: partitions listed are added or take their new position; forgotten ones go."""
        for key in forgotten:
            self.partitions.pop(key, None)
        for cached in added:
            key = (cached.topic_key, cached.partition)
            current = self.partitions.get(key)
            if current is None:
                self.partitions[key] = cached
            else:
                current.update_from_request(cached)

    def returned_records(self, keys: Iterable[PartitionKey]) -> None:
        for key in keys:
            cached = self.partitions.pop(key, None)
            if cached is not None:
                self.partitions[key] = cached


@dataclass(frozen=True, slots=True)
class SessionStart:
    """What a request's session id and epoch make of it: an error (answered at top level, with no partitions), an
    incremental fetch of `session`, or a full fetch that should make a session (`create`) or not."""

    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None
    create: bool = False


class FetchSessionCache:
    def __init__(self, max_slots: int, eviction_ms: int, rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self._rng = rng or random.Random()
        self._sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    @property
    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def begin(self, session_id: int, epoch: int, uses_topic_ids: bool, now_ms: float) -> SessionStart:
        """Apply the session rules of a request's id and epoch (see the module docstring)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            return SessionStart(create=epoch == INITIAL_EPOCH)
        if epoch < FINAL_EPOCH:
            return SessionStart(ErrorCode.invalid_fetch_session_epoch)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionStart(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionStart(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionStart(ErrorCode.fetch_session_topic_id_error)
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        return SessionStart(session=session)

    def create(self, privileged: bool, uses_topic_ids: bool, partitions: Iterable[CachedPartition],
               now_ms: float) -> FetchSession | None:
        """A session for the full fetch just answered, or None if the cache has no room for it."""
        cached = {(p.topic_key, p.partition): p for p in partitions}
        if self.max_slots <= 0:
            return None
        if len(self._sessions) >= self.max_slots and not self._evict_for(privileged, len(cached), now_ms):
            return None
        session = FetchSession(self._new_id(), privileged, uses_topic_ids, now_ms, now_ms, partitions=cached)
        self._sessions[session.id] = session
        return session

    def close(self, session_id: int) -> None:
        self._sessions.pop(session_id, None)

    def _new_id(self) -> int:
        while True:
            session_id = self._rng.randint(1, MAX_EPOCH)
            if session_id not in self._sessions:
                return session_id

    def _evict_for(self, privileged: bool, size: int, now_ms: float) -> bool:
        """Make room for a new session, as KIP-227 rules; False if no session may go."""
        least_recent = min(self._sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - least_recent.last_used_ms > self.eviction_ms:
            return self._evict(least_recent)
        new_worth = (privileged, size)
        candidates = [s for s in self._sessions.values()
                      if now_ms - s.created_ms >= self.eviction_ms and (s.privileged, len(s.partitions)) < new_worth]
        if not candidates:
            return False
        return self._evict(min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.last_used_ms)))

    def _evict(self, session: FetchSession) -> bool:
        del self._sessions[session.id]
        self.evictions += 1
        return True

