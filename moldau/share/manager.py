"""The broker's share groups: membership of the groups it coordinates, the share-partitions of the partitions it
leads, and the share sessions of the members fetching from it.

Share-partition state is durable through a `StateStore` (the share coordinator, `moldau.coordinator.share`):
read when a share-partition is first used here (initialized first when it has none), written after every
acknowledgement (answered once the write is durable), and after releases and expired locks (in the background),
so deliveries are counted across restarts; only an acquisition in progress is not. A write names only the batches
that changed since the last one sent (the coordinator lays them over the state it has), or the whole window after
a write failed. Group membership and share sessions are in memory.

Time is the injected clock's monotonic milliseconds. Expired members are removed and expired locks released
lazily, on the next share request that touches them; a ShareFetch waiting for records is woken by appends to
its partitions and by records made available again (released, or their member gone).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from moldau.coordinator.share.records import ShareSnapshot, StateBatch, StateKey
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.group import Heartbeat, HeartbeatAnswer, ShareGroup
from moldau.share.partition import SharePartition
from moldau.share.sessions import ShareSessions
from moldau.share.settings import ShareBrokerSettings

if TYPE_CHECKING:
    from moldau.clock import Clock
    from moldau.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

SessionPartition = tuple[uuid.UUID, int]  # (topic id, partition), as ShareFetch names them


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


class ShareGroups:
    def __init__(self, settings: ShareBrokerSettings, clock: Clock, replicas: ReplicaManager,
                 store: StateStore | None = None) -> None:
        """`store`: where share-partition state is kept (None: in memory only, for tests)."""
        self.settings = settings
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
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self.sessions: ShareSessions[SessionPartition] = ShareSessions()
        self._waiters: set[asyncio.Future[None]] = set()

    def now_ms(self) -> int:
        return int(self._clock.monotonic_ms())

    # -- membership ----------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, request: Heartbeat, partitions_of: Callable[[str], int | None]
                  ) -> HeartbeatAnswer:
        now = self.now_ms()
        self.expire_members(now)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id, self.settings.membership)
        # A member leaving (epoch -1) keeps its share sessions: a closing consumer sends its last acknowledgements
        # and closes them (epoch -1) in parallel with the leave, and they must still find what it holds.
        return group.heartbeat(request, now, partitions_of)

    def describe(self, group_id: str) -> ShareGroup | None:
        self.expire_members(self.now_ms())
        return self.groups.get(group_id)

    def list_groups(self) -> list[ShareGroup]:
        self.expire_members(self.now_ms())
        return list(self.groups.values())

    def delete_group(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else it goes, with its
        share-partitions on this broker. None: no such share group here."""
        self.expire_members(self.now_ms())
        group = self.groups.get(group_id)
        if group is None:
            return None
        if group.members:
            return ErrorCode.non_empty_group
        del self.groups[group_id]
        for key in [k for k in self.partitions if k[0] == group_id]:
            self._forget(key)
        return ErrorCode.none

    def expire_members(self, now_ms: int) -> None:
        for group in self.groups.values():
            for member_id in group.expire(now_ms):
                self.member_gone(group.group_id, member_id)

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
        found.move_start(log_start)
        return found

    async def _load(self, key: tuple[str, str, int], state_key: StateKey, leader_epoch: int, log_start: int,
                    log_end: int) -> SharePartition:
        snapshot = None if self._store is None else await self._store.read(state_key, leader_epoch)
        if snapshot is None and self._store is not None:
            # The start `share.auto.offset.reset` picks is made durable first, so it does not move on a restart.
            start = SharePartition.initial(self.settings.partition, log_start, log_end).start_offset
            initialized = await self._store.initialize(state_key, start)
            if initialized != ErrorCode.none:
                raise KafkaError(initialized, "the share-partition state could not be initialized")
            snapshot = await self._store.read(state_key, leader_epoch)
            if snapshot is None:
                raise KafkaError(ErrorCode.coordinator_not_available, "the initialized state is not readable yet")
        if snapshot is None:
            loaded = SharePartition.initial(self.settings.partition, log_start, log_end)
        else:
            loaded = SharePartition.restore(self.settings.partition, snapshot.start_offset, [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in snapshot.batches])
        self._durable[key] = (state_key, leader_epoch, 0 if snapshot is None else snapshot.state_epoch)
        self._sent[key], self._sent_start[key] = _per_offset(loaded.state_batches()), loaded.start_offset
        self.partitions[key] = loaded
        return loaded

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
        if sent is not None and not changed and found.start_offset == self._sent_start.get(key):
            # Nothing durable changed (an expired lock or RENEW changes only what is not written), and whatever
            # did was sent by a write of its own, whose caller waits for it.
            return ErrorCode.none
        self._sent[key], self._sent_start[key] = now, found.start_offset
        batches = tuple(StateBatch(*b) for b in changed)
        written = await self._store.write(state_key, ShareSnapshot(0, state_epoch, leader_epoch, found.start_offset,
                                                                   batches))
        if written == ErrorCode.none or self.partitions.get(key) is not found:
            return written
        self._sent.pop(key, None)  # the store may lack this change: the next write sends the whole window
        if written in (ErrorCode.fenced_leader_epoch, ErrorCode.fenced_state_epoch, ErrorCode.invalid_request):
            # A newer leader has written this share-partition, or its state was deleted (INVALID_REQUEST: it has
            # none) or started again: what is held here is stale; read it again.
            self._forget(key)
        return written

    def _forget(self, key: tuple[str, str, int]) -> None:
        self.partitions.pop(key, None)
        self._durable.pop(key, None)
        self._sent.pop(key, None)
        self._sent_start.pop(key, None)

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
