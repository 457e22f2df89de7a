"""The transactional fault-injection workload: transactional producers and read_committed readers, all recorded.

`TxnWorkload` is a `Workload` (`tests/support/workload.py`) whose producers run Kafka transactions; the
readers, the lifecycle and the final read are the plain workload's, with `isolation` read_committed.

- `producers` slots, each a confluent-kafka transactional producer with `transactional.id`
  `fault-txn-<slot>`, running up to `rate` transactions per second. A transaction `t<slot>-<n>` writes
  `txn_size` records with values `t<slot>-<n>-<i>`, on consecutive partitions from a random first one, then
  commits, or aborts on purpose with probability `abort_ratio`.
- Each transaction is in `History.txns` when it begins: `id`, `slot`, `instance` (the producer instance),
  `records` (`[partition, value]` in produce order), `offsets` (value -> offset from the delivery report)
  and its `status`: "committed" (commit_transaction returned), "aborted" (abort_transaction returned, on
  purpose or after an abortable error; `reason` says which) or "unknown" (a fatal error, or retriable
  errors for longer than the retry budget: it may have committed or not). "open" only remains if the
  producer thread died, and counts as unknown.
- After an "unknown" outcome the instance is dropped and a new one with the same transactional.id calls
  init_transactions, which fences the old one and makes the coordinator finish its open transaction (abort,
  or complete a commit already prepared). A slot that stops after an unknown outcome does this too, so that
  no transaction is left open to hold back the last stable offset of the final read.
- `final_read()` reads read_committed (`History.final`); `final_read(isolation="read_uncommitted")` fills
  `History.final_uncommitted`, where aborted records are visible.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from tests.support.workload import CLIENT_TIMEOUTS, History, Workload

CALL_TIMEOUT_S = 10.0  # per init/commit/abort call; a timed-out call is retried (librdkafka allows it)


@dataclass
class Session:
    """One producer instance of a slot, transactions initialised."""

    name: str
    producer: Producer
    fatal: threading.Event


class TxnOutcomeUnknown(Exception):
    """The current transaction's outcome cannot be known: the instance must be replaced (fenced)."""


class TxnWorkload(Workload):
    """Transactional producers and read_committed readers over `topic` (see the module docstring)."""

    isolation = "read_committed"

    def __init__(self, bootstrap: str, topic: str, partitions: int, history: History, *, producers: int = 2,
                 consumers: int = 1, rate: float = 10.0, txn_size: int = 4, abort_ratio: float = 0.2,
                 message_timeout_ms: int = 60_000, transaction_timeout_ms: int = 60_000, seed: int = 0) -> None:
        super().__init__(bootstrap, topic, partitions, history, producers=producers, consumers=consumers,
                         rate=rate, message_timeout_ms=message_timeout_ms)
        self.txn_size = txn_size
        self.abort_ratio = abort_ratio
        self.transaction_timeout_ms = transaction_timeout_ms
        self.seed = seed
        self._instances = itertools.count()
        # How long a transaction's commit or abort is retried before its outcome is called unknown, how long a
        # stopping slot keeps trying to fence its last instance, and so how long stopping may take (`flush_s`
        # bounds the wait for each producer thread).
        self.retry_budget_s = message_timeout_ms / 1000
        self.fence_s = self.retry_budget_s
        self.flush_s = self.retry_budget_s + self.fence_s + 2 * CALL_TIMEOUT_S

    # ---- one slot

    def _produce(self, slot: int) -> None:
        rng = random.Random(f"{self.seed}-{slot}")
        interval = 1.0 / self.rate if self.rate > 0 else 0.0
        session: Session | None = None
        for number in itertools.count():
            next_start = time.monotonic() + interval
            if session is None:
                session = self._session(slot)
            if session is None or self._stop_producers.is_set():
                break
            entry = self._plan(slot, number, rng, session.name)
            try:
                self._transact(session, entry, abort=rng.random() < self.abort_ratio)
            except TxnOutcomeUnknown as exc:
                self.history.txn_update(entry, status="unknown", reason=str(exc), done_at=self.history.now())
                self._drop(session)
                session = None
            time.sleep(max(0.0, next_start - time.monotonic()))
        if session is None:  # fence the last instance, so that its open transaction ends
            session = self._session(slot, deadline=time.monotonic() + self.fence_s)
        if session is not None:
            self._drop(session)
        else:
            self.history.event("producer", action="unfenced", slot=slot)

    def _plan(self, slot: int, number: int, rng: random.Random, instance: str) -> dict[str, Any]:
        first = rng.randrange(self.partitions)
        records = [[(first + i) % self.partitions, f"t{slot}-{number}-{i}"] for i in range(self.txn_size)]
        return self.history.txn({"id": f"t{slot}-{number}", "slot": slot, "number": number, "instance": instance,
                                 "records": records, "offsets": {}, "status": "open"})

    # ---- producer instances

    def _session(self, slot: int, deadline: float | None = None) -> Session | None:
        """A new instance of the slot's transactional.id with transactions initialised (fencing the previous
        one); None once the workload stops (or `deadline` passes) first."""
        while not self._given_up(deadline):
            name = f"t{slot}#{next(self._instances)}"
            fatal = threading.Event()
            producer = Producer(self._producer_config(slot, name, fatal))
            self.history.event("producer", action="created", producer=name)
            while not self._given_up(deadline) and not fatal.is_set():
                try:
                    producer.init_transactions(CALL_TIMEOUT_S)
                    return Session(name, producer, fatal)
                except KafkaException as exc:
                    self.history.client_error(name, exc.args[0] if exc.args else exc)
                    if not _retriable(exc):
                        break
            self._drop(Session(name, producer, fatal))
            time.sleep(0.2)
        return None

    def _given_up(self, deadline: float | None) -> bool:
        if deadline is not None:
            return time.monotonic() >= deadline
        return self._stop_producers.is_set()

    def _producer_config(self, slot: int, name: str, fatal: threading.Event) -> dict[str, Any]:
        def on_error(error: KafkaError) -> None:
            if error.fatal():
                fatal.set()
            self.history.client_error(name, error)

        return {"bootstrap.servers": self.bootstrap, "transactional.id": f"fault-txn-{slot}", "acks": "all",
                "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": self.message_timeout_ms,
                "transaction.timeout.ms": self.transaction_timeout_ms, "request.timeout.ms": 5000,
                "retry.backoff.ms": 100, "client.id": name, **CLIENT_TIMEOUTS, "error_cb": on_error}

    def _drop(self, session: Session) -> None:
        # Nothing left to deliver matters: a dropped instance's transaction is finished by its successor. A
        # producer in a fatal state refuses even these calls.
        with contextlib.suppress(KafkaException):
            session.producer.purge()
        with contextlib.suppress(KafkaException):
            self._retire(session.name, session.producer, 1.0)

    # ---- one transaction

    def _transact(self, session: Session, entry: dict[str, Any], abort: bool) -> None:
        """Run the transaction `entry` and record "committed" or "aborted"; TxnOutcomeUnknown otherwise."""
        producer = session.producer
        try:
            producer.begin_transaction()
            for partition, value in entry["records"]:
                producer.produce(self.topic, value=value.encode(), partition=partition,
                                 on_delivery=self._delivered(entry, value))
        except KafkaException as exc:
            if not _requires_abort(exc):
                raise TxnOutcomeUnknown(f"{exc}") from None
            self._finish(session, entry, commit=False, reason=f"abortable error: {exc}")
            return
        except BufferError as exc:
            self._finish(session, entry, commit=False, reason=f"produce() refused: {exc}")
            return
        if abort:
            # Written first, so that the abort has records to hide: abort_transaction alone would mostly drop
            # them from the client's queue before they are ever sent.
            producer.flush(CALL_TIMEOUT_S)
        self._finish(session, entry, commit=not abort, reason="deliberate" if abort else "")

    def _delivered(self, entry: dict[str, Any], value: str) -> Callable[[Any, Any], None]:
        def delivered(error: Any, message: Any) -> None:
            if error is None and message.offset() is not None and message.offset() >= 0:
                self.history.txn_update(entry, offsets={**entry["offsets"], value: message.offset()})

        return delivered

    def _finish(self, session: Session, entry: dict[str, Any], commit: bool, reason: str) -> None:
        """Commit or abort, retrying retriable errors within the budget; an abortable commit error aborts."""
        deadline = time.monotonic() + self.retry_budget_s
        while True:
            call = session.producer.commit_transaction if commit else session.producer.abort_transaction
            try:
                call(CALL_TIMEOUT_S)
            except KafkaException as exc:
                self.history.client_error(session.name, exc.args[0] if exc.args else exc)
                if commit and _requires_abort(exc):
                    commit, reason = False, f"abortable error: {exc}"
                elif not _retriable(exc) or session.fatal.is_set():
                    raise TxnOutcomeUnknown(f"{'commit' if commit else 'abort'}: {exc}") from None
                elif time.monotonic() >= deadline:
                    raise TxnOutcomeUnknown(f"{'commit' if commit else 'abort'} retried for "
                                            f"{self.retry_budget_s:g} s: {exc}") from None
                continue
            self.history.txn_update(entry, status="committed" if commit else "aborted", reason=reason,
                                    done_at=self.history.now())
            return


def _error(exc: KafkaException) -> KafkaError | None:
    error = exc.args[0] if exc.args else None
    return error if isinstance(error, KafkaError) else None


def _retriable(exc: KafkaException) -> bool:
    error = _error(exc)
    return error is not None and error.retriable() and not error.fatal()


def _requires_abort(exc: KafkaException) -> bool:
    error = _error(exc)
    return error is not None and error.txn_requires_abort() and not error.fatal()
