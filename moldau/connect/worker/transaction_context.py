"""The worker's side of a source task's `TransactionContext` (KIP-618's connector-defined transaction
boundaries): the task asks, from its own thread, for the open transaction to be committed or aborted after the
current batch or after a given record; the task's runner asks, as it dispatches each record and after each
batch, whether it should. Records are matched by identity, as Kafka matches them. A task asking both to commit
and to abort the same transaction fails, as in Kafka."""

from __future__ import annotations

import threading

from moldau.connect.api import SourceRecord, TransactionContext
from moldau.connect.errors import ConnectException

__all__ = ["WorkerTransactionContext"]


class WorkerTransactionContext(TransactionContext):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._commit_batch = False
        self._abort_batch = False
        self._commit_on: list[SourceRecord] = []
        self._abort_on: list[SourceRecord] = []

    # -- the task's requests --------------------------------------------------------------------------------

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._commit_batch = True
            else:
                self._commit_on.append(record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._abort_batch = True
            else:
                self._abort_on.append(record)

    # -- the runner's questions -----------------------------------------------------------------------------

    def should_commit_batch(self) -> bool:
        with self._lock:
            self._check(self._commit_batch and self._abort_batch)
            asked, self._commit_batch = self._commit_batch, False
            return asked

    def should_abort_batch(self) -> bool:
        with self._lock:
            self._check(self._commit_batch and self._abort_batch)
            asked, self._abort_batch = self._abort_batch, False
            return asked

    def should_commit_on(self, record: SourceRecord) -> bool:
        with self._lock:
            return self._take(self._commit_on, record, self._abort_on)

    def should_abort_on(self, record: SourceRecord) -> bool:
        with self._lock:
            return self._take(self._abort_on, record, self._commit_on)

    def _take(self, asked: list[SourceRecord], record: SourceRecord, other: list[SourceRecord]) -> bool:
        self._check(any(r is record for r in asked) and any(r is record for r in other))
        for i, candidate in enumerate(asked):
            if candidate is record:
                del asked[i]
                return True
        return False

    @staticmethod
    def _check(both: bool) -> None:
        if both:
            raise ConnectException("The connector requested both a commit and an abort of the same transaction")
