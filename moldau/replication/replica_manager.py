"""The replica manager: the partitions this broker hosts, kept in step with the metadata image.

When an image changes, it creates the logs of partitions assigned to this broker, records their leader epochs,
and deletes the logs of partitions that are gone. Produce appends through it and Fetch reads through it, so it
is also where long-polling fetches wait for data: a fetch that wants more bytes registers a future, and every
append completes the futures waiting on that partition (no polling loops).

Replication (followers, ISR, high watermark moving with acknowledgements) will live here; on a single node the
leader's log end offset is the high watermark.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from moldau.metadata.image import MetadataImage, PartitionImage, TopicImage
from moldau.metadata.records import RESOURCE_BROKER
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class HostedPartition:
    topic: str
    partition: int
    topic_id: uuid.UUID
    log: PartitionLog
    leader: int
    leader_epoch: int
    waiters: set[asyncio.Future[None]] = field(default_factory=set)

    def wake_waiters(self) -> None:
        for waiter in self.waiters:
            if not waiter.done():
                waiter.set_result(None)
        self.waiters.clear()


class ReplicaManager:
    def __init__(self, node_id: int, log_manager: LogManager,
                 log_config_for: Callable[[MetadataImage, str], LogConfig]) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self._log_config_for = log_config_for
        self.partitions: dict[TopicPartition, HostedPartition] = {}

    # -- following the metadata image ---------------------------------------------------------------------------

    def apply_image(self, before: MetadataImage | None, image: MetadataImage) -> None:
        # Deletions first: on a full disk they are what frees space for the rest.
        self._drop_removed(image)
        failed = []
        for topic in image.topics_by_id.values():
            config = None
            for part in topic.partitions.values():
                if self.node_id in part.replicas:
                    if config is None:
                        config = self._log_config_for(image, topic.name)
                    try:
                        self._host(topic, part, config)
                    except KafkaError as exc:  # one log that cannot be created must not stop the others
                        failed.append(f"{topic.name}-{part.partition} ({exc.message})")
        if failed:
            # Retried at the next image; until then clients get UNKNOWN_TOPIC_OR_PARTITION for these.
            log.error("cannot host %d partitions: %s", len(failed), ", ".join(failed[:5]))
        if before is not None:
            self._reconfigure(before, image)

    def _host(self, topic: TopicImage, part: PartitionImage, config: LogConfig) -> None:
        key = (topic.name, part.partition)
        hosted = self.partitions.get(key)
        if hosted is not None and hosted.topic_id == topic.topic_id:
            hosted.leader, hosted.leader_epoch = part.leader, part.leader_epoch
            return
        if hosted is not None:  # same name, new id: the old topic was deleted and recreated
            self._delete(key)
        plog = self.log_manager.get(topic.name, part.partition)
        if plog is not None and plog.topic_id not in (None, topic.topic_id):
            log.warning("deleting stale log of %s-%d (topic id %s, now %s)", topic.name, part.partition,
                        plog.topic_id, topic.topic_id)
            self.log_manager.delete(topic.name, part.partition)
            plog = None
        if plog is None:
            plog = self.log_manager.create(topic.name, part.partition, topic.topic_id, config)
        else:
            plog.config = config  # a log found on disk was opened with the defaults
        self.partitions[key] = HostedPartition(topic.name, part.partition, topic.topic_id, plog,
                                               part.leader, part.leader_epoch)

    def _drop_removed(self, image: MetadataImage) -> None:
        for key, hosted in list(self.partitions.items()):
            topic = image.topics_by_id.get(hosted.topic_id)
            if topic is None or hosted.partition not in topic.partitions:
                self._delete(key)

    def _delete(self, key: TopicPartition) -> None:
        hosted = self.partitions.pop(key)
        hosted.wake_waiters()
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
        """The partition if this broker leads it; raises KafkaError otherwise."""
        hosted = self.partitions.get((topic, partition))
        if hosted is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if hosted.leader != self.node_id:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return hosted

    def check_leader_epoch(self, hosted: HostedPartition, current_leader_epoch: int) -> None:
        # -1 means the client does not know the epoch; older or newer ones mean one side has stale metadata.
        if current_leader_epoch == -1 or current_leader_epoch == hosted.leader_epoch:
            return
        if current_leader_epoch < hosted.leader_epoch:
            raise KafkaError(ErrorCode.fenced_leader_epoch)
        raise KafkaError(ErrorCode.unknown_leader_epoch)

    async def wait_for_data(self, keys: list[TopicPartition], timeout_ms: float) -> None:
        """Return when any of these partitions gets an append, or after the timeout."""
        if timeout_ms <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        hosted = [self.partitions[k] for k in keys if k in self.partitions]
        for h in hosted:
            h.waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_ms / 1000.0)
        except TimeoutError:
            pass
        finally:
            for h in hosted:
                h.waiters.discard(waiter)
