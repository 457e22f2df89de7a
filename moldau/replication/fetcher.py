"""Followers copying their leaders: fetch loops per leader broker, as Kafka's replica fetcher threads.

There are `num.replica.fetchers` loops per leader (one by default), each with its own connection and fetch
session; a partition goes to the loop Kafka would give it (`moldau.replication.fetcher_ids`). More than one lets
a follower have several fetches out to a leader at once.

Each loop sends Kafka's Fetch (v17, with this broker's id in `replica_state`) for every partition this broker
follows from that leader, at the follower's log end offset and with the epoch of its last record, so the
leader can say where the logs diverge (KIP-320). The leader holds the fetch until it has data (long poll), so
a follower hears of an append within one round trip; the fetch offset doubles as the follower's
acknowledgement. Answers are read by `moldau.protocol.fetch_response_reader`, which leaves each partition's
records in the received frame (kio decodes what it does not read). What to do with each answer (append, truncate,
restart the log) is the replica manager's (`ReplicaManager.on_fetched`); this module only moves requests and
answers.

Each loop keeps an incremental fetch session with its leader (KIP-227, `moldau.replication.fetch_session`): after a
first full fetch, a request lists only the partitions whose position changed and forgets those no longer fetched,
and the leader answers only the partitions with something new, so idle partitions cost next to nothing per round
trip. A session error, or a request that got no answer, starts over with a full fetch.

Replication quotas (KIP-73, `moldau.replication.throttle`): while this broker's follower.replication.throttled.rate
is exceeded, partitions its topics' follower.replication.throttled.replicas name that are not caught up (the
leader's high watermark beyond this log's end at the last answer) are left out of the requests; what is fetched for
such partitions counts against the rate. With every partition left out, the loop waits for the rate to come back
under its limit.

A failed request (leader unreachable, timed out) is retried after `replica.fetch.backoff.ms`; partitions whose
answer was an error are left out for that long too (forgotten by the session meanwhile), until the next metadata
image may tell a new leader.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from moldau.clock import Clock, SystemClock
from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.fetch_request import EncodedRequest, FetchPosition, encode_replica_fetch
from moldau.protocol.fetch_response_reader import read_fetch_response
from moldau.replication.fetch_session import FetcherSession, FetchPlan

if TYPE_CHECKING:
    from moldau.config import BrokerConfig
    from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Address = tuple[str, int]
PartitionId = tuple[uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_ms: int = 30_000  # replica.socket.timeout.ms

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_response_max_bytes,
            partition_max_bytes=config.replica_fetch_max_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
            request_timeout_ms=config.replica_socket_timeout_ms,
        )


@dataclass(slots=True)
class FollowedPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    leader_epoch: int
    retry_at_ms: float = 0.0  # left out of fetches until then, after an error
    # At the last answer this log's end had reached the leader's high watermark (Kafka's "lag 0"): such a replica
    # only keeps up, and replication quotas never hold it back.
    caught_up: bool = False


class ReplicaFetcher:
    """One fetch loop towards one leader broker, over a connection pool of its own (closed when it stops)."""

    def __init__(self, leader_id: int, manager: ReplicaManager, pool: ConnectionPool,
                 address_of: Callable[[int], Address | None], settings: FetcherSettings,
                 clock: Clock | None = None, fetcher_id: int = 0) -> None:
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, FollowedPartition] = {}
        self._manager = manager
        self._pool = pool
        self._address_of = address_of
        self._settings = settings
        self._clock: Clock = clock or SystemClock()
        self._changed = asyncio.Event()
        self._session: FetcherSession[PartitionId, FetchPosition] = FetcherSession()
        # Kafka's thread name: ReplicaFetcherThread-<fetcher id>-<leader id>.
        self.name = f"replica fetcher {fetcher_id} for broker {leader_id}"
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"ReplicaFetcherThread-{fetcher_id}-{leader_id}")

    def follow(self, followed: FollowedPartition) -> None:
        key = (followed.topic, followed.partition)
        current = self.partitions.get(key)
        if current is None or current.leader_epoch != followed.leader_epoch or current.topic_id != followed.topic_id:
            self.partitions[key] = followed
            self._changed.set()

    def unfollow(self, key: TopicPartition) -> None:
        self.partitions.pop(key, None)

    def stop(self) -> None:
        self._task.cancel()
        self._pool.close()

    async def _run(self) -> None:
        while True:
            try:
                await self._fetch_once()
                continue
            except asyncio.CancelledError:
                raise
            except (ConnectionFailed, TimeoutError) as exc:
                log.info("%s: fetch failed: %s; retrying in %d ms", self.name, exc, self._settings.backoff_ms)
            except Exception:
                log.exception("%s failed; retrying", self.name)
            # Back off outside the handler: the exception's traceback holds the failed fetch's frame, whose answer
            # holds views of a pooled receive buffer that the pool could not reuse meanwhile.
            await self._sleep(self._settings.backoff_ms)

    async def _sleep(self, ms: float) -> None:
        """Sleep, but wake early when partitions are added (a new leadership should not wait out a backoff)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(ms, 0) / 1000)
        self._changed.clear()

    async def _fetch_once(self) -> None:
        now_ms = self._clock.monotonic_ms()
        ready = [p for p in self.partitions.values() if p.retry_at_ms <= now_ms]
        address = self._address_of(self.leader_id)
        if address is None or not self.partitions:
            await self._sleep(self._settings.backoff_ms)
            return
        if not ready:
            await self._sleep(min(p.retry_at_ms for p in self.partitions.values()) - now_ms)
            return
        ready = self._within_quota(ready, now_ms)
        if not ready:
            await self._sleep(max(1, min(self._manager.quotas.follower.wait_ms(now_ms), self._settings.backoff_ms)))
            return
        plan = self._session.plan(self._positions(ready))
        timeout_s = (self._settings.max_wait_ms + self._settings.request_timeout_ms) / 1000
        try:
            # Read directly: each partition's records are a view of the received frame, not a copy (kio's).
            response = await self._pool.request(address[0], address[1], self._request(plan), timeout_s,
                                                direct_reader=read_fetch_response)
        except BaseException:
            self._session.failed()  # the leader may or may not have moved the session on
            raise
        self._session.answered(plan, response.error_code, response.session_id)
        if response.error_code:
            log.info("%s: fetch session error %d; starting a new one", self.name, response.error_code)
            return
        try:
            self._handle(response, {(p.topic_id, p.partition): p for p in ready})
        except BaseException:
            # The leader counts this answer as heard: a full fetch makes sure nothing it told is missed.
            self._session.failed()
            raise

    def _within_quota(self, ready: list[FollowedPartition], now_ms: float) -> list[FollowedPartition]:
        """`ready` without the partitions the follower's replication quota holds back now."""
        quota = self._manager.quotas.follower
        if not quota.exceeded(now_ms):
            return ready
        throttled = self._manager.follower_throttled
        return [p for p in ready if not quota.holds_back(throttled(p.topic, p.partition), p.caught_up, now_ms)]

    def _positions(self, ready: list[FollowedPartition]) -> dict[PartitionId, FetchPosition]:
        position = self._manager.follower_position
        out = {}
        for p in ready:
            start, end, last_epoch = position(p.topic, p.partition)
            out[(p.topic_id, p.partition)] = FetchPosition(p.partition, p.leader_epoch, end, last_epoch, start)
        return out

    def _request(self, plan: FetchPlan[PartitionId, FetchPosition]) -> EncodedRequest:
        by_topic: dict[uuid.UUID, list[FetchPosition]] = {}
        for (topic_id, _), fetch_position in plan.listed.items():
            by_topic.setdefault(topic_id, []).append(fetch_position)
        forgotten: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in plan.forgotten:
            forgotten.setdefault(topic_id, []).append(partition)
        settings = self._settings
        return encode_replica_fetch(self._manager.node_id, settings.max_wait_ms, settings.min_bytes,
                                    settings.max_bytes, settings.partition_max_bytes, list(by_topic.items()),
                                    plan.session_id, plan.epoch, list(forgotten.items()),
                                    self._manager.broker_epoch())

    def _handle(self, response: Any, sent: dict[tuple[uuid.UUID, int], FollowedPartition]) -> None:
        now_ms = self._clock.monotonic_ms()
        manager = self._manager
        limited = manager.quotas.follower.limited
        throttled_bytes = 0
        for topic in response.responses:
            for part in topic.partitions:
                followed = sent.get((topic.topic_id, part.partition_index))
                # Skip answers for partitions dropped or re-assigned while the fetch was out.
                if followed is None or self.partitions.get((followed.topic, followed.partition)) is not followed:
                    continue
                delay_ms = manager.on_fetched(followed, part)
                if delay_ms > 0:
                    followed.retry_at_ms = now_ms + delay_ms
                if limited and (followed.topic, followed.partition) in manager.partitions:
                    end = manager.follower_position(followed.topic, followed.partition)[1]
                    followed.caught_up = part.high_watermark >= 0 and end >= part.high_watermark
                    if part.records and manager.follower_throttled(followed.topic, followed.partition):
                        throttled_bytes += len(part.records)
        if throttled_bytes:
            manager.quotas.follower.record(throttled_bytes, now_ms)
