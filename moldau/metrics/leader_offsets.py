"""The high watermarks of partitions other brokers lead, for the consumer lag of the groups coordinated here.

A group's committed offsets live with its coordinator, a partition's high watermark with its leader; in a cluster
they are often different nodes. Followers learn a leader's high watermark only for the partitions they replicate,
and the metadata image carries no offsets, so neither can stand in for the leader's answer. The coordinator
therefore asks the leaders, as kafka_exporter does from outside: one ListOffsets (latest, read uncommitted: the
high watermark) per leader, for the partitions its groups committed offsets for, sent concurrently when
`/metrics` is scraped (`refresh_before_scrape`).

The answers are kept for `MAX_AGE_MS`, and scrapes that arrive while a refresh runs share it, so a flood of
scrapes costs the other brokers at most one request each per `MAX_AGE_MS`. A leader that does not answer within
`TIMEOUT_S` has its partitions left out of the lag families until it does (an absent series, not a stale one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import kio.schema.list_offsets.v7.request as lo_req

from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.handlers.list_offsets import LATEST as LATEST_TIMESTAMP

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from moldau.server.broker import Broker

__all__ = ["LeaderEndOffsets", "refresh_before_scrape"]

log = logging.getLogger(__name__)

MAX_AGE_MS = 1000.0
TIMEOUT_S = 2.0
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0

TopicPartition = tuple[str, int]


class LeaderEndOffsets:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._pool: ConnectionPool | None = None
        self._fetched_at_ms = float("-inf")
        self._running: asyncio.Task[None] | None = None
        self.ends: Mapping[TopicPartition, int] = {}  # partitions led elsewhere -> their leader's high watermark

    async def refresh(self) -> None:
        """Ask the leaders again unless the answers are younger than MAX_AGE_MS. Never raises."""
        if self._running is None:
            if self._broker.clock.monotonic_ms() - self._fetched_at_ms < MAX_AGE_MS or not self._broker.is_broker:
                return
            self._running = asyncio.ensure_future(self._fetch())
            self._running.add_done_callback(self._done)
        with contextlib.suppress(Exception):  # logged by _done; the scrape goes on without those partitions
            await asyncio.shield(self._running)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._running = None
        self._fetched_at_ms = self._broker.clock.monotonic_ms()
        if not task.cancelled() and task.exception() is not None:
            log.warning("consumer lag: asking the leaders for end offsets failed", exc_info=task.exception())

    async def _fetch(self) -> None:
        broker = self._broker
        wanted = {tp for offsets in broker.groups.committed_offsets().values() for tp in offsets}
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic_name, partition in wanted:
            topic = broker.image.topics_by_name.get(topic_name)
            part = topic.partitions.get(partition) if topic is not None else None
            if part is not None and part.leader >= 0 and part.leader != broker.node_id:
                by_leader.setdefault(part.leader, []).append((topic_name, partition))
        answers = await asyncio.gather(*(self._ask(leader, tps) for leader, tps in sorted(by_leader.items())))
        self.ends = {tp: offset for answer in answers for tp, offset in answer.items()}

    async def _ask(self, leader: int, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        address = self._broker.inter_broker_address(leader)
        if address is None:
            return {}
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            topics.setdefault(topic, []).append(partition)
        request = make(lo_req.ListOffsetsRequest, replica_id=CONSUMER_REPLICA_ID, isolation_level=READ_UNCOMMITTED,
                       topics=tuple(make(lo_req.ListOffsetsTopic, name=topic, partitions=tuple(
                           make(lo_req.ListOffsetsPartition, partition_index=p, current_leader_epoch=-1,
                                timestamp=LATEST_TIMESTAMP) for p in ps)) for topic, ps in topics.items()))
        try:
            response: Any = await self._connections().request(*address, request, TIMEOUT_S)
        except (ConnectionFailed, TimeoutError):
            return {}
        return {(topic.name, p.partition_index): p.offset for topic in response.topics for p in topic.partitions
                if p.error_code == ErrorCode.none and p.offset >= 0}

    def _connections(self) -> ConnectionPool:
        if self._pool is None:  # made on first use: the inter-broker security is known once the broker started
            broker = self._broker
            self._pool = ConnectionPool(f"moldau-metrics-{broker.node_id}", broker.inter_broker_security,
                                        broker.inter_broker_authenticator(), broker.client_timeouts.setup)
        return self._pool

    def close(self) -> None:
        if self._running is not None:
            self._running.cancel()
        if self._pool is not None:
            self._pool.close()


def refresh_before_scrape(app: ASGIApp, refresh: Callable[[], Awaitable[None]]) -> ASGIApp:
    """`app`, with `refresh` awaited before each `GET /metrics` is answered (the collectors themselves are
    synchronous, as prometheus-client calls them)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/metrics":
            await refresh()
        await app(scope, receive, send)

    return wrapped
