"""The share coordinator of one broker: the `__share_group_state` partitions it leads and the share-partition
snapshots they hold.

- The topic is created on first use, through the controller, with `share.coordinator.state.topic.*` settings
  and `cleanup.policy=compact` (the latest snapshot of each share-partition is all that matters).
- A partition led here is loaded by replaying its log (the last snapshot per key wins); one led elsewhere, or
  whose leader epoch moved, is dropped and reloaded.
- `write` appends a snapshot and answers only once it is durable (on every in-sync replica); only then does
  `read` return it. A write or read from a share-partition leader older than the last one seen for the key
  (a lower leader epoch) is refused with FENCED_LEADER_EPOCH, so a deposed leader cannot overwrite its
  successor's state. A write with a state epoch older than the one held (FENCED_STATE_EPOCH) comes from a leader
  that has not seen an administrator's reset of the share-partition, and is refused too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

from moldau.config import BrokerConfig
from moldau.coordinator.internal_topic import ReplicaLog, build_batch
from moldau.coordinator.log import CoordinatorLog, LogRecord, read_partition
from moldau.coordinator.record_codec import RecordFormatError
from moldau.coordinator.shards import CoordinatorShards
from moldau.coordinator.share.records import (
    SHARE_STATE_TOPIC,
    ShareSnapshot,
    StateKey,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShareStateSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    write_timeout_ms: int = 5000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(num_partitions=config.share_coordinator_state_topic_num_partitions,
                   replication_factor=config.share_coordinator_state_topic_replication_factor,
                   min_isr=config.share_coordinator_state_topic_min_isr)

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        return {"cleanup.policy": "compact", "min.insync.replicas": str(min(self.min_isr, replication_factor))}


@dataclass(slots=True)
class ShareStateShard:
    partition: int
    leader_epoch: int
    snapshots: dict[StateKey, ShareSnapshot] = field(default_factory=dict)
    fences: dict[StateKey, int] = field(default_factory=dict)  # the highest share-partition leader epoch seen
    ends: dict[StateKey, int] = field(default_factory=dict)  # the log offset of the snapshot held


class ShareCoordinator:
    def __init__(self, node_id: int, settings: ShareStateSettings, image: Callable[[], MetadataImage],
                 request_topic: Callable[[], None], log: ReplicaManager | CoordinatorLog) -> None:
        self.node_id = node_id
        self.settings = settings
        self.log: CoordinatorLog = ReplicaLog(log, SHARE_STATE_TOPIC) if isinstance(log, ReplicaManager) else log
        self.partitions = CoordinatorShards[ShareStateShard](
            node_id, self.log, lambda: self.settings.num_partitions, image, request_topic,
            no_leader_message="the share state partition has no leader")

    # -- partitions ----------------------------------------------------------------------------------------

    def on_image(self, _before: MetadataImage | None, image: MetadataImage) -> None:
        self.partitions.follow(image, self._load, keep=lambda shard, epoch: shard.leader_epoch == epoch)

    def _load(self, partition: int, leader_epoch: int) -> ShareStateShard | None:
        if not self.partitions.is_loadable(partition):
            return None
        shard = ShareStateShard(partition, leader_epoch)
        for item in read_partition(self.log, partition):
            if not isinstance(item, LogRecord) or item.value is None:
                continue
            try:
                key, snapshot = decode_key(item.key), decode_value(item.value)
            except (RecordFormatError, UnicodeDecodeError, ValueError) as exc:
                log.warning("skipping unreadable record at %s-%d@%d: %s", SHARE_STATE_TOPIC, partition,
                            item.offset, exc)
                continue
            shard.snapshots[key] = snapshot
            shard.ends[key] = item.offset
            shard.fences[key] = max(shard.fences.get(key, -1), snapshot.leader_epoch)
        return shard

    def ensure_topic(self) -> None:
        """Raise COORDINATOR_NOT_AVAILABLE, and ask for the topic to be created, if it does not exist."""
        self.partitions.ensure_topic()

    def coordinator_node(self, key: StateKey) -> int:
        """The broker leading the key's partition. Raises KafkaError (COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.coordinator_node(key.coordinator_key)

    def close(self) -> None:
        self.partitions.clear()

    # -- reads and writes ----------------------------------------------------------------------------------

    def read(self, key: StateKey, leader_epoch: int) -> ShareSnapshot | None:
        """The key's last durable snapshot (None: never written). Raises KafkaError (NOT_COORDINATOR,
        COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH)."""
        shard = self.partitions.shard(key.coordinator_key)
        self._fence(shard, key, leader_epoch)
        return shard.snapshots.get(key)

    async def write(self, key: StateKey, snapshot: ShareSnapshot, now_ms: int) -> ErrorCode:
        """Append the snapshot; ErrorCode.none once it is durable and readable."""
        try:
            shard = self.partitions.shard(key.coordinator_key)
            self._fence(shard, key, snapshot.leader_epoch)
            self._fence_state(shard, key, snapshot.state_epoch)
            appended = self.log.append(shard.partition, build_batch([(encode_key(key), encode_value(snapshot))],
                                                                    now_ms))
        except KafkaError as exc:
            return write_error(exc.code)
        error = await self.log.await_durable(shard.partition, appended.last_offset + 1,
                                             self.settings.write_timeout_ms)
        if error != ErrorCode.none:
            return write_error(error)
        # Writes of one key may complete out of order; the one later in the log is the one replay keeps.
        if self.partitions.shards.get(shard.partition) is shard and appended.last_offset > shard.ends.get(key, -1):
            shard.snapshots[key] = snapshot
            shard.ends[key] = appended.last_offset
        return ErrorCode.none

    @staticmethod
    def _fence(shard: ShareStateShard, key: StateKey, leader_epoch: int) -> None:
        fence = shard.fences.get(key, -1)
        if leader_epoch < fence:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"leader epoch {leader_epoch} of {key.coordinator_key} is older than {fence}")
        shard.fences[key] = leader_epoch

    @staticmethod
    def _fence_state(shard: ShareStateShard, key: StateKey, state_epoch: int) -> None:
        """An administrator's reset (AlterShareGroupOffsets, DeleteShareGroupOffsets) writes the next state
        epoch: a share-partition leader still holding the state from before it must not write it back."""
        held = shard.snapshots.get(key)
        if held is not None and state_epoch < held.state_epoch:
            raise KafkaError(ErrorCode.fenced_state_epoch,
                             f"state epoch {state_epoch} of {key.coordinator_key} is older than {held.state_epoch}")


def write_error(code: ErrorCode) -> ErrorCode:
    """What a share-partition leader is told when the state log refuses a write: retriable errors, except a
    fenced leader, which must stop."""
    if code in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch, ErrorCode.not_coordinator,
                ErrorCode.coordinator_not_available):
        return code
    if code == ErrorCode.not_leader_or_follower:
        return ErrorCode.not_coordinator
    return ErrorCode.coordinator_not_available
