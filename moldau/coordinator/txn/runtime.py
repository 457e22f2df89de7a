"""The asyncio edge of the transaction coordinator: replication waits, marker sending and timers.

- A request's answer waits until its record is on every in-sync replica of the state partition
  (`Outcome.wait`), as Kafka appends transaction records with acks=all.
- Completing a transaction (EndTxn, a timeout, a fenced zombie, or a half-done completion found on load) runs as
  one task per transaction: once the Prepare record is replicated, write the markers (through `MarkerWriter`,
  which reaches each partition's leader) until every partition has one, then write the Complete record. The
  task gives up when the state partition is reloaded or moves away: the new coordinator resumes from the log.
- A timer aborts transactions that outlived their timeout every
  `transaction.abort.timed.out.transaction.cleanup.interval.ms`, and forgets idle transactional ids every
  `transaction.remove.expired.transaction.cleanup.interval.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from moldau.clock import Clock
from moldau.coordinator.txn.coordinator import (
    ListedTransaction,
    MarkerJob,
    Outcome,
    TransactionCoordinator,
    write_error,
)
from moldau.coordinator.txn.records import TopicPartition, TxnState, TxnValue
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

_MARKER_RETRY_MIN_S = 0.05
_MARKER_RETRY_MAX_S = 2.0
_RETRY_AFTER_ERROR_S = 1.0
# How long a request waits for the previous transaction's markers before answering CONCURRENT_TRANSACTIONS.
_COMPLETION_WAIT_S = 1.0


class MarkerWriter(Protocol):
    async def write_markers(self, job: MarkerJob, partitions: frozenset[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        """Write `job`'s marker on each partition; ErrorCode.none for those that have it (or no longer exist)."""
        ...


class TxnRuntime:
    def __init__(self, coordinator: TransactionCoordinator, clock: Clock,
                 next_producer_id: Callable[[], Awaitable[int]], markers: MarkerWriter) -> None:
        """Writes and their replication go through the coordinator's log (`CoordinatorLog`)."""
        self.coordinator = coordinator
        self._clock = clock
        self._next_producer_id = next_producer_id
        self._markers = markers
        self._completions: dict[tuple[str, int, int], asyncio.Task[None]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def now_ms(self) -> int:
        return self._clock.time_ms()

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self, image: MetadataImage) -> None:
        loop = asyncio.get_running_loop()
        settings = self.coordinator.settings
        self._tasks = [
            loop.create_task(self._every(settings.abort_interval_ms, self._abort_timed_out)),
            loop.create_task(self._every(settings.remove_interval_ms, self._remove_expired)),
        ]
        self.on_image(None, image)

    def on_image(self, before: MetadataImage | None, image: MetadataImage) -> None:
        """Controller listener: state partitions may have appeared or moved; resume completions found on load."""
        for job in self.coordinator.on_image(image):
            self._complete_later(Outcome(ErrorCode.none, job=job))  # loaded from the log: nothing to wait for

    def close(self) -> None:
        for task in [*self._tasks, *self._completions.values()]:
            task.cancel()
        self._completions.clear()
        self.coordinator.close()

    # -- requests --------------------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int, expected: tuple[int, int],
                               fence_code: ErrorCode) -> Outcome:
        producer_id = -1
        if self.coordinator.needs_new_producer_id(transactional_id):
            producer_id = await self._next_producer_id()  # raises KafkaError: the handler answers it
        outcome = await self._after_completion(transactional_id, lambda: self.coordinator.init_producer_id(
            transactional_id, timeout_ms, producer_id, expected, fence_code, self.now_ms()))
        return await self._settle(outcome)

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Iterable[TopicPartition], fence_code: ErrorCode) -> ErrorCode:
        wanted = list(partitions)
        outcome = await self._after_completion(transactional_id, lambda: self.coordinator.add_partitions(
            transactional_id, producer_id, epoch, wanted, fence_code, self.now_ms()))
        return (await self._settle(outcome)).error

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                              fence_code: ErrorCode) -> ErrorCode:
        outcome = self.coordinator.end_transaction(transactional_id, producer_id, epoch, commit, fence_code,
                                                   self.now_ms())
        return (await self._settle(outcome)).error

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Sequence[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnValue | None]:
        return self.coordinator.describe(transactional_id)

    def list_transactions(self, states: frozenset[TxnState] | None, producer_ids: frozenset[int] | None,
                          min_duration_ms: int, pattern: re.Pattern[str] | None) -> list[ListedTransaction]:
        return self.coordinator.list_transactions(states, producer_ids, min_duration_ms, pattern, self.now_ms())

    async def _after_completion(self, transactional_id: str, decide: Callable[[], Outcome]) -> Outcome:
        """`decide()`; if the id's previous transaction is still being completed, first wait (briefly) for that.

        Kafka answers CONCURRENT_TRANSACTIONS at once and the client retries after its backoff (librdkafka: about
        20 ms); a producer running transactions back to back then loses that backoff almost every time, since its
        next transaction begins as soon as EndTxn is answered, before the markers are written."""
        outcome = decide()
        if outcome.error != ErrorCode.concurrent_transactions or outcome.wait is not None:
            return outcome
        running = [t for (txn_id, _, _), t in self._completions.items()
                   if txn_id == transactional_id and not t.done()]
        if not running:
            return outcome
        await asyncio.wait(running, timeout=_COMPLETION_WAIT_S)
        return decide()

    async def _settle(self, outcome: Outcome) -> Outcome:
        """Start the completion the outcome began, if any, then wait for its record to be replicated.

        The completion runs even when the client's answer times out: the Prepare record is written and will be
        replicated (or the state partition moves and its next leader resumes the completion)."""
        if outcome.job is not None:
            self._complete_later(outcome)
        replicated = await self._replicated(outcome)
        return outcome if replicated == ErrorCode.none else Outcome(replicated)

    async def _replicated(self, outcome: Outcome) -> ErrorCode:
        if outcome.wait is None:
            return ErrorCode.none
        partition, end_offset = outcome.wait
        code = await self.coordinator.log.await_durable(partition, end_offset,
                                                        self.coordinator.settings.write_timeout_ms)
        return ErrorCode.none if code == ErrorCode.none else write_error(code)

    # -- completing transactions -------------------------------------------------------------------------------

    def _complete_later(self, prepared: Outcome) -> None:
        job = prepared.job
        assert job is not None
        # The coordinator epoch is part of the key: after a reload the old task stops (its job is no longer
        # current) and must not keep the reloaded partition's completion from starting.
        key = (job.transactional_id, job.producer_epoch, job.coordinator_epoch)
        running = self._completions.get(key)
        if running is not None and not running.done():
            return
        task = asyncio.get_running_loop().create_task(self._complete(job, prepared))
        self._completions[key] = task
        task.add_done_callback(lambda t, key=key: self._forget(key, t))  # type: ignore[misc]

    def _forget(self, key: tuple[str, int, int], task: asyncio.Task[None]) -> None:
        if self._completions.get(key) is task:
            del self._completions[key]
        if not task.cancelled() and task.exception() is not None:
            log.error("completing the transaction of %r failed", key[0], exc_info=task.exception())

    async def _complete(self, job: MarkerJob, prepared: Outcome) -> None:
        # Markers only once the decision is durable: a marker written before the Prepare record is replicated
        # could contradict what a new coordinator decides after a failover.
        while self.coordinator.is_current(job) and await self._replicated(prepared) != ErrorCode.none:
            await asyncio.sleep(_MARKER_RETRY_MIN_S)
        remaining = job.partitions
        delay = _MARKER_RETRY_MIN_S
        while remaining and self.coordinator.is_current(job):
            results = await self._markers.write_markers(job, remaining)
            remaining = frozenset(tp for tp in remaining if results.get(tp, ErrorCode.unknown_server_error)
                                  != ErrorCode.none)
            if remaining:
                log.debug("markers for %r pending on %s; retrying in %.2f s", job.transactional_id,
                          sorted(remaining), delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MARKER_RETRY_MAX_S)
        if remaining:
            return  # no longer the coordinator: the next one resumes
        await self._record_completion(job)

    async def _record_completion(self, job: MarkerJob) -> None:
        """Write the Complete record, retrying while the state partition refuses it (an ISR below
        min.insync.replicas, say): until it is written the id's next transaction cannot start."""
        delay = _MARKER_RETRY_MIN_S
        while (outcome := self.coordinator.complete(job, self.now_ms())) is not None:
            if outcome.error == ErrorCode.none:
                if await self._replicated(outcome) != ErrorCode.none:
                    log.warning("the completion record of %r is not replicated yet", job.transactional_id)
                return
            log.info("cannot record the completion of %r yet (%s); retrying in %.2f s", job.transactional_id,
                     outcome.error.name, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MARKER_RETRY_MAX_S)

    # -- timers ----------------------------------------------------------------------------------------------

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("transaction coordinator maintenance failed; retrying")
                await asyncio.sleep(_RETRY_AFTER_ERROR_S)

    async def _abort_timed_out(self) -> None:
        for outcome in self.coordinator.abort_timed_out(self.now_ms()):
            if outcome.job is not None:
                self._complete_later(outcome)  # runs on its own: one slow partition holds back no other abort

    async def _remove_expired(self) -> None:
        removed = self.coordinator.remove_expired(self.now_ms())
        if removed:
            log.info("forgot %d expired transactional ids", removed)


def fence_code_for(producer_fenced_from: int, version: int) -> ErrorCode:
    """PRODUCER_FENCED for request versions from KIP-588 on; INVALID_PRODUCER_EPOCH before."""
    return ErrorCode.producer_fenced if version >= producer_fenced_from else ErrorCode.invalid_producer_epoch
