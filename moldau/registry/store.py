"""The registry's state kept in the `_schemas` topic: replay on every broker, writes on exactly one.

Reads. Every broker tails partition 0 of `_schemas` through the Kafka Fetch API, from the partition's leader
over the inter-broker listener (so a broker holding no replica of the topic reads it just the same), up to the
high watermark only: a record is applied once it is committed, never before. `catch_up` waits for a fetch sent
after it was called, so it sees every write answered before the call.

Writes. The broker leading `_schemas`-0 is the registry's only writer: one write at a time (an asyncio lock),
the state replayed to the end of the local log first (every record committed), then the plan is made against
that state (ids are the largest id + 1), appended as one batch with acks=all, awaited until durable on every
in-sync replica, and applied. Any other broker raises NotWriter with the writer's registry URL, which it learns
from the writer's broker registration (see `service.py`), and the HTTP layer relays the request there. A
leadership change fences the old writer: its appends fail, or never become durable, and it answers 50001.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from kio.schema.fetch.v17 import request as fetch_req

from moldau.clock import Clock
from moldau.coordinator.internal_topic import ReplicaLog, build_batch
from moldau.metadata.image import MetadataImage
from moldau.net.client import ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_codec import decode_batch, whole_batches
from moldau.registry.core import NotWriter, RegistryCore
from moldau.registry.errors import RegistryError
from moldau.registry.operations import Plan
from moldau.registry.records import encode
from moldau.replication.replica_manager import ReplicaManager

__all__ = ["SCHEMAS_TOPIC", "SCHEMAS_TOPIC_CONFIGS", "TopicStore"]

log = logging.getLogger(__name__)

SCHEMAS_TOPIC = "_schemas"
SCHEMAS_TOPIC_CONFIGS = {"cleanup.policy": "compact"}
SCHEMAS_REPLICATION_FACTOR = 3  # capped at the number of brokers when the topic is created
FETCH_MAX_WAIT_MS = 250
FETCH_MAX_BYTES = 8 * 1024 * 1024
RETRY_S = 0.1
WRITE_TIMEOUT_S = 15.0
CATCH_UP_TIMEOUT_S = 15.0
_READ_CHUNK_BYTES = 1024 * 1024


class BrokerView(Protocol):
    """What the store needs of its broker."""

    @property
    def node_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def clock(self) -> Clock: ...
    def inter_broker_address(self, broker_id: int) -> tuple[str, int] | None: ...


class TopicStore:
    def __init__(self, core: RegistryCore, broker: BrokerView, pool: ConnectionPool,
                 writer_url: Callable[[int], str | None], ensure_topic: Callable[[float], Awaitable[None]]) -> None:
        self.core = core
        self._broker = broker
        self._pool = pool
        self._writer_url = writer_url  # a broker id's registry URL, from its registration
        self._ensure_topic = ensure_topic  # create `_schemas` if need be, waiting at most the given seconds
        self._log = ReplicaLog(broker.replicas, SCHEMAS_TOPIC)
        self._lock = asyncio.Lock()
        self._progress = asyncio.Condition()
        self.position = 0  # the next offset to apply
        self._topic_id: uuid.UUID | None = None  # the incarnation of `_schemas` the state was replayed from
        self._fetches_sent = 0
        self._fetches_done = 0
        self._last_high_watermark = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._tail())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    # -- reading --------------------------------------------------------------------------------------------------

    async def catch_up(self, timeout_s: float = CATCH_UP_TIMEOUT_S) -> None:
        topic = self._topic()
        if topic is None:
            return
        if self._leads_here():
            self._follow(topic)
            self._replay_local()
            return
        wanted = self._fetches_sent + 1  # a fetch sent from now on sees every write answered before now
        try:
            async with asyncio.timeout(timeout_s), self._progress:
                await self._progress.wait_for(
                    lambda: self._fetches_done >= wanted and self.position >= self._last_high_watermark)
        except TimeoutError:
            raise RegistryError.timeout("cannot read the _schemas topic up to date") from None

    async def _tail(self) -> None:
        while True:
            try:
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except (ConnectionFailed, TimeoutError, KafkaError) as exc:
                log.debug("reading %s: %s; retrying", SCHEMAS_TOPIC, exc)
                await asyncio.sleep(RETRY_S)
            except Exception:
                log.exception("reading %s failed; retrying", SCHEMAS_TOPIC)
                await asyncio.sleep(1.0)

    async def _fetch_once(self) -> None:
        topic = self._topic()
        leader = self._leader()
        address = self._broker.inter_broker_address(leader) if leader is not None else None
        if topic is None or address is None:
            await asyncio.sleep(RETRY_S)
            return
        self._follow(topic)
        # Counted before it is sent, uncounted when it answers nothing: `catch_up` waits for one sent after it.
        self._fetches_sent += 1
        try:
            response = await self._pool.request(address[0], address[1], self._fetch_request(topic),
                                                FETCH_MAX_WAIT_MS / 1000 + 10)
            parts = [p for t in response.responses for p in t.partitions if t.topic_id == topic]
            part = parts[0] if parts else None
            if topic != self._topic_id:
                raise KafkaError(ErrorCode.unknown_topic_id, f"{SCHEMAS_TOPIC} changed while the fetch was out")
            if part is None or part.error_code != ErrorCode.none:
                code = ErrorCode(part.error_code) if part is not None else \
                    ErrorCode(response.error_code) if response.error_code else ErrorCode.unknown_topic_or_partition
                raise KafkaError(code, f"fetching {SCHEMAS_TOPIC}-0 from broker {leader}")
        except BaseException:
            self._fetches_sent -= 1
            raise
        self._apply_batches([bytes(part.records or b"")])
        async with self._progress:
            self._fetches_done += 1
            self._last_high_watermark = part.high_watermark
            self._progress.notify_all()

    def _follow(self, topic_id: uuid.UUID) -> None:
        """Start over when `_schemas` was deleted and created again: its records are all new."""
        if self._topic_id is not None and topic_id != self._topic_id:
            log.warning("%s was created again; replaying it from the start", SCHEMAS_TOPIC)
            self.core.state.reset()
            self.position = 0
        self._topic_id = topic_id

    def _fetch_request(self, topic_id: uuid.UUID) -> Any:
        partition = make(fetch_req.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=self.position,
                         last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=FETCH_MAX_BYTES,
                         replica_directory_id=None)
        return make(fetch_req.FetchRequest, cluster_id=None,
                    replica_state=make(fetch_req.ReplicaState, replica_id=-1, replica_epoch=-1),
                    max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS), min_bytes=1,
                    max_bytes=FETCH_MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
                    topics=(make(fetch_req.FetchTopic, topic_id=topic_id, partitions=(partition,)),),
                    forgotten_topics_data=(), rack_id="")

    def _apply_batches(self, chunks: Iterable[bytes]) -> None:
        """Apply the records of whole batches at or past `position` (a read may start inside a batch, and the
        writer may have applied some already)."""
        for data in chunks:
            for header, batch in whole_batches(data):
                if header.next_offset <= self.position:
                    continue
                if not header.is_control:
                    for record in decode_batch(batch):
                        if record.offset >= self.position and record.key is not None:
                            self.core.state.apply(record.key, record.value, record.offset)
                self.position = header.next_offset

    def _replay_local(self) -> None:
        """On the leader: apply what its own log holds up to the high watermark."""
        plog = self._broker.replicas.leader_partition(SCHEMAS_TOPIC, 0).log
        end = plog.high_watermark
        while self.position < end:
            data = plog.read(self.position, _READ_CHUNK_BYTES, min_one_batch=True, max_offset=end).read_bytes()
            if not data:
                return
            self._apply_batches([data])

    # -- writing --------------------------------------------------------------------------------------------------

    async def write(self, plan: Callable[[], Plan]) -> Any:
        await self._become_ready()
        async with self._lock:
            await self._replay_to_end()
            planned = plan()
            if not planned.records:
                return planned.answer
            records = [(encode(key), encode(value)) for key, value in planned.records]
            batch = build_batch([(k, v) for k, v in records if k is not None], self._broker.clock.time_ms())
            try:
                appended = self._log.append(0, batch)
            except KafkaError as exc:
                if exc.code == ErrorCode.not_leader_or_follower:
                    raise NotWriter(self._url_of_leader()) from exc
                raise RegistryError.store_error(exc.message or exc.code.name) from exc
            error = await self._log.await_durable(0, appended.last_offset + 1, int(WRITE_TIMEOUT_S * 1000))
            if error != ErrorCode.none:
                raise RegistryError.store_error(f"the write did not become durable: {error.name}")
            self._replay_local()
            return planned.answer

    async def _become_ready(self) -> None:
        """Have the topic exist and a leader known; raise NotWriter unless that leader is this broker."""
        if self._topic() is None:
            await self._ensure_topic(WRITE_TIMEOUT_S)
        deadline = asyncio.get_running_loop().time() + WRITE_TIMEOUT_S
        while not self._leads_here():
            leader = self._leader()
            if leader is not None and leader != self._broker.node_id and self._writer_url(leader):
                raise NotWriter(self._writer_url(leader))
            if asyncio.get_running_loop().time() > deadline:
                raise RegistryError.timeout(f"no leader for {SCHEMAS_TOPIC}")
            await asyncio.sleep(RETRY_S)

    async def _replay_to_end(self) -> None:
        """Apply every record of the local log, waiting until all are committed (a new leader may hold some
        that are not yet)."""
        topic = self._topic()
        if topic is not None:
            self._follow(topic)
        deadline = asyncio.get_running_loop().time() + WRITE_TIMEOUT_S
        while True:
            try:
                end = self._log.log_end_offset(0)
                committed = self._log.high_watermark(0)
            except KafkaError as exc:
                raise NotWriter(self._url_of_leader()) from exc
            self._replay_local()
            if committed >= end and self.position >= end:
                return
            if asyncio.get_running_loop().time() > deadline:
                raise RegistryError.timeout(f"{SCHEMAS_TOPIC} has uncommitted records")
            await asyncio.sleep(0.02)

    # -- where things are -------------------------------------------------------------------------------------

    def _topic(self) -> uuid.UUID | None:
        topic = self._broker.image.topics_by_name.get(SCHEMAS_TOPIC)
        return topic.topic_id if topic is not None else None

    def _leader(self) -> int | None:
        topic = self._broker.image.topics_by_name.get(SCHEMAS_TOPIC)
        partition = topic.partitions.get(0) if topic is not None else None
        return partition.leader if partition is not None and partition.leader >= 0 else None

    def _leads_here(self) -> bool:
        try:
            self._log.leader_epoch(0)
        except KafkaError:
            return False
        return True

    def _url_of_leader(self) -> str | None:
        leader = self._leader()
        return self._writer_url(leader) if leader is not None and leader != self._broker.node_id else None
