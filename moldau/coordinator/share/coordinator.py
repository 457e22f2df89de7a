"""The share coordinator of one broker: the `__share_group_state` partitions it leads and the share-partition
states they hold.

- The topic is created on first use, through the controller, with `share.coordinator.state.topic.*` settings,
  `cleanup.policy=delete` and no retention: as in Kafka, the coordinator itself deletes the records no state
  needs any more (every record before the oldest latest-snapshot of the partition's share-partitions), after each
  snapshot it writes. A topic made `compact` by an older version gets whole snapshots only: compaction would drop
  the updates between them.
- A write (WriteShareGroupState) names the SPSO and the batches that changed; the coordinator lays them over the
  share-partition's state and appends a ShareUpdate holding just them, or a whole ShareSnapshot for the first
  write of a state epoch and after `share.coordinator.snapshot.update.records.per.snapshot` updates.
- A partition led here is loaded by replaying its log: each snapshot replaces a share-partition's state, each
  update is applied over it, a tombstone deletes it. Records that cannot be read are skipped with a warning.
- Writes wait as share.coordinator.append.linger.ms says and are appended together, one batch per partition
  (`pending_writes`, `moldau.coordinator.append_linger`); each is laid over the state at once, so the next write of
  the key is laid over it, and undone if its batch's append fails.
- Writes are answered only once durable (on every in-sync replica); only then does `read` return them. A write or
  read from a share-partition leader older than the last one seen for the key (a lower leader epoch) is refused
  with FENCED_LEADER_EPOCH, a write of an older state epoch with FENCED_STATE_EPOCH, and a write of a state never
  initialized (or deleted since) with INVALID_REQUEST, as in Kafka: a deposed or stale leader cannot overwrite
  its successor's state, nor bring back a deleted one.
- InitializeShareGroupState starts a state; DeleteShareGroupState deletes one (tombstones for both record types);
  a state initialized after a delete gets a higher state epoch. An administrator's reset of a share-partition
  (AlterShareGroupOffsets) writes the next state epoch, or deletes the state (DeleteShareGroupOffsets), so the
  leader still holding the old one is refused when it writes and reads the new one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self, TypeVar

from moldau.clock import Clock, SystemClock
from moldau.config import BrokerConfig
from moldau.coordinator.append_linger import AppendLinger
from moldau.coordinator.flush_scheduler import FlushScheduler, assume_more_requests
from moldau.coordinator.internal_topic import ReplicaLog
from moldau.coordinator.log import CoordinatorLog, LogRecord, read_partition
from moldau.coordinator.record_codec import RecordFormatError
from moldau.coordinator.shards import CoordinatorShards
from moldau.coordinator.share.pending_writes import PendingWrites
from moldau.coordinator.share.records import (
    KEY_VERSION,
    SHARE_STATE_TOPIC,
    UPDATE_KEY_VERSION,
    ShareSnapshot,
    ShareUpdate,
    StateKey,
    decode_record_key,
    decode_update,
    decode_value,
    encode_key,
    encode_update,
    encode_value,
)
from moldau.coordinator.share.state import apply_update, merge_batches
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ShareStateSettings:
    num_partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    write_timeout_ms: int = 5000
    updates_per_snapshot: int = 500  # share.coordinator.snapshot.update.records.per.snapshot
    segment_bytes: int = 100 * 1024 * 1024  # share.coordinator.state.topic.segment.bytes
    compression_codec: int = 0  # share.coordinator.state.topic.compression.codec
    load_buffer_size: int = 5 * 1024 * 1024  # share.coordinator.load.buffer.size
    append_linger_ms: int = -1  # share.coordinator.append.linger.ms (-1: adaptive)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> Self:
        return cls(num_partitions=config.share_coordinator_state_topic_num_partitions,
                   replication_factor=config.share_coordinator_state_topic_replication_factor,
                   min_isr=config.share_coordinator_state_topic_min_isr,
                   updates_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot,
                   segment_bytes=config.share_coordinator_state_topic_segment_bytes,
                   compression_codec=config.share_coordinator_state_topic_compression_codec,
                   load_buffer_size=config.share_coordinator_load_buffer_size,
                   append_linger_ms=config.share_coordinator_append_linger_ms)

    def topic_configs(self, replication_factor: int) -> dict[str, str]:
        # Deleted by the coordinator (pruning), never by time or size: a state may be older than any retention.
        return {"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1",
                "segment.bytes": str(self.segment_bytes),
                "min.insync.replicas": str(min(self.min_isr, replication_factor))}


@dataclass(slots=True)
class ShareStateShard:
    partition: int
    leader_epoch: int
    snapshots: dict[StateKey, ShareSnapshot] = field(default_factory=dict)  # the durable states
    fences: dict[StateKey, int] = field(default_factory=dict)  # the highest share-partition leader epoch seen
    ends: dict[StateKey, int] = field(default_factory=dict)  # the log offset of the last record in `snapshots`
    heads: dict[StateKey, ShareSnapshot] = field(default_factory=dict)  # the states after the last append
    updates: dict[StateKey, int] = field(default_factory=dict)  # updates appended since the last snapshot
    snapshot_at: dict[StateKey, int] = field(default_factory=dict)  # the log offset of the last durable snapshot
    deleted: dict[StateKey, int] = field(default_factory=dict)  # the state epoch of a deleted state


class ShareCoordinator:
    def __init__(self, node_id: int, settings: ShareStateSettings, image: Callable[[], MetadataImage],
                 request_topic: Callable[[], None], log: ReplicaManager | CoordinatorLog, clock: Clock | None = None,
                 more_requests_this_turn: Callable[[], bool] = assume_more_requests) -> None:
        """`clock` times the append linger; `more_requests_this_turn`: whether other connections have requests to
        serve in this turn of the event loop (`moldau.server.connection.WokenConnections`), for the adaptive linger."""
        self.node_id = node_id
        self.settings = settings
        self.log: CoordinatorLog = (ReplicaLog(log, SHARE_STATE_TOPIC, settings.load_buffer_size)
                                    if isinstance(log, ReplicaManager) else log)
        self._replicas = log if isinstance(log, ReplicaManager) else None  # for the topic's policy and pruning
        self.partitions = CoordinatorShards[ShareStateShard](
            node_id, self.log, lambda: self.settings.num_partitions, image, request_topic,
            no_leader_message="the share state partition has no leader")
        self._pending = PendingWrites()
        self._flusher = FlushScheduler(AppendLinger(settings.append_linger_ms), clock or SystemClock(), self.flush,
                                       more_requests_this_turn)

    # -- partitions ----------------------------------------------------------------------------------------

    def on_image(self, _before: MetadataImage | None, image: MetadataImage) -> None:
        self.flush()  # the waiting writes were staged over the shards as they are: appended before any moves
        self.partitions.follow(image, self._load, keep=lambda shard, epoch: shard.leader_epoch == epoch)

    def _load(self, partition: int, leader_epoch: int) -> ShareStateShard | None:
        if not self.partitions.is_loadable(partition):
            return None
        shard = ShareStateShard(partition, leader_epoch)
        for item in read_partition(self.log, partition):
            if not isinstance(item, LogRecord):
                continue
            try:
                _replay(shard, item)
            except (RecordFormatError, UnicodeDecodeError, ValueError) as exc:
                log.warning("skipping unreadable record at %s-%d@%d: %s", SHARE_STATE_TOPIC, partition,
                            item.offset, exc)
        shard.heads = dict(shard.snapshots)
        return shard

    def ensure_topic(self) -> None:
        """Raise COORDINATOR_NOT_AVAILABLE, and ask for the topic to be created, if it does not exist."""
        self.partitions.ensure_topic()

    def coordinator_node(self, key: StateKey) -> int:
        """The broker leading the key's partition. Raises KafkaError (COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.coordinator_node(key.coordinator_key)

    def close(self) -> None:
        self.flush()
        self.partitions.clear()

    # -- reads and writes ----------------------------------------------------------------------------------

    def read(self, key: StateKey, leader_epoch: int) -> ShareSnapshot | None:
        """The key's durable state (None: never written). Raises KafkaError (NOT_COORDINATOR,
        COORDINATOR_NOT_AVAILABLE, FENCED_LEADER_EPOCH)."""
        shard = self.partitions.shard(key.coordinator_key)
        self._fence(shard, key, leader_epoch)
        return shard.snapshots.get(key)

    def summary(self, key: StateKey) -> ShareSnapshot | None:
        """The key's durable state, for describing it: no leader epoch is checked or recorded. Raises KafkaError
        (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
        return self.partitions.shard(key.coordinator_key).snapshots.get(key)

    async def write(self, key: StateKey, written: ShareSnapshot, now_ms: int) -> ErrorCode:
        """Lay the written SPSO and batches over the key's state and append them (an update, or a snapshot);
        ErrorCode.none once durable and readable."""
        try:
            shard = self.partitions.shard(key.coordinator_key)
            self._fence(shard, key, written.leader_epoch)
            head = shard.heads.get(key)
            if head is None:
                # Never initialized, or deleted since: a leader writing it holds a state nobody should keep.
                raise KafkaError(ErrorCode.invalid_request,
                                 "Write operation on uninitialized share partition not allowed.")
            if written.state_epoch < head.state_epoch:
                raise KafkaError(ErrorCode.fenced_state_epoch, f"state epoch {written.state_epoch} of "
                                 f"{key.coordinator_key} is older than {head.state_epoch}")
        except KafkaError as exc:
            return write_error(exc.code)
        if head.state_epoch != written.state_epoch:
            merged = ShareSnapshot(head.snapshot_epoch + 1, written.state_epoch,
                                   written.leader_epoch, written.start_offset,
                                   merge_batches((), written.batches, written.start_offset))
            return await self._append(shard, key, merged, snapshot=True, now_ms=now_ms)
        update = ShareUpdate(head.snapshot_epoch, written.leader_epoch, written.start_offset, written.batches)
        merged = apply_update(head, update)
        if shard.updates.get(key, 0) >= self.settings.updates_per_snapshot or not self._deltas(shard.partition):
            merged = ShareSnapshot(head.snapshot_epoch + 1, merged.state_epoch, merged.leader_epoch,
                                   merged.start_offset, merged.batches)
            return await self._append(shard, key, merged, snapshot=True, now_ms=now_ms)
        return await self._append(shard, key, merged, update=update, now_ms=now_ms)

    async def initialize(self, key: StateKey, state_epoch: int, start_offset: int, now_ms: int) -> ErrorCode:
        """Start the key's state at `start_offset` with nothing in flight, unless it has one already (then nothing
        changes). After a delete the state epoch is above the deleted state's, whatever the caller asked."""
        try:
            shard = self.partitions.shard(key.coordinator_key)
        except KafkaError as exc:
            return write_error(exc.code)
        if key in shard.heads:
            return ErrorCode.none
        epoch = max(state_epoch, shard.deleted.get(key, -1) + 1)
        return await self._append(shard, key, ShareSnapshot(0, epoch, -1, start_offset, ()), snapshot=True,
                                  now_ms=now_ms)

    async def delete(self, key: StateKey, now_ms: int) -> ErrorCode:
        """Delete the key's state (tombstones under both record types); ErrorCode.none also when it had none."""
        try:
            shard = self.partitions.shard(key.coordinator_key)
        except KafkaError as exc:
            return write_error(exc.code)
        if key not in shard.heads:
            return ErrorCode.none
        return await self._append(shard, key, None, now_ms=now_ms)

    async def _append(self, shard: ShareStateShard, key: StateKey, state: ShareSnapshot | None, *,
                      snapshot: bool = False, update: ShareUpdate | None = None, now_ms: int) -> ErrorCode:
        """Append the record making `state` the key's (a snapshot of it, the update leading to it, or tombstones
        when None) and wait until it is durable."""
        records: list[tuple[bytes, bytes | None]]
        if state is None:
            records = [(encode_key(key, KEY_VERSION), None), (encode_key(key, UPDATE_KEY_VERSION), None)]
        elif update is not None:
            records = [(encode_key(key, UPDATE_KEY_VERSION), encode_update(update))]
        else:
            records = [(encode_key(key, KEY_VERSION), encode_value(state))]
        landed = self._pending.add(shard.partition, records, now_ms, _lay_over(shard, key, state, update))
        if self._flusher.wrote(self._pending.bytes):
            self.flush()
        try:
            appended = await landed
        except KafkaError as exc:
            return write_error(exc.code)
        error = await self.log.await_durable(shard.partition, appended.last_offset + 1,
                                             self.settings.write_timeout_ms)
        if error != ErrorCode.none:
            return write_error(error)
        # Writes of one key may complete out of order; the one later in the log is the one replay keeps.
        if self.partitions.shards.get(shard.partition) is shard and appended.last_offset > shard.ends.get(key, -1):
            shard.ends[key] = appended.last_offset
            if state is None:
                shard.snapshots.pop(key, None)
                shard.snapshot_at.pop(key, None)
            else:
                shard.snapshots[key] = state
                if update is None:
                    shard.snapshot_at[key] = appended.first_offset
            if update is None:
                self._prune(shard)
        return ErrorCode.none

    def flush(self) -> None:
        """Append the waiting writes now, one batch per partition."""
        self._flusher.flushed()
        if self._pending:
            self._pending.flush(self.log.append, self.settings.compression_codec)

    def _deltas(self, partition: int) -> bool:
        """Whether updates may be written: not to a compacted topic, whose cleaner would keep only the last."""
        if self._replicas is None:
            return True
        try:
            return "delete" in self._replicas.leader_partition(SHARE_STATE_TOPIC, partition).log.config.cleanup_policy
        except KafkaError:
            return False

    def _prune(self, shard: ShareStateShard) -> None:
        """Delete the records before the oldest latest-snapshot of the partition's states: replay needs none of
        them (Kafka's pruning of the state topic, done here after each snapshot)."""
        if self._replicas is None or not shard.snapshot_at or not self._deltas(shard.partition):
            return
        # A state without a durable snapshot yet has all its records after every durable one.
        redundant = min(shard.snapshot_at.get(k, -1) for k in shard.snapshots)
        if redundant <= 0:
            return
        try:
            plog = self._replicas.leader_partition(SHARE_STATE_TOPIC, shard.partition).log
            if redundant > plog.log_start_offset:
                plog.delete_records_before(min(redundant, plog.high_watermark))
        except KafkaError as exc:
            log.warning("pruning %s-%d failed: %s", SHARE_STATE_TOPIC, shard.partition, exc.message)

    @staticmethod
    def _fence(shard: ShareStateShard, key: StateKey, leader_epoch: int) -> None:
        fence = shard.fences.get(key, -1)
        if leader_epoch < fence:
            raise KafkaError(ErrorCode.fenced_leader_epoch,
                             f"leader epoch {leader_epoch} of {key.coordinator_key} is older than {fence}")
        shard.fences[key] = leader_epoch



def _lay_over(shard: ShareStateShard, key: StateKey, state: ShareSnapshot | None,
              update: ShareUpdate | None) -> Callable[[], None]:
    """Make `state` the key's head (None: deleted), as replay will lay the write over the one before; returns what
    undoes it, for a batch whose append failed."""
    head, updates, deleted = shard.heads.pop(key, None), shard.updates.get(key), shard.deleted.get(key)
    if state is not None:
        shard.heads[key] = state
        shard.updates[key] = 0 if update is None else (updates or 0) + 1
    elif head is not None:
        shard.deleted[key] = head.state_epoch

    def undo() -> None:
        _restore(shard.heads, key, head)
        _restore(shard.updates, key, updates)
        _restore(shard.deleted, key, deleted)
    return undo


def _restore(values: dict[StateKey, V], key: StateKey, value: V | None) -> None:
    if value is None:
        values.pop(key, None)
    else:
        values[key] = value


def _replay(shard: ShareStateShard, item: LogRecord) -> None:
    """Apply one record of the log to the shard's states. Raises RecordFormatError (and the decoders' errors)."""
    record_type, key = decode_record_key(item.key)
    if item.value is None:
        gone = shard.snapshots.pop(key, None)
        if gone is not None:
            shard.deleted[key] = gone.state_epoch
        shard.snapshot_at.pop(key, None)
        shard.updates.pop(key, None)
        return
    if record_type == KEY_VERSION:
        state = decode_value(item.value)
        shard.snapshot_at[key] = item.offset
        shard.updates[key] = 0
    else:
        update = decode_update(item.value)
        current = shard.snapshots.get(key)
        if current is None:
            raise RecordFormatError(f"an update of {key.coordinator_key} without a snapshot before it")
        state = apply_update(current, update)
        shard.updates[key] = shard.updates.get(key, 0) + 1
    shard.snapshots[key] = state
    shard.ends[key] = item.offset
    shard.fences[key] = max(shard.fences.get(key, -1), state.leader_epoch)


def write_error(code: ErrorCode) -> ErrorCode:
    """What a share-partition leader is told when the state log refuses a write: retriable errors, except a
    fenced leader, which must stop."""
    if code in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch, ErrorCode.not_coordinator,
                ErrorCode.coordinator_not_available, ErrorCode.invalid_request):
        return code
    if code == ErrorCode.not_leader_or_follower:
        return ErrorCode.not_coordinator
    return ErrorCode.coordinator_not_available
