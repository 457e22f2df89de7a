"""A source task's requests to commit or abort its transaction (KIP-618's connector-defined boundaries), as the
runner reads them: once each, records matched by identity, and commit with abort of the same refused."""

from __future__ import annotations

import pytest

from moldau.connect.api import SourceRecord
from moldau.connect.errors import ConnectException
from moldau.connect.worker.transaction_context import WorkerTransactionContext


def record(value: str) -> SourceRecord:
    return SourceRecord(topic="t", value=value, source_partition={"file": "f"}, source_offset={"position": 1})


def test_batch_and_record_requests_are_read_once() -> None:
    context = WorkerTransactionContext()
    first, twin = record("a"), record("a")  # equal, but another record
    context.commit_transaction(first)
    assert not context.should_commit_on(twin)
    assert context.should_commit_on(first) and not context.should_commit_on(first)
    context.abort_transaction()
    assert not context.should_commit_batch()
    assert context.should_abort_batch() and not context.should_abort_batch()
    context.abort_transaction(twin)
    assert not context.should_commit_on(twin) and context.should_abort_on(twin)


def test_commit_and_abort_of_the_same_transaction_are_refused() -> None:
    context = WorkerTransactionContext()
    context.commit_transaction()
    context.abort_transaction()
    with pytest.raises(ConnectException, match="both a commit and an abort"):
        context.should_commit_batch()
    one = record("x")
    context = WorkerTransactionContext()
    context.commit_transaction(one)
    context.abort_transaction(one)
    with pytest.raises(ConnectException, match="both a commit and an abort"):
        context.should_commit_on(one)
