"""The coordinators' internal topics (`__consumer_offsets`, `__transaction_state`), created on first need.

A coordinator asks for its topic when a client first looks for a coordinator; creation runs in the background,
one attempt at a time per topic, and FindCoordinator waits for it a bounded time. Kafka refuses to create the
topic until the configured replication factor's worth of brokers exist; Moldau gives a smaller cluster (a lone
node above all) as many replicas as it has brokers, so groups and transactions work out of the box.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

CreateTopic = Callable[[str, int, int, dict[str, str]], Awaitable[None]]
ConfigsFor = Callable[[int], dict[str, str]]  # the topic's configs, given the replication factor it gets


class InternalTopics:
    def __init__(self, image: Callable[[], MetadataImage], create_topic: CreateTopic) -> None:
        self._image = image
        self._create_topic = create_topic
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def request(self, name: str, partitions: int, replication_factor: int, configs_for: ConfigsFor) -> None:
        """Start creating the topic in the background, unless an attempt is under way."""
        task = self._tasks.get(name)
        if task is None or task.done():
            self._tasks[name] = asyncio.get_running_loop().create_task(
                self._create(name, partitions, replication_factor, configs_for))

    async def ensure(self, name: str, request: Callable[[], None], timeout_s: float) -> None:
        """Wait (bounded) for the topic to exist, asking for it if need be; errors are left to callers."""
        if name in self._image().topics_by_name:
            return
        request()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._tasks[name]), timeout_s)

    async def _create(self, name: str, partitions: int, configured_factor: int, configs_for: ConfigsFor) -> None:
        brokers = len(self._image().brokers)
        factor = min(configured_factor, max(1, brokers))
        if factor < configured_factor:
            log.info("creating %s with replication factor %d: only %d brokers are registered", name, factor, brokers)
        try:
            await self._create_topic(name, partitions, factor, configs_for(factor))
        except KafkaError as exc:
            if exc.code != ErrorCode.topic_already_exists:
                log.warning("cannot create %s: %s", name, exc.message)
