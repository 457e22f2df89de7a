"""The broker's share groups: membership of the groups it coordinates, the share-partitions of the partitions it
leads, and the share sessions of the members fetching from it.

Share-partition state is durable through a `StateStore` (the share coordinator, `moldau.coordinator.share`):
read when a share-partition is first used here (initialized first when it has none), written after every
acknowledgement (answered once the write is durable), and after releases and expired locks (in the background),
so deliveries are counted across restarts; only an acquisition in progress is not. A write names only the batches
that changed since the last one sent (the coordinator lays them over the state it has), or the whole window after
a write failed. Group membership is written to `__consumer_offsets` by the group coordinator
(`DurableShareGroups`, `moldau.server.share_group_records`), and a group known only from there (after a restart of
its coordinator) is taken back here at its written epoch with its written members, each given a fresh session, so
members still running carry on with their epochs. Share sessions are in memory. When the last share session of a
group here ends, its share-partitions are written and dropped from memory, so the next fetch reads back whatever
an administrator set meanwhile (the offset APIs need the group empty).

Time is the injected clock's monotonic milliseconds. Expired members are removed on the next share request and by
the broker's sweep (`expire_members`, which notes the groups whose members must be written again), expired locks
released lazily, on the next share request that touches them; a ShareFetch waiting for records is woken by appends
to its partitions and by records made available again (released, or their member gone).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from moldau.config.offset_reset import BY_DURATION, duration_ms
from moldau.coordinator.group.records import ShareMemberValue
from moldau.coordinator.share.records import ShareSnapshot, StateBatch, StateKey
from moldau.coordinator.share.state import delivering_count
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.group import Heartbeat, HeartbeatAnswer, ShareGroup, ShareMember
from moldau.share.partition import ArchivedRecord, RecordState, SharePartition
from moldau.share.sessions import ShareSessions
from moldau.share.settings import ShareBrokerSettings

if TYPE_CHECKING:
    from moldau.clock import Clock
    from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

SessionPartition = tuple[uuid.UUID, int]  # (topic id, partition), as ShareFetch names them
PartitionKey = tuple[str, str, int]  # (group, topic, partition)
# Where archived records go when the group has a dead-letter topic (`moldau.server.dead_letters`).
DeadLetterSink = Callable[[PartitionKey, ShareBrokerSettings, list[ArchivedRecord]], Coroutine[Any, Any, None]]
_NO_CONFIGS: Mapping[str, str] = MappingProxyType({})
_DONE = (int(RecordState.ACKNOWLEDGED), int(RecordState.ARCHIVED))


class StateStore(Protocol):
    """Where share-partition state is durable: the share coordinator, here or on another broker."""

    async def read(self, key: StateKey, leader_epoch: int) -> ShareSnapshot | None:
        """None: never written. Raises KafkaError."""
        ...

    async def write(self, key: StateKey, snapshot: ShareSnapshot) -> ErrorCode:
        """Lay the snapshot's SPSO and batches over the durable state."""
        ...

    async def initialize(self, key: StateKey, start_offset: int) -> ErrorCode:
        """Start a state at `start_offset` (nothing changes if it has one already)."""
        ...

    async def delete(self, key: StateKey) -> ErrorCode:
        """Delete the state (ErrorCode.none also when it had none)."""
        ...


class DurableShareGroups(Protocol):
    """The share groups written to `__consumer_offsets` on the partitions coordinated here, by their epoch, and
    their members."""

    def share_group_epoch(self, group_id: str) -> int | None:
        ...

    def share_group_epochs(self) -> Mapping[str, int]:
        ...

    def share_group_members(self, group_id: str) -> Mapping[str, ShareMemberValue]:
        ...

    def share_group_load(self, group_id: str) -> int | None:
        """Which loading of the group's `__consumer_offsets` partition coordinates it here (None: none)."""
        ...


class ShareOffsets(NamedTuple):
    """What describing a share group's offsets tells of one share-partition."""

    start_offset: int  # the SPSO
    done: int  # records past it acknowledged or archived
    delivering: int  # records past it acquired, or available again after a delivery


class ShareGroups:
    def __init__(self, settings: ShareBrokerSettings, clock: Clock, replicas: ReplicaManager,
                 store: StateStore | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: _NO_CONFIGS,
                 dead_letters: DeadLetterSink | None = None, durable: DurableShareGroups | None = None) -> None:
        """`store`: where share-partition state is kept (None: in memory only, for tests); `group_configs`: a
        group's own configs (the metadata image's GROUP resources); `dead_letters`: where records archived in a
        group with a dead-letter topic are sent; `durable`: the groups written to `__consumer_offsets`."""
        self.settings = settings
        self._written_groups = durable
        self._group_configs = group_configs
        self._group_settings: dict[str, tuple[Mapping[str, str], ShareBrokerSettings]] = {}
        self._dead_letters = dead_letters
        self._background: set[asyncio.Task[None]] = set()  # dead-letter writes, unloads of idle groups
        self._store = store
        self._loading: dict[tuple[str, str, int], asyncio.Task[SharePartition]] = {}
        self._durable: dict[tuple[str, str, int], tuple[StateKey, int, int]] = {}  # key, leader and state epoch
        # Per offset of the window, the (state, delivery count) last sent to the store: what a write may leave out.
        self._sent: dict[tuple[str, str, int], dict[int, tuple[int, int]]] = {}
        self._sent_start: dict[tuple[str, str, int], int] = {}  # and the SPSO
        self._writes: set[asyncio.Task[ErrorCode]] = set()
        self._clock = clock
        self._replicas = replicas
        self.groups: dict[str, ShareGroup] = {}
        self.expired_in: set[str] = set()  # groups that lost members to expiry since `take_expired_in`
        self._loaded_from: dict[str, int | None] = {}  # per group in memory, the loading it was taken from
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: ShareSessions[SessionPartition] = ShareSessions(settings.max_sessions)
        self._waiters: set[asyncio.Future[None]] = set()

    def now_ms(self) -> int:
        return int(self._clock.monotonic_ms())

    def group_settings(self, group_id: str) -> ShareBrokerSettings:
        """The broker's settings with the group's own configs; recomputed when those change, so a config altered
        takes effect at the group's next heartbeat or share request."""
        overrides = self._group_configs(group_id)
        cached = self._group_settings.get(group_id)
        if cached is not None and cached[0] is overrides:
            return cached[1]
        settings = self.settings.for_group(overrides)
        self._group_settings[group_id] = (overrides, settings)
        return settings

    # -- membership ----------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, request: Heartbeat, partitions_of: Callable[[str], int | None]
                  ) -> HeartbeatAnswer:
        now = self.now_ms()
        self.expire_members(now)
        group = self._adopt(group_id) or self._create(group_id)
        group.settings = self.group_settings(group_id).membership
        # A member leaving (epoch -1) keeps its share sessions: a closing consumer sends its last acknowledgements
        # and closes them (epoch -1) in parallel with the leave, and they must still find what it holds.
        return group.heartbeat(request, now, partitions_of)

    def ensure_group(self, group_id: str) -> ShareGroup:
        """The share group, created empty if it is not known (an administrator may set its offsets first)."""
        return self._adopt(group_id) or self._create(group_id)

    def describe(self, group_id: str) -> ShareGroup | None:
        """The share group as coordinated here now. Describing expires nobody: silent members are removed by
        heartbeats and by the broker's sweep, which write their leaving, so what is described is what a restart
        would take back."""
        return self._adopt(group_id)

    def list_groups(self) -> list[ShareGroup]:
        """The share groups coordinated here: with written groups, exactly those written on the partitions this
        broker coordinates (not one still in memory here whose coordinator moved, nor one never written)."""
        if self._written_groups is None:
            return list(self.groups.values())
        return [group for group in map(self._adopt, self._written_groups.share_group_epochs()) if group is not None]

    def _adopt(self, group_id: str) -> ShareGroup | None:
        """The group in memory; one written to `__consumer_offsets` but not here (its coordinator restarted) is
        taken back at the epoch written, so its epochs go on from there, with the members written, each with a
        fresh session (a member still running carries on at its epoch; one gone expires)."""
        group = self.groups.get(group_id)
        written = self._written_groups
        if written is None:
            return group
        load = written.share_group_load(group_id)
        if group is not None and self._loaded_from.get(group_id) == load:
            return group
        # Not in memory, or kept from an earlier time this broker coordinated it (the group's partition was led
        # elsewhere meanwhile, and its coordinator there may have changed it): what is written now is the group.
        self.groups.pop(group_id, None)
        self._loaded_from.pop(group_id, None)
        epoch = written.share_group_epoch(group_id)
        if epoch is None:
            return None
        settings = self.group_settings(group_id).membership
        group = self.groups[group_id] = ShareGroup(group_id, settings, epoch)
        self._loaded_from[group_id] = load
        deadline = self.now_ms() + settings.session_timeout_ms
        for member_id, m in written.share_group_members(group_id).items():
            # No assignment yet: the group learns its topics' partition counts at the next heartbeat, which moves
            # the epoch, so every member is sent its assignment again.
            group.members[member_id] = ShareMember(member_id, m.member_epoch, m.subscribed_topics, deadline,
                                                   m.rack_id, m.client_id, m.client_host)
        return group

    def _create(self, group_id: str) -> ShareGroup:
        """A new, empty share group (it is written with its first member, or an administrator's offsets)."""
        group = self.groups[group_id] = ShareGroup(group_id, self.group_settings(group_id).membership)
        if self._written_groups is not None:
            self._loaded_from[group_id] = self._written_groups.share_group_load(group_id)
        return group

    def delete_group(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else it goes, with its
        share-partitions on this broker. None: no such share group here."""
        self.expire_members(self.now_ms())
        group = self._adopt(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        self._loaded_from.pop(group_id, None)
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._forget(key)
        return ErrorCode.none

    def expire_members(self, now_ms: int) -> None:
        for group in self.groups.values():
            gone = group.expire(now_ms)
            if gone:
                self.expired_in.add(group.group_id)
            for member_id in gone:
                self.member_gone(group.group_id, member_id)

    def take_expired_in(self) -> set[str]:
        """The groups that lost members to expiry since the last call: their members must be written again."""
        taken, self.expired_in = self.expired_in, set()
        return taken

    def member_gone(self, group_id: str, member_id: str) -> None:
        """The member was removed for silence: its session ends and what it held here is released."""
        self.sessions.close(group_id, member_id)
        self.release(group_id, member_id)

    def connection_closed(self, connection: str) -> None:
        """The sessions of a connection that is gone end, and their members' records here are released."""
        for session in self.sessions.close_connection(connection):
            self.release(session.group_id, session.member_id)

    def release(self, group_id: str, member_id: str) -> None:
        for key, partition in self.partitions.items():
            if key[0] == group_id and partition.release_member(member_id):
                self.persist_later(key)  # the deliveries it had are counted after a restart too
        self.notify()
        if self._store is not None and not self._has_sessions(group_id):
            task = asyncio.get_running_loop().create_task(self._unload_when_idle(group_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    def _has_sessions(self, group_id: str) -> bool:
        return any(s.group_id == group_id for s in self.sessions.all())

    async def _unload_when_idle(self, group_id: str) -> None:
        """No member of the group fetches from this broker any more: write its share-partitions and drop them
        from memory, so that the next fetch reads the durable state back. An administrator's reset
        (AlterShareGroupOffsets, DeleteShareGroupOffsets) needs the group empty, and may be made through another
        broker: this is how a partition leader elsewhere sees it."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            found = self.partitions.get(key)
            if found is None:
                continue
            await self.persist(key)
            acquired = any(r.state == RecordState.ACQUIRED for r in found.records.values())
            if self.partitions.get(key) is found and not acquired and not self._has_sessions(group_id):
                del self.partitions[key]
                self._durable.pop(key, None)

    def persist_later(self, key: tuple[str, str, int]) -> None:
        """Write the share-partition's state without waiting for it (releases and expired locks)."""
        task = asyncio.get_running_loop().create_task(self.persist(key))
        self._writes.add(task)
        task.add_done_callback(self._written)

    def _written(self, task: asyncio.Task[ErrorCode]) -> None:
        self._writes.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("writing share-partition state failed: %r", task.exception())

    # -- share-partitions ----------------------------------------------------------------------------------

    async def share_partition(self, group_id: str, topic: str, partition: int, topic_id: uuid.UUID,
                              leader_epoch: int, log_start: int, log_end: int) -> SharePartition:
        """The group's share-partition of a partition led here: loaded from its durable state the first time
        (or started from `share.auto.offset.reset`, and that start made durable); records the log no longer has
        are archived. Raises KafkaError when the share coordinator cannot be reached (yet)."""
        key = (group_id, topic, partition)
        found = self.partitions.get(key)
        if found is None:
            loading = self._loading.get(key)
            if loading is None:
                loading = asyncio.get_running_loop().create_task(
                    self._load(key, StateKey(group_id, topic_id, partition), leader_epoch, log_start, log_end))
                self._loading[key] = loading
                loading.add_done_callback(lambda _: self._loading.pop(key, None))
            found = await asyncio.shield(loading)
        found.settings = self.group_settings(group_id).partition
        found.move_start(log_start)
        return found

    async def _load(self, key: tuple[str, str, int], state_key: StateKey, leader_epoch: int, log_start: int,
                    log_end: int) -> SharePartition:
        snapshot = None if self._store is None else await self._store.read(state_key, leader_epoch)
        settings = self.group_settings(key[0]).partition
        if snapshot is None and self._store is not None:
            # The start `share.auto.offset.reset` picks is made durable first, so it does not move on a restart.
            start = self._initial_start(settings.auto_offset_reset, key, log_start, log_end)
            initialized = await self._store.initialize(state_key, start)
            if initialized != ErrorCode.none:
                raise KafkaError(initialized, "the share-partition state could not be initialized")
            snapshot = await self._store.read(state_key, leader_epoch)
            if snapshot is None:
                raise KafkaError(ErrorCode.coordinator_not_available, "the initialized state is not readable yet")
        if snapshot is None:
            loaded = SharePartition(settings, self._initial_start(settings.auto_offset_reset, key, log_start,
                                                                  log_end))
        else:
            loaded = SharePartition.restore(settings, snapshot.start_offset, [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in snapshot.batches])
        self._durable[key] = (state_key, leader_epoch, 0 if snapshot is None else snapshot.state_epoch)
        # What the store holds, so the next write sends what restoring changed (records archived at their limit).
        durable = loaded.state_batches() if snapshot is None else [
            (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in snapshot.batches]
        self._sent[key] = _per_offset(durable)
        self._sent_start[key] = loaded.start_offset if snapshot is None else snapshot.start_offset
        self.partitions[key] = loaded
        return loaded

    def _initial_start(self, strategy: str, key: PartitionKey, log_start: int, log_end: int) -> int:
        """share.auto.offset.reset: the log start, the log end, or the first offset written at most the given
        duration ago (the log end when there is none)."""
        lowered = strategy.lower()
        if lowered == "earliest":
            return log_start
        if not lowered.startswith(BY_DURATION):
            return log_end
        since = self._clock.time_ms() - duration_ms(strategy[len(BY_DURATION):])
        hosted = self._replicas.partitions.get((key[1], key[2]))
        found = None if hosted is None else hosted.log.offset_for_timestamp(since)
        return log_end if found is None else min(max(found[0], log_start), log_end)

    async def persist(self, key: tuple[str, str, int]) -> ErrorCode:
        """Write what changed in the share-partition's state to the share coordinator; ErrorCode.none once it is
        durable."""
        found, durable = self.partitions.get(key), self._durable.get(key)
        if self._store is None or found is None or durable is None:
            return ErrorCode.none
        state_key, leader_epoch, state_epoch = durable
        window = found.state_batches()
        now = _per_offset(window)
        sent = self._sent.get(key)
        changed = window if sent is None else _changed(now, sent)
        archived = found.take_archived()
        if sent is not None and not changed and found.start_offset == self._sent_start.get(key) and not archived:
            # Nothing durable changed (an expired lock or RENEW changes only what is not written), and whatever
            # did was sent by a write of its own, whose caller waits for it.
            return ErrorCode.none
        self._sent[key], self._sent_start[key] = now, found.start_offset
        batches = tuple(StateBatch(*b) for b in changed)
        written = await self._store.write(state_key, ShareSnapshot(0, state_epoch, leader_epoch, found.start_offset,
                                                                   batches))
        if written == ErrorCode.none:
            if archived:
                self._send_dead_letters(key, archived)
            return written
        if self.partitions.get(key) is not found:
            return written
        self._sent.pop(key, None)  # the store may lack this change: the next write sends the whole window
        if written in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch, ErrorCode.invalid_request):
            # A newer leader has written this share-partition, an administrator reset it, or its state was deleted
            # (INVALID_REQUEST: it has none): what is held here is stale; read it again.
            self._forget(key)
        else:
            found.archived[:0] = archived  # sent once a later write makes their archiving durable
        return written

    def _forget(self, key: tuple[str, str, int]) -> None:
        self.partitions.pop(key, None)
        self._durable.pop(key, None)
        self._sent.pop(key, None)
        self._sent_start.pop(key, None)

    def _send_dead_letters(self, key: PartitionKey, archived: list[ArchivedRecord]) -> None:
        """Hand the records archived to the group's dead-letter topic, in the background (best effort: a record
        is written there at most once, once its archiving is durable)."""
        settings = self.group_settings(key[0])
        if self._dead_letters is None or not settings.dead_letter_topic:
            return
        task = asyncio.get_running_loop().create_task(self._dead_letters(key, settings, archived))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- administration (DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets) ------------

    async def start_offset(self, group_id: str, topic: str, partition: int, topic_id: uuid.UUID,
                           leader_epoch: int) -> ShareOffsets | None:
        """The share-partition start offset, how many records past it are done (acknowledged or archived) and how
        many are being delivered: live when the share-partition is held here, else durable (where a record acquired
        since the last write does not show); None when the group never consumed the partition (or its state was
        deleted). Raises KafkaError when the share coordinator cannot be reached."""
        found = self.partitions.get((group_id, topic, partition))
        if found is not None:
            return ShareOffsets(found.start_offset, sum(1 for r in found.records.values() if r.state in _DONE),
                                found.delivering_count())
        if self._store is None:
            return None
        snapshot = await self._store.read(StateKey(group_id, topic_id, partition), leader_epoch)
        if snapshot is None or snapshot.start_offset < 0:
            return None
        return ShareOffsets(snapshot.start_offset, sum(b.last_offset - b.first_offset + 1 for b in snapshot.batches
                                                       if b.delivery_state in _DONE), delivering_count(snapshot))

    async def reset(self, group_id: str, topic: str, partition: int, topic_id: uuid.UUID, leader_epoch: int,
                    start_offset: int | None) -> ErrorCode:
        """Start the share-partition at `start_offset` with nothing in flight, or (None) delete its state so that
        share.auto.offset.reset picks its start again. A new start is written in the next state epoch (or
        initializes a state that had none), so a leader still holding the old state is refused (FENCED_STATE_EPOCH,
        or INVALID_REQUEST after a delete) when it writes, and reads the new one."""
        key = (group_id, topic, partition)
        self._forget(key)
        if self._store is None:
            if start_offset is not None:
                self.partitions[key] = SharePartition(self.group_settings(group_id).partition, start_offset)
            return ErrorCode.none
        state_key = StateKey(group_id, topic_id, partition)
        if start_offset is None:
            return await self._store.delete(state_key)
        current = await self._store.read(state_key, leader_epoch)
        if current is None:
            return await self._store.initialize(state_key, start_offset)
        return await self._store.write(state_key, ShareSnapshot(0, current.state_epoch + 1, leader_epoch,
                                                                start_offset, ()))

    def forget_partitions(self, keep: Callable[[str, int], bool]) -> None:
        """Drop the share-partitions of partitions no longer led here."""
        for key in [k for k in self.partitions if not keep(k[1], k[2])]:
            self._forget(key)

    # -- waiting -------------------------------------------------------------------------------------------

    def notify(self) -> None:
        """Records may have become available: wake the ShareFetches waiting."""
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, partitions: Iterable[tuple[str, int]], timeout_ms: float) -> None:
        """Until one of these partitions gets an append, records are released, or the timeout."""
        if timeout_ms <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        hosted = [h for k in partitions if (h := self._replicas.partitions.get(k)) is not None]
        for h in hosted:
            h.waiters.add(waiter)
        self._waiters.add(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_ms / 1000.0)
        except TimeoutError:
            pass
        finally:
            self._waiters.discard(waiter)
            for h in hosted:
                h.waiters.discard(waiter)


def _per_offset(batches: Iterable[tuple[int, int, int, int]]) -> dict[int, tuple[int, int]]:
    return {offset: (state, count) for first, last, state, count in batches for offset in range(first, last + 1)}


def _changed(now: dict[int, tuple[int, int]], sent: dict[int, tuple[int, int]]) -> list[tuple[int, int, int, int]]:
    """The (first, last, state, delivery count) batches of the offsets whose state differs from what was sent."""
    out: list[tuple[int, int, int, int]] = []
    for offset in sorted(o for o, v in now.items() if sent.get(o) != v):
        state, count = now[offset]
        last = out[-1] if out else None
        if last is not None and last[1] + 1 == offset and (last[2], last[3]) == (state, count):
            out[-1] = (last[0], offset, state, count)
        else:
            out.append((offset, offset, state, count))
    return out
