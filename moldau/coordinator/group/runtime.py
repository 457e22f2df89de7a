"""The asyncio edge of the group coordinator: the clock, futures for waiting requests, and a timer.

A JoinGroup or SyncGroup that must wait gets a future keyed by a fresh handle; whatever input later completes
it (another member's request, a timeout) returns a `Completion` for that handle, and the future is resolved.

Time: one timer task sleeps until the coordinator's nearest deadline (a session, join or sync timeout) and then
calls `tick`, so timeouts fire within milliseconds rather than at the next maintenance round. Any request that
brings a deadline forward wakes it early. The same task runs offset expiry every
`offsets.retention.check.interval.ms`. Wall-clock time (`Clock.time_ms`) is used throughout, because commit
timestamps are wall-clock and persist across restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from moldau.clock import Clock
from moldau.coordinator.append_linger import AppendLinger
from moldau.coordinator.flush_scheduler import FlushScheduler, assume_more_requests
from moldau.coordinator.group.consumer import HeartbeatRequest, HeartbeatResult
from moldau.coordinator.group.coordinator import (
    CommitRequest,
    GroupCoordinator,
    ListedGroup,
    Producer,
    write_error,
)
from moldau.coordinator.group.member import (
    Completion,
    Handle,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from moldau.coordinator.group.offsets import Fetched, OffsetCommit, Requested, TopicPartition
from moldau.coordinator.group.records import OFFSETS_TOPIC, Record
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError

log = logging.getLogger(__name__)

_Answer = TypeVar("_Answer", JoinResult, SyncResult, HeartbeatResult)

_RETRY_AFTER_ERROR_S = 1.0

# Asks the transaction coordinator whether a partition is in a producer's open transaction (KIP-890):
# (transactional id, producer id, producer epoch, (topic, partition)) -> ErrorCode.none if it is.
Verifier = Callable[[str, int, int, TopicPartition], Awaitable[ErrorCode]]


class GroupRuntime:
    def __init__(self, coordinator: GroupCoordinator, clock: Clock,
                 more_requests_this_turn: Callable[[], bool] | None = None) -> None:
        """Writes and their replication go through the coordinator's log (`CoordinatorLog`).

        `more_requests_this_turn`: whether other connections have requests to serve in this turn of the event loop
        (`moldau.server.connection.WokenConnections`); with the adaptive linger, when it says no, an OffsetCommit is
        appended at once instead of waiting for the turn's others (see `commit_offsets`). Without it, every commit
        waits for its turn's end."""
        self.coordinator = coordinator
        self._clock = clock
        linger = AppendLinger(coordinator.settings.append_linger_ms)
        self._commit_flusher = FlushScheduler(linger, clock, self._flush_commits,
                                              more_requests_this_turn or assume_more_requests)
        self._pending: dict[Handle, asyncio.Future[JoinResult | SyncResult]] = {}
        self._next_handle = 0
        self._wake = asyncio.Event()
        self._sleeping_until: float = 0.0
        self._next_expiry_ms = clock.time_ms() + coordinator.settings.offsets_retention_check_interval_ms
        self._task: asyncio.Task[None] | None = None
        # OffsetCommits waiting for their group commit (`_commit_together`), and about the bytes of their records.
        self._commits: list[tuple[CommitRequest, asyncio.Future[list[ErrorCode]]]] = []
        self._commits_bytes = 0
        self._loop: asyncio.AbstractEventLoop | None = None  # the running loop, once a commit has looked it up

    def now_ms(self) -> int:
        return self._clock.time_ms()

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self, image: MetadataImage) -> None:
        self._flush_commits()
        self._deliver(self.coordinator.on_image(image, self.now_ms()))
        self._task = asyncio.get_running_loop().create_task(self._run())

    def on_image(self, before: MetadataImage | None, image: MetadataImage) -> None:
        """Controller listener: partitions of `__consumer_offsets` may have appeared or moved."""
        self._flush_commits()
        self._deliver(self.coordinator.on_image(image, self.now_ms()))
        self._after_input()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._flush_commits()
        self._deliver(self.coordinator.close())
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()

    # -- waiting requests ----------------------------------------------------------------------------------

    async def join(self, group_id: str, request: JoinRequest) -> JoinResult:
        handle, future = self._register()
        self._flush_commits()
        self._deliver(self.coordinator.join(group_id, handle, request, self.now_ms()))
        result = await self._wait(handle, future)
        assert isinstance(result, JoinResult)
        return await self._once_durable(group_id, result)

    async def sync(self, group_id: str, request: SyncRequest) -> SyncResult:
        handle, future = self._register()
        self._flush_commits()
        self._deliver(self.coordinator.sync(group_id, handle, request, self.now_ms()))
        result = await self._wait(handle, future)
        assert isinstance(result, SyncResult)
        return await self._once_durable(group_id, result)

    async def _once_durable(self, group_id: str, result: _Answer) -> _Answer:
        """`result`, given once what the group's partition holds is on every in-sync replica, or the write's error.

        A generation or an assignment told to a member must survive a failover of the coordinator: were the record
        lost, the next coordinator would hand out the same generation again, with another assignment. Kafka's
        coordinator also answers only once the records of a request (and those before them) are committed."""
        if result.error != ErrorCode.none:
            return result
        code = await self._replicated_to_end(group_id)
        return result if code == ErrorCode.none else dataclasses.replace(result, error=write_error(code))

    async def _replicated_to_end(self, group_id: str) -> ErrorCode:
        target = self.coordinator.replication_target(group_id)
        if target is None:
            return ErrorCode.none  # not led here any more: the answer already says so, or the next request will
        partition, end_offset = target
        return await self.coordinator.log.await_durable(partition, end_offset,
                                                        self.coordinator.settings.offset_commit_timeout_ms)

    def _register(self) -> tuple[Handle, asyncio.Future[JoinResult | SyncResult]]:
        self._next_handle += 1
        future: asyncio.Future[JoinResult | SyncResult] = asyncio.get_running_loop().create_future()
        self._pending[self._next_handle] = future
        return self._next_handle, future

    async def _wait(self, handle: Handle, future: asyncio.Future[JoinResult | SyncResult]) -> JoinResult | SyncResult:
        self._after_input()
        try:
            return await future
        finally:
            # A client that disconnects cancels its future; the group still answers the handle later, to no one.
            self._pending.pop(handle, None)

    def _deliver(self, completions: Sequence[Completion]) -> None:
        for completion in completions:
            future = self._pending.pop(completion.handle, None)
            if future is not None and not future.done():
                future.set_result(completion.result)

    # -- immediate requests --------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        self._flush_commits()
        error = self.coordinator.heartbeat(group_id, member_id, instance_id, generation_id, self.now_ms())
        self._after_input()
        return error

    async def consumer_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat, answered once the member's epoch and assignment are durable (see
        `_once_durable`)."""
        self._flush_commits()
        result = self.coordinator.consumer_heartbeat(group_id, request, self.now_ms())
        self._deliver(self.coordinator.take_released())
        self._after_input()
        return await self._once_durable(group_id, result)

    def leave(self, group_id: str, identities: Sequence[tuple[str, str | None]]
              ) -> tuple[ErrorCode, tuple[ErrorCode, ...]]:
        self._flush_commits()
        error, member_errors, completions = self.coordinator.leave(group_id, identities, self.now_ms())
        self._deliver(completions)
        self._after_input()
        return error, member_errors

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int,
                             commits: Sequence[OffsetCommit], version: int) -> list[ErrorCode]:
        """Commit, and answer once the commit is on every in-sync replica of the group's partition, so that no
        acknowledged commit is lost when the coordinator's broker fails.

        Group commit: commits wait as group.coordinator.append.linger.ms says (`append_linger`), then the waiting
        ones are appended together, one batch per partition. With the adaptive linger (-1, the default) they are
        the commits of every request that reaches this point in one turn of the event loop (the requests of all
        connections whose bytes arrived together), appended when the turn's other ready callbacks have run; when
        no other connection has a request to serve in this turn, nothing could join the batch, and the waiting
        commits and this one are appended now (a synchronous committer's round trip is then one turn, not three).
        With 0 each commit is appended at once, alone; with N > 0 the commits wait until N ms after the first.
        Whatever the linger, any other input reaching the coordinator appends the waiting commits first, so it
        sees inputs in the order they came. Each request is still answered only once its own records are durable,
        and in the order of its connection's requests, as the connection writes responses in order."""
        request = CommitRequest(group_id, member_id, instance_id, generation_id, tuple(commits), version)
        loop = self._loop
        if loop is None or not loop.is_running():  # each lookup of the running loop costs a getpid system call
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[list[ErrorCode]] = loop.create_future()
        self._commits.append((request, future))
        self._commits_bytes += request.records_bytes()
        if self._commit_flusher.wrote(self._commits_bytes):
            self._commit_together()
            errors = future.result()  # set by the append just made (or its exception, raised here)
        else:
            errors = await future
        return await self._replicated(group_id, errors)

    def _flush_commits(self) -> None:
        """Append the commits waiting for their group commit now. Every other input calls this first, so the
        coordinator sees inputs in the order they came: a JoinGroup after a commit is answered only once that
        commit is durable too, and an OffsetFetch after it reads it."""
        if self._commits:
            self._commit_together()

    def _commit_together(self) -> None:
        waiting, self._commits = self._commits, []
        self._commits_bytes = 0
        self._commit_flusher.flushed()
        try:
            answers = self.coordinator.commit_offsets_together([request for request, _ in waiting], self.now_ms())
        except Exception as exc:  # a bug: every waiting request fails with it, as one alone would
            for _, future in waiting:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), errors in zip(waiting, answers, strict=True):
            if not future.done():  # the client went away: its commit stands, the answer goes to no one
                future.set_result(errors)
        self._after_input()

    async def txn_commit_offsets(self, group_id: str, transactional_id: str, producer_id: int, producer_epoch: int,
                                 member_id: str, instance_id: str | None, generation_id: int,
                                 commits: Sequence[OffsetCommit], verify: Verifier | None = None) -> list[ErrorCode]:
        """TxnOffsetCommit: one error per commit, given once the accepted ones are on every in-sync replica.
        They become visible when the transaction commits (`complete_transaction`).

        With `verify`, the producer's first commit of a transaction to this partition (unless
        transaction.partition.verification.enable is off) waits for the transaction coordinator to confirm that
        the group's partition is in the transaction (AddOffsetsToTxn added it); a refusal is the answer for every
        partition."""
        producer = Producer(producer_id, producer_epoch)
        self._flush_commits()
        check = self.coordinator.txn_verification(group_id, producer) if verify is not None else None
        guard = None
        if verify is not None and check is not None:
            partition, guard = check
            code = await verify(transactional_id, producer_id, producer_epoch, (OFFSETS_TOPIC, partition))
            if code != ErrorCode.none:
                return [write_error(code)] * len(commits)
        self._flush_commits()
        errors = self.coordinator.txn_commit_offsets(group_id, producer, member_id, instance_id, generation_id,
                                                     commits, self.now_ms(), guard)
        self._after_input()
        return await self._replicated(group_id, errors)

    async def _replicated(self, group_id: str, errors: list[ErrorCode]) -> list[ErrorCode]:
        """acks=all for a write just made to the group's partition: wait until the ISR has it; if it cannot,
        the partitions that were accepted get the write's error instead."""
        if ErrorCode.none not in errors:
            return errors
        code = await self._replicated_to_end(group_id)
        if code == ErrorCode.none:
            return errors
        return [write_error(code) if e == ErrorCode.none else e for e in errors]

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker is now in `__consumer_offsets` partition `partition` (see the coordinator's)."""
        self._flush_commits()
        self.coordinator.complete_transaction(partition, producer_id, commit, self.now_ms())

    def fetch_offsets(self, group_id: str, requested: Requested | None, member_id: str | None = None,
                      member_epoch: int = -1, require_stable: bool = False) -> tuple[ErrorCode, Fetched]:
        self._flush_commits()
        return self.coordinator.fetch_offsets(group_id, requested, member_id, member_epoch, require_stable)

    def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                       ) -> tuple[ErrorCode, list[ErrorCode]]:
        self._flush_commits()
        return self.coordinator.delete_offsets(group_id, partitions, self.now_ms())

    def delete_groups(self, group_ids: Sequence[str]) -> list[ErrorCode]:
        self._flush_commits()
        return self.coordinator.delete_groups(group_ids, self.now_ms())

    async def write_share_records(self, group_id: str, records: Sequence[Record]) -> ErrorCode:
        """Write records of a share group and wait until the ISR has them, as acks=all."""
        self._flush_commits()
        try:
            code = self.coordinator.write_share_records(group_id, records, self.now_ms())
        except KafkaError as exc:
            return exc.code
        self._after_input()
        (code,) = await self._replicated(group_id, [code])
        return code

    def list_groups(self) -> list[ListedGroup]:
        self._flush_commits()
        return self.coordinator.list_groups()

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every group coordinated here: its committed offsets as OffsetFetch answers them (for metrics)."""
        self._flush_commits()  # commits still waiting for their batch count as committed once answered
        return self.coordinator.committed_offsets()

    # -- the timer -----------------------------------------------------------------------------------------

    def _after_input(self) -> None:
        deadline = self.coordinator.next_deadline_ms()
        if deadline is not None and deadline < self._sleeping_until:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                await self._sleep_until_due()
                self._run_due()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("group coordinator timer failed; retrying")
                await asyncio.sleep(_RETRY_AFTER_ERROR_S)

    def _run_due(self) -> None:
        now = self.now_ms()
        self._flush_commits()
        self._deliver(self.coordinator.tick(now))
        if now >= self._next_expiry_ms:
            self._next_expiry_ms = now + self.coordinator.settings.offsets_retention_check_interval_ms
            self.coordinator.expire_offsets(now)

    async def _sleep_until_due(self) -> None:
        deadline = self.coordinator.next_deadline_ms()
        wake_at = self._next_expiry_ms if deadline is None else min(deadline, self._next_expiry_ms)
        self._sleeping_until = wake_at
        self._wake.clear()
        delay_s = max(wake_at - self.now_ms(), 0) / 1000
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay_s)
        self._sleeping_until = 0.0
