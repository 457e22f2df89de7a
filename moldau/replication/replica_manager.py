"""The replica manager: the partitions this broker hosts, kept in step with the metadata image, and replicated.

When an image changes, it creates the logs of partitions assigned to this broker, deletes the logs of partitions
that are gone, and gives each hosted partition its role from the image:

- *Leader*: appends (Produce, the group coordinator) go to its log; followers' fetches report their positions
  to its `LeaderState`, which decides the high watermark and ISR changes; ISR changes go to the controller as
  AlterPartition and take effect when committed. acks=all waits here until the high watermark passes the
  append, and honours min.insync.replicas.
- *Follower*: `ReplicaFetcher`s per leader broker (`num.replica.fetchers`) copy the leader's log
  (`on_fetched` appends, truncates a divergent suffix using leader epochs, follows the leader's high watermark
  and log start offset), as the rules of `follower_rules` decide.
- *Neither* (no leader): the log is kept, nothing happens until an image names a leader.

Fetches that wait for data register a future on the partition (no polling loops): a follower's is completed by
the next append, a consumer's by the next high watermark advance, which happens while serving the follower fetch
that reports the new offset (and releases the acks=all requests waiting for it in the same step).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from moldau.clock import Clock, SystemClock
from moldau.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import RESOURCE_BROKER
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import BatchHeader, split_batches
from moldau.protocol.record_validation import RecordsCheck
from moldau.replication.fetcher import FetcherSettings, FollowedPartition, ReplicaFetcher
from moldau.replication.fetcher_ids import fetcher_id
from moldau.replication.follower_rules import (
    StartOverAt,
    TruncateTo,
    divergence_truncation,
    high_watermark_after_fetch,
    log_start_after_fetch,
    out_of_range_action,
)
from moldau.replication.leader_state import LeaderState, ProposalOutcome, proposal_outcome
from moldau.replication.replica_selector import (
    RACK_AWARE_SELECTOR,
    ReplicaView,
    preferred_read_replica,
    read_candidates,
)
from moldau.replication.throttle import ReplicationQuotas
from moldau.storage.log import AppendResult, PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
# How soon a follower retries a partition whose leader has not yet learned of its own leadership.
_TRANSIENT_RETRY_MS = 50
# An image bringing more new logs than this (a large CreateTopics, not the 50 partitions of an internal topic) has
# their directories made on first use (`LogManager.create(defer=True)`) rather than all in one turn of the loop.
EAGER_NEW_LOGS_MAX = 64
_ALTER_PARTITION_RETRY_MS = 500
# How long after a leader last sent a consumer to a follower (KIP-392) it keeps giving followers each high watermark
# advance at once. Clients go back to the leader to ask again within metadata.max.age.ms (5 minutes by default, the
# Java client) or their lease on the follower (5 minutes, librdkafka), which renews this.
FOLLOWER_READ_LEASE_MS = 10 * 60 * 1000
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition item: the leader's proposed ISR for a partition, at the epochs it knows."""

    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    member_epochs: tuple[int, ...]  # broker epoch per ISR member, -1 for unchecked (KIP-903)


@dataclass(frozen=True, slots=True)
class IsrAnswer:
    """The controller's answer to one proposal: on success the partition as now committed."""

    error: ErrorCode
    isr: tuple[int, ...] = ()
    leader_epoch: int = -1
    partition_epoch: int = -1


AlterIsr = Callable[[IsrProposal], Awaitable[IsrAnswer]]


@dataclass(slots=True)
class _AckWaiter:
    required_offset: int
    future: asyncio.Future[ErrorCode]


@dataclass(slots=True)
class HostedPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader: int
    leader_epoch: int
    leader_state: LeaderState | None = None  # set while this broker leads the partition
    # Waiting fetches. Consumers' (and share fetches') wait for the high watermark to move; followers' for appends.
    # Kept apart so that an append does not wake consumers who may not read it yet, nor a high watermark advance
    # followers who have nothing new to copy: each needless wake is a fetch read again for nothing.
    waiters: set[asyncio.Future[None]] = field(default_factory=set)
    replica_waiters: set[asyncio.Future[None]] = field(default_factory=set)
    ack_waiters: list[_AckWaiter] = field(default_factory=list)
    # Until when consumers may be reading this partition from a follower the leader sent them to (KIP-392); while
    # they may, followers need every high watermark advance at once.
    follower_reads_until_ms: float = 0

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR while this broker leads the partition (only the leader acts on it); else empty."""
        return self.leader_state.isr if self.leader_state is not None else ()

    def acks_now(self, end_offset: int) -> ErrorCode | None:
        """What `ReplicaManager.wait_for_acks` answers without waiting, or None when it would wait: the answer when
        leadership is gone, or when the high watermark is already at `end_offset` (always so on a single replica),
        given as `release_acks` would give it. With waiters queued, the answer goes through them, in order."""
        if self.leader_state is None:
            return ErrorCode.not_leader_or_follower
        if end_offset <= self.log.high_watermark and not self.ack_waiters:
            enough = len(self.isr) >= self.log.config.min_insync_replicas
            return ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append
        return None

    def wake_waiters(self) -> None:
        """Wake every waiting fetch, consumers' and followers' (leadership moved, the broker stops)."""
        _wake(self.waiters)
        _wake(self.replica_waiters)

    def wake_consumers(self) -> None:
        """The high watermark moved: consumers may read more."""
        _wake(self.waiters)

    def wake_followers(self) -> None:
        """Records were appended: followers have something to copy."""
        _wake(self.replica_waiters)

    def release_acks(self, error: ErrorCode | None = None) -> None:
        """Answer acks=all waiters whose offset the high watermark has reached (all of them with `error`)."""
        if not self.ack_waiters:
            return
        hw = self.log.high_watermark
        keep = []
        for waiter in self.ack_waiters:
            if waiter.future.done():
                continue
            if error is not None:
                waiter.future.set_result(error)
            elif waiter.required_offset <= hw:
                enough = len(self.isr) >= self.log.config.min_insync_replicas
                waiter.future.set_result(ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append)
            else:
                keep.append(waiter)
        self.ack_waiters = keep


def _complete(future: asyncio.Future[T], result: T) -> None:
    """Complete a wait that timed out, unless it was answered meanwhile."""
    if not future.done():
        future.set_result(result)


def _wake(waiters: set[asyncio.Future[None]]) -> None:
    for waiter in waiters:
        if not waiter.done():
            waiter.set_result(None)
    waiters.clear()


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager,
                 log_config_for: Callable[[MetadataImage, str], LogConfig], clock: Clock | None = None,
                 lag_max_ms: int = 30_000, fetcher_settings: FetcherSettings | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self._log_config_for = log_config_for
        self._clock: Clock = clock or SystemClock()
        self.lag_max_ms = lag_max_ms
        self.fetcher_settings = fetcher_settings or FetcherSettings()
        # Replication quotas (KIP-73): the broker sets their rates from its configs (`configure_quotas`).
        self.quotas = ReplicationQuotas()
        self.partitions: dict[TopicPartition, HostedPartition] = {}
        # (leader id, fetcher id) -> its fetch loop; num.replica.fetchers loops per leader at most.
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.num_fetchers = 1
        # Wired by the broker once it can reach other nodes (single-node tests run without them).
        self.alter_isr: AlterIsr | None = None
        self.start_fetcher: Callable[[int, int], ReplicaFetcher] | None = None
        # This broker's epoch (its registration's), which its fetches as a follower name (KIP-903); -1: unknown.
        self.broker_epoch: Callable[[], int] = lambda: -1
        self._isr_task: asyncio.Task[None] | None = None
        self._proposals: set[asyncio.Task[None]] = set()
        # transaction.partition.verification.enable: whether a transaction's first write needs a verified guard.
        self.transaction_verification = True
        # Partitions assigned here whose log could not be opened for a storage reason (an offline log directory).
        self.offline_partitions: set[TopicPartition] = set()
        # ISR changes of partitions led here, committed by the controller (metrics: IsrShrinks, IsrExpands).
        self.isr_shrinks = 0
        self.isr_expands = 0
        # The last image applied in full (None: the next one visits every topic), and topics to visit again because
        # one of their logs could not be created.
        self._applied: MetadataImage | None = None
        self._retry_topics: set[uuid.UUID] = set()
        # replica.selector.class (KIP-392): with the rack-aware selector, leaders send consumers to the replica in
        # their rack, and followers need the high watermark at once to serve them (`_advance_high_watermark`).
        self.replica_selector: str | None = None
        self._live_racks: dict[int, str | None] = {}  # live broker -> its rack, from the last image

    def _now_ms(self) -> int:
        return int(self._clock.monotonic_ms())

    def start(self) -> None:
        """Start the periodic ISR check (followers lagging for too long leave the ISR)."""
        self._isr_task = asyncio.get_running_loop().create_task(self._check_isr_periodically())

    def close(self) -> None:
        if self._isr_task is not None:
            self._isr_task.cancel()
        for task in self._proposals:
            task.cancel()
        for fetcher in self._fetchers.values():
            fetcher.stop()
        self._fetchers.clear()
        for hosted in self.partitions.values():
            hosted.release_acks(ErrorCode.not_leader_or_follower)
            hosted.wake_waiters()

    # -- following the metadata image ---------------------------------------------------------------------------

    def apply_image(self, before: MetadataImage | None, image: MetadataImage) -> None:
        """Host, lead and follow the partitions `image` gives this broker. Only topics whose image changed since
        the last image applied in full are visited, so a metadata change costs O(topics), not O(partitions)."""
        applied, self._applied = self._applied, None  # an exception below leaves the next image a full pass
        self._live_racks = {b: r.rack for b, r in image.brokers.items() if not r.fenced}
        # Deletions first: on a full disk they are what frees space for the rest.
        self._drop_removed(applied, image)
        failed = []
        offline: set[TopicPartition] = set()
        retry, self._retry_topics = self._retry_topics, set()
        changed = [topic for topic in image.topics_by_id.values()
                   if applied is None or applied.topics_by_id.get(topic.topic_id) is not topic
                   or topic.topic_id in retry]
        # Making a log's directory and files takes about half a millisecond on the event loop: an image bringing
        # thousands (one large CreateTopics) would hold every client up for seconds, so their logs are made on
        # first use instead.
        defer = self._new_logs(changed) > EAGER_NEW_LOGS_MAX
        for topic in changed:
            config = None
            for part in topic.partitions.values():
                if self.node_id in part.replicas:
                    if config is None:
                        config = self._log_config_for(image, topic.name)
                    try:
                        self._host(topic, part, config, defer)
                    except KafkaError as exc:  # one log that cannot be created must not stop the others
                        failed.append(f"{topic.name}-{part.partition} ({exc.message})")
                        self._retry_topics.add(topic.topic_id)
                        if exc.code == ErrorCode.kafka_storage_error:
                            offline.add((topic.name, part.partition))
        # Failed topics are all visited again (retry), so this pass sees every partition still failing.
        self.offline_partitions = offline
        if failed:
            # Retried at the next image; until then clients get KAFKA_STORAGE_ERROR for those whose storage failed
            # (an offline log directory), UNKNOWN_TOPIC_OR_PARTITION for the others.
            log.error("cannot host %d partitions: %s", len(failed), ", ".join(failed[:5]))
        if before is not None:
            self._reconfigure(before, image)
        self._stop_idle_fetchers()
        self._applied = image

    def _new_logs(self, topics: list[TopicImage]) -> int:
        """How many partitions of `topics` this broker is to host and does not host yet."""
        return sum(1 for topic in topics for part in topic.partitions.values()
                   if self.node_id in part.replicas and (topic.name, part.partition) not in self.partitions)

    def _host(self, topic: TopicImage, part: PartitionImage, config: LogConfig, defer: bool) -> None:
        key = (topic.name, part.partition)
        hosted = self.partitions.get(key)
        if hosted is not None and hosted.topic_id != topic.topic_id:
            self._delete(key)  # same name, new id: the old topic was deleted and recreated
            hosted = None
        if hosted is None:
            hosted = self._open(topic, part, config, defer)
            self.partitions[key] = hosted
        self._take_role(hosted, part)

    def _open(self, topic: TopicImage, part: PartitionImage, config: LogConfig, defer: bool) -> HostedPartition:
        plog = self.log_manager.get(topic.name, part.partition)
        if plog is not None and plog.topic_id not in (None, topic.topic_id):
            log.warning("deleting stale log of %s-%d (topic id %s, now %s)", topic.name, part.partition,
                        plog.topic_id, topic.topic_id)
            self.log_manager.delete(topic.name, part.partition)
            plog = None
        if plog is None:
            plog = self.log_manager.create(topic.name, part.partition, topic.topic_id, config,
                                           assigned_dir_id=part.directory_of(self.node_id), defer=defer)
        else:
            plog.config = config  # a log found on disk was opened with the defaults
        # The high watermark moves with the ISR (`_advance_high_watermark`), not with every append.
        plog.high_watermark_follows_log_end = False
        plog.transaction_verification = self.transaction_verification
        return HostedPartition(topic.name, part.partition, topic.topic_id, plog, NO_LEADER, -1)

    def _take_role(self, hosted: HostedPartition, part: PartitionImage) -> None:
        new_epoch = part.leader_epoch != hosted.leader_epoch or part.leader != hosted.leader
        hosted.leader = part.leader
        if part.leader == self.node_id:
            if new_epoch or hosted.leader_state is None:
                hosted.leader_epoch = part.leader_epoch
                self._become_leader(hosted, part)
            else:
                self._on_committed_state(hosted, part)
            return
        if hosted.leader_state is not None or new_epoch:
            hosted.leader_epoch = part.leader_epoch
            self._stop_leading(hosted)
        if part.leader == NO_LEADER:
            self._unfollow(hosted)
        else:
            self._follow(hosted, part.leader)

    def _become_leader(self, hosted: HostedPartition, part: PartitionImage) -> None:
        self._unfollow(hosted)
        plog = hosted.log
        # Record where this epoch starts, so followers asking about earlier epochs learn where those end even
        # before anything is written in this one (Kafka does this at the leadership change too). In memory: the
        # first append in the epoch writes the file, so that taking thousands of leaderships writes none.
        plog.begin_leader_epoch(hosted.leader_epoch)
        hosted.leader_state = LeaderState(self.node_id, part.replicas, part.isr, part.leader_epoch,
                                          part.partition_epoch, plog.log_end_offset, self.lag_max_ms,
                                          self._now_ms())
        log.debug("leading %s-%d at epoch %d (ISR %s, log end %d)", hosted.topic, hosted.partition,
                  hosted.leader_epoch, list(part.isr), plog.log_end_offset)
        self._advance_high_watermark(hosted)

    def _on_committed_state(self, hosted: HostedPartition, part: PartitionImage) -> None:
        state = hosted.leader_state
        assert state is not None
        before = set(state.isr)
        state.on_committed(part.replicas, part.isr, part.partition_epoch, self._now_ms())
        after = set(state.isr)
        self.isr_shrinks += bool(before - after)
        self.isr_expands += bool(after - before)
        self._advance_high_watermark(hosted)
        hosted.release_acks()

    def _stop_leading(self, hosted: HostedPartition) -> None:
        hosted.leader_state = None
        hosted.release_acks(ErrorCode.not_leader_or_follower)
        hosted.wake_waiters()

    def _follow(self, hosted: HostedPartition, leader: int) -> None:
        key = (hosted.topic, hosted.partition)
        fetcher_key = (leader, fetcher_id(hosted.topic, hosted.partition, self.num_fetchers))
        for other_key, fetcher in self._fetchers.items():
            if other_key != fetcher_key:
                fetcher.unfollow(key)
        if hosted.log.offline:
            # Its log directory failed: fetching would only make the leader count it in sync (KIP-112).
            self._unfollow(hosted)
            return
        followed = FollowedPartition(hosted.topic, hosted.partition, hosted.topic_id, hosted.leader_epoch)
        self._fetch_with(fetcher_key, followed)

    def _fetch_with(self, fetcher_key: tuple[int, int], followed: FollowedPartition) -> None:
        fetcher = self._fetchers.get(fetcher_key)
        if fetcher is None:
            if self.start_fetcher is None:
                return  # no network wiring (single-node unit tests)
            fetcher = self._fetchers[fetcher_key] = self.start_fetcher(*fetcher_key)
        fetcher.follow(followed)

    def set_num_fetchers(self, num_fetchers: int) -> None:
        """num.replica.fetchers changed: spread the followed partitions over that many fetchers per leader, as
        Kafka's resize does. What each partition's fetcher knew (its backoff after an error) moves with it; its
        position is the log's, so nothing is fetched twice or skipped."""
        if num_fetchers == self.num_fetchers:
            return
        log.info("num.replica.fetchers: %d fetchers per leader (was %d)", num_fetchers, self.num_fetchers)
        self.num_fetchers = num_fetchers
        followed = [(leader_id, p) for (leader_id, _), fetcher in self._fetchers.items()
                    for p in fetcher.partitions.values()]
        for fetcher in self._fetchers.values():
            fetcher.stop()
        self._fetchers.clear()
        for leader_id, p in followed:
            self._fetch_with((leader_id, fetcher_id(p.topic, p.partition, num_fetchers)), p)

    def fetchers(self) -> dict[tuple[int, int], list[TopicPartition]]:
        """(leader id, fetcher id) -> the partitions that fetcher copies, for tests and tools."""
        return {key: sorted(fetcher.partitions) for key, fetcher in self._fetchers.items()}

    def _unfollow(self, hosted: HostedPartition) -> None:
        key = (hosted.topic, hosted.partition)
        for fetcher in self._fetchers.values():
            fetcher.unfollow(key)

    def _stop_idle_fetchers(self) -> None:
        for fetcher_key, fetcher in list(self._fetchers.items()):
            if not fetcher.partitions:
                fetcher.stop()
                del self._fetchers[fetcher_key]

    def _drop_removed(self, applied: MetadataImage | None, image: MetadataImage) -> None:
        """Delete the logs of partitions gone from `image` or moved off this broker: among the topics that changed
        since `applied` (the last image applied in full), or among all hosted partitions without one."""
        if applied is None:
            candidates: list[TopicPartition] = list(self.partitions)
        else:
            candidates = [(old.name, p) for topic_id, old in applied.topics_by_id.items()
                          if image.topics_by_id.get(topic_id) is not old for p in old.partitions]
        for key in candidates:
            hosted = self.partitions.get(key)
            if hosted is None:
                continue
            topic = image.topics_by_id.get(hosted.topic_id)
            if topic is None or hosted.partition not in topic.partitions:
                self._delete(key)
            elif self.node_id not in topic.partitions[hosted.partition].replicas:
                self._delete(key)  # reassigned away from this broker

    def _delete(self, key: TopicPartition) -> None:
        hosted = self.partitions.pop(key)
        self._unfollow(hosted)
        self._stop_leading(hosted)
        self.log_manager.delete(*key)

    def _reconfigure(self, before: MetadataImage, image: MetadataImage) -> None:
        if before.configs is image.configs:
            return
        broker_changed = any(
            before.configs.get(key) != image.configs.get(key) for key in set(before.configs) | set(image.configs)
            if key[0] == RESOURCE_BROKER
        )
        for name in image.topics_by_name:
            if broker_changed or before.topic_configs(name) != image.topic_configs(name):
                self.log_manager.update_config(name, self._log_config_for(image, name))

    def drop_unknown_logs(self, image: MetadataImage) -> None:
        """Delete logs on disk that belong to no partition this broker hosts (a topic deleted while down)."""
        hosted = set(self.partitions)
        for topic, partition in self.log_manager.partitions():
            if (topic, partition) not in hosted:
                log.info("deleting log of %s-%d: not in the metadata", topic, partition)
                self.log_manager.delete(topic, partition)

    # -- access -------------------------------------------------------------------------------------------------

    def leader_partition(self, topic: str, partition: int) -> HostedPartition:
        """The partition if this broker leads it; raises KafkaError otherwise: KAFKA_STORAGE_ERROR (its log
        directory is offline), NOT_LEADER_OR_FOLLOWER (led elsewhere, or not hosted here although the metadata
        knows it, as Kafka answers: a client refreshes its metadata and goes to the leader),
        UNKNOWN_TOPIC_OR_PARTITION (not in the metadata)."""
        hosted = self.partitions.get((topic, partition))
        if hosted is None:
            if (topic, partition) in self.offline_partitions:
                raise KafkaError(ErrorCode.kafka_storage_error, f"{topic}-{partition} is in an offline log directory")
            if self._in_metadata(topic, partition):
                raise KafkaError(ErrorCode.not_leader_or_follower, f"{topic}-{partition} is not hosted here")
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if hosted.leader_state is None:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return hosted

    def readable_partition(self, topic: str, partition: int, follower_allowed: bool) -> HostedPartition:
        """The partition a consumer reads: led here, or, when `follower_allowed` (Fetch v11+, KIP-392), followed
        here. Raises KafkaError as `leader_partition` does."""
        hosted = self.partitions.get((topic, partition))
        if follower_allowed and hosted is not None:
            return hosted
        return self.leader_partition(topic, partition)

    def preferred_read_replica(self, hosted: HostedPartition, client_rack: str, fetch_offset: int) -> int | None:
        """The follower a consumer in `client_rack` fetching at `fetch_offset` should read from (KIP-392); None for
        this broker, the leader."""
        state = hosted.leader_state
        if self.replica_selector != RACK_AWARE_SELECTOR or not client_rack or state is None:
            return None  # before any work: most consumer fetches (LeaderSelector never sends them elsewhere)
        plog = hosted.log
        leader = ReplicaView(self.node_id, self._live_racks.get(self.node_id), plog.log_end_offset, 0)
        now_ms = self._now_ms()
        followers = read_candidates(state, fetch_offset, plog.log_start_offset, now_ms, self._live_racks)
        preferred = preferred_read_replica(self.replica_selector, client_rack, leader, followers)
        if preferred is not None:
            if hosted.follower_reads_until_ms <= now_ms:
                # The first follower reader: followers may be waiting with an old high watermark, since advances
                # were not sent at once until now; their waiting fetches are answered with it (the fetch handler).
                hosted.wake_followers()
            hosted.follower_reads_until_ms = now_ms + FOLLOWER_READ_LEASE_MS
        return preferred

    def has_follower_readers(self, hosted: HostedPartition) -> bool:
        """Whether consumers may be reading the partition from a follower this broker, its leader, sent them to."""
        return hosted.follower_reads_until_ms > self._now_ms()

    def _in_metadata(self, topic: str, partition: int) -> bool:
        image = self._applied
        known = image.topics_by_name.get(topic) if image is not None else None
        return known is not None and partition in known.partitions

    def check_leader_epoch(self, hosted: HostedPartition, current_leader_epoch: int) -> None:
        # -1 means the client does not know the epoch; older or newer ones mean one side has stale metadata.
        if current_leader_epoch == -1 or current_leader_epoch == hosted.leader_epoch:
            return
        if current_leader_epoch < hosted.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        raise KafkaError(ErrorCode.unknown_leader_epoch)

    async def wait_for_data(self, keys: list[TopicPartition], timeout_ms: float, replica: bool = False) -> None:
        """Return when any of these partitions gets a new high watermark (a follower's fetch, `replica`: an append),
        or leadership changes, or after the timeout."""
        if timeout_ms <= 0:
            return
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        hosted = [self.partitions[k] for k in keys if k in self.partitions]
        for h in hosted:
            (h.replica_waiters if replica else h.waiters).add(waiter)
        # Awaited directly, with a timer that completes it, not through asyncio.wait_for: that wraps the future
        # and resumes the fetch one event loop turn after the wake, behind whatever else that turn runs.
        timer = loop.call_later(timeout_ms / 1000.0, _complete, waiter, None)
        try:
            await waiter
        finally:
            timer.cancel()
            for h in hosted:
                (h.replica_waiters if replica else h.waiters).discard(waiter)

    # -- the leader's side --------------------------------------------------------------------------------------

    def append_as_leader(self, hosted: HostedPartition, batches: list[tuple[BatchHeader, memoryview]],
                         required_acks: int = 1, verification_guard: object | None = None,
                         records_check: RecordsCheck | None = None, *, own: bool = False) -> AppendResult:
        """Append to a partition led here. Raises KafkaError; with acks=all, NOT_ENOUGH_REPLICAS when the ISR is
        smaller than min.insync.replicas (checked before anything is written, as Kafka does). `own`: batches the
        broker built itself (see `PartitionLog.append`)."""
        if required_acks == -1:
            _require_min_isr(hosted)
        result = hosted.log.append(batches, hosted.leader_epoch, verification_guard, records_check, own=own)
        if not result.duplicate:
            self._after_leader_append(hosted)
        return result

    def append_marker(self, hosted: HostedPartition, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> AppendResult:
        """Write a transaction marker on a partition led here, acks=all (NOT_ENOUGH_REPLICAS up front when the ISR
        is below min.insync.replicas). Raises KafkaError."""
        _require_min_isr(hosted)
        result = hosted.log.append_marker(producer_id, producer_epoch, commit, coordinator_epoch,
                                          hosted.leader_epoch)
        self._after_leader_append(hosted)
        return result

    def _after_leader_append(self, hosted: HostedPartition) -> None:
        # Followers long-polling for this data get it at once; consumers when the high watermark passes it.
        hosted.wake_followers()
        self._advance_high_watermark(hosted)

    async def wait_for_acks(self, hosted: HostedPartition, end_offset: int, timeout_ms: int) -> ErrorCode:
        """Wait until the high watermark reaches `end_offset` (every ISR member has the records below it).

        NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the ISR is smaller than min.insync.replicas,
        NOT_LEADER_OR_FOLLOWER if leadership moves, REQUEST_TIMED_OUT after `timeout_ms`.
        """
        code = hosted.acks_now(end_offset)
        if code is not None:
            return code
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ErrorCode] = loop.create_future()
        hosted.ack_waiters.append(_AckWaiter(end_offset, future))
        hosted.release_acks()
        # A timer rather than asyncio.wait_for, for the same reason as in `wait_for_data`.
        timer = loop.call_later(timeout_ms / 1000, _complete, future, ErrorCode.request_timed_out)
        try:
            return await future
        finally:
            timer.cancel()

    def on_replica_fetch(self, hosted: HostedPartition, replica_id: int, fetch_offset: int,
                         broker_epoch: int = -1) -> None:
        """A follower (at `broker_epoch`, -1 if it did not say) fetched at `fetch_offset`: it has everything below.
        May move the HW and grow the ISR."""
        state = hosted.leader_state
        if state is None:
            return
        end = hosted.log.log_end_offset
        state.on_follower_fetch(replica_id, min(fetch_offset, end), end, self._now_ms(), broker_epoch)
        self._advance_high_watermark(hosted)
        expanded = state.expanded_isr(replica_id, hosted.log.high_watermark, self._now_ms())
        if expanded is not None:
            self._propose(hosted, expanded)

    def _advance_high_watermark(self, hosted: HostedPartition) -> None:
        state = hosted.leader_state
        if state is None:
            return
        hw = state.advanced_high_watermark(hosted.log.log_end_offset, hosted.log.high_watermark)
        if hw is not None:
            hosted.log.high_watermark = hw
            hosted.release_acks()
            hosted.wake_consumers()  # consumers waiting for committed records
            if hosted.follower_reads_until_ms and self.has_follower_readers(hosted):
                # Followers serve consumers up to their own high watermark, which they learn from their fetches:
                # answer their waiting fetches now (the fetch handler does when the high watermark moved), or a
                # consumer reading from a follower would wait for the next append, up to replica.fetch.wait.max.ms.
                hosted.wake_followers()

    # -- ISR changes --------------------------------------------------------------------------------------------

    async def _check_isr_periodically(self) -> None:
        interval_s = max(self.lag_max_ms / 2, 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.check_isr()
            except Exception:
                log.exception("ISR check failed")

    def check_isr(self) -> None:
        now_ms = self._now_ms()
        for hosted in self.partitions.values():
            state = hosted.leader_state
            if state is None:
                continue
            shrunk = state.shrunk_isr(now_ms)
            if shrunk is not None:
                lagging = [r for r in state.isr if r not in shrunk]
                log.info("%s-%d: replicas %s have not caught up for %d ms; leaving the ISR", hosted.topic,
                         hosted.partition, lagging, self.lag_max_ms)
                self._propose(hosted, shrunk)

    def _propose(self, hosted: HostedPartition, isr: tuple[int, ...]) -> None:
        state = hosted.leader_state
        if state is None or self.alter_isr is None:
            return
        state.propose(isr)
        self._advance_high_watermark(hosted)
        proposal = IsrProposal(hosted.topic_id, hosted.partition, state.leader_epoch, state.partition_epoch, isr,
                               state.member_epochs(isr))
        task = asyncio.get_running_loop().create_task(self._send_proposal(hosted, state, proposal))
        self._proposals.add(task)
        task.add_done_callback(self._proposals.discard)

    async def _send_proposal(self, hosted: HostedPartition, state: LeaderState, proposal: IsrProposal) -> None:
        """Send `proposal` until its outcome is known; it stays pending (the high watermark counts on the members
        it adds) until then, or until a metadata image settles it (`proposal_outcome`)."""
        assert self.alter_isr is not None
        while True:
            try:
                answer = await self.alter_isr(proposal)
            except Exception as exc:  # the controller is unreachable: whether it applied the change is unknown
                log.warning("AlterPartition for %s-%d failed: %s", hosted.topic, hosted.partition, exc)
                answer = IsrAnswer(ErrorCode.request_timed_out)
            if not _still_pending(hosted, state, proposal):
                return  # leadership changed, or an image committed a state, meanwhile
            outcome = proposal_outcome(answer.error, answer.leader_epoch, state.leader_epoch)
            if outcome is ProposalOutcome.COMMITTED:
                state.on_proposal_committed(answer.isr, answer.partition_epoch, self._now_ms())
                self._advance_high_watermark(hosted)
                hosted.release_acks()
                return
            if outcome is ProposalOutcome.AWAIT_METADATA:
                log.debug("AlterPartition for %s-%d answered %s: waiting for the metadata", hosted.topic,
                          hosted.partition, answer.error.name)
                return
            if outcome is ProposalOutcome.REFUSED:
                log.info("AlterPartition for %s-%d answered %s: back on the committed ISR", hosted.topic,
                         hosted.partition, answer.error.name)
                state.on_proposal_refused(self._now_ms())
                self._advance_high_watermark(hosted)  # acks waiting on a member it would have added go now
                return
            log.info("AlterPartition for %s-%d answered %s: sending it again", hosted.topic, hosted.partition,
                     answer.error.name)
            await asyncio.sleep(_ALTER_PARTITION_RETRY_MS / 1000)
            if not _still_pending(hosted, state, proposal):
                return

    # -- the follower's side ------------------------------------------------------------------------------------

    def now_ms(self) -> float:
        return self._clock.monotonic_ms()

    def follower_throttled(self, topic: str, partition: int) -> bool:
        """Whether the topic's follower.replication.throttled.replicas names this broker's replica of the partition."""
        hosted = self.partitions.get((topic, partition))
        return hosted is not None and hosted.log.config.follower_throttled_replicas.covers(partition, self.node_id)

    def leader_throttled(self, hosted: HostedPartition, replica_id: int) -> bool:
        """Whether a follower's fetch of a partition this broker leads is held to the leader's replication quota:
        the topic's leader.replication.throttled.replicas names this broker's replica and the follower is out of the
        ISR."""
        return (self.quotas.leader.limited and replica_id not in hosted.isr
                and hosted.log.config.leader_throttled_replicas.covers(hosted.partition, self.node_id))

    def follower_position(self, topic: str, partition: int) -> tuple[int, int, int]:
        """(log start offset, log end offset, epoch of the last record) of a followed partition."""
        plog = self.partitions[(topic, partition)].log
        return plog.log_start_offset, plog.log_end_offset, plog.latest_epoch

    def on_fetched(self, followed: FollowedPartition, answer: Any) -> float:
        """Apply a leader's answer for one partition; returns how many ms to wait before fetching it again."""
        hosted = self.partitions.get((followed.topic, followed.partition))
        if hosted is None or hosted.leader_state is not None:
            return 0
        error = ErrorCode(answer.error_code)
        try:
            if error == ErrorCode.none:
                return self._apply_fetched(hosted, answer)
            if error == ErrorCode.offset_out_of_range:
                # Refetch at once only if the log moved: the same fetch would be out of range again.
                return 0 if self._out_of_range(hosted, answer) else self.fetcher_settings.backoff_ms
        except KafkaError as exc:
            log.error("cannot apply fetched data of %s-%d: %s", hosted.topic, hosted.partition, exc.message)
            return self.fetcher_settings.backoff_ms
        if error in (ErrorCode.unknown_leader_epoch, ErrorCode.not_leader_or_follower):
            return _TRANSIENT_RETRY_MS  # the leader has not applied the image naming it yet
        log.info("fetch of %s-%d from broker %d: %s", hosted.topic, hosted.partition, hosted.leader, error.name)
        return self.fetcher_settings.backoff_ms

    def _apply_fetched(self, hosted: HostedPartition, answer: Any) -> float:
        plog = hosted.log
        diverging = answer.diverging_epoch
        if diverging is not None and diverging.epoch >= 0:
            if self._truncate_divergent(hosted, diverging.epoch, diverging.end_offset):
                return 0
            # The next fetch would ask the same and be told the same: back off rather than spin, and say so.
            log.warning("%s-%d: the leader says the logs diverge at epoch %d offset %d, but truncating changes "
                        "nothing here (log end %d, last epoch %d)", hosted.topic, hosted.partition,
                        diverging.epoch, diverging.end_offset, plog.log_end_offset, plog.leader_epochs.latest_epoch)
            return self.fetcher_settings.backoff_ms
        appended = False
        if answer.records:
            batches = split_batches(answer.records, from_client=False)
            if batches:
                plog.append_as_follower(batches)
                appended = True
        high_watermark = high_watermark_after_fetch(plog, answer.high_watermark)
        if appended or high_watermark != plog.high_watermark:  # else (most partitions of a fetch) nothing moved
            moved = high_watermark != plog.high_watermark
            plog.high_watermark = high_watermark
            if moved:
                hosted.wake_consumers()  # consumers reading from this follower (KIP-392)
        new_start = log_start_after_fetch(plog, answer.log_start_offset)
        if new_start is not None:  # retention or DeleteRecords moved the leader's log start
            plog.delete_records_before(new_start)
        return 0

    def _truncate_divergent(self, hosted: HostedPartition, leader_epoch: int, leader_end: int) -> bool:
        """Cut the suffix the leader does not have (KIP-279): to the end of the last epoch both logs share.
        Returns whether the log or its leader epochs changed."""
        plog = hosted.log
        target = divergence_truncation(plog, leader_epoch, leader_end).offset
        if target < plog.log_end_offset:
            log.info("%s-%d: truncating from %d to %d (diverged from the leader at epoch %d)", hosted.topic,
                     hosted.partition, plog.log_end_offset, target, leader_epoch)
            plog.truncate_to(target)
            return True
        # Nothing to cut, but an epoch this node led without writing may start at its log end: it goes too.
        epochs = plog.leader_epochs.entries
        plog.truncate_to(target)
        if plog.leader_epochs.entries == epochs:
            return False
        log.info("%s-%d: dropped leader epochs %s, which start at the log end %d and the leader does not have",
                 hosted.topic, hosted.partition, [e.epoch for e in epochs[len(plog.leader_epochs):]],
                 plog.log_end_offset)
        return True

    def _out_of_range(self, hosted: HostedPartition, answer: Any) -> bool:
        """Move this log back into the leader's range; whether it changed."""
        plog = hosted.log
        action = out_of_range_action(plog, answer.log_start_offset, answer.high_watermark)
        if isinstance(action, StartOverAt):
            log.info("%s-%d: the leader starts at %d, past this log's end %d; starting over there", hosted.topic,
                     hosted.partition, action.offset, plog.log_end_offset)
            plog.truncate_fully_and_start_at(action.offset)
        elif isinstance(action, TruncateTo):
            plog.truncate_to(action.offset)
        return action is not None

    def hosted_for_replica(self, topic: str, partition: int, replica_id: int) -> HostedPartition:
        """The partition, if led here and `replica_id` is one of its replicas. Raises KafkaError."""
        hosted = self.leader_partition(topic, partition)
        assert hosted.leader_state is not None
        if replica_id not in hosted.leader_state.replicas:
            raise KafkaError(ErrorCode.not_leader_or_follower,
                             f"broker {replica_id} is not a replica of {topic}-{partition}")
        return hosted


def _still_pending(hosted: HostedPartition, state: LeaderState, proposal: IsrProposal) -> bool:
    return hosted.leader_state is state and state.pending_isr == proposal.isr


def _require_min_isr(hosted: HostedPartition) -> None:
    if len(hosted.isr) < hosted.log.config.min_insync_replicas:
        raise KafkaError(ErrorCode.not_enough_replicas,
                         f"the ISR of {hosted.topic}-{hosted.partition} is {list(hosted.isr)}, fewer than "
                         f"min.insync.replicas={hosted.log.config.min_insync_replicas}")
