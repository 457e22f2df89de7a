"""Kafka's rules for one transactional id, sans-I/O: given its current state and a request, the error to answer or
the state to write.

Each rule returns a `Decision`: an error (nothing written), or a new `TxnValue` to append to
`__transaction_state` before answering, or neither (the request is a retry of something already done). State
moves:

    Empty / CompleteCommit / CompleteAbort --AddPartitions--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort), timeout, or InitProducerId (fencing)--> PrepareAbort --markers--> CompleteAbort
    Empty / Complete* --InitProducerId--> Empty under a bumped epoch

Fencing: the epoch bumps on every InitProducerId, on a timeout abort and when InitProducerId finds a transaction
still open (the old producer is a zombie: its transaction is aborted under the new epoch, so its late writes are
refused by every partition). Errors follow Kafka's: an unknown id or another producer id is
INVALID_PRODUCER_ID_MAPPING; an old epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH for request versions older
than KIP-588's); a transaction being completed is CONCURRENT_TRANSACTIONS, which clients retry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from moldau.coordinator.txn.records import TopicPartition, TxnState, TxnValue
from moldau.protocol.errors import ErrorCode

# Kafka keeps Short.MaxValue for itself; past this a producer gets a new producer id.
MAX_EPOCH = 32_766
NO_PRODUCER_ID = -1
NO_EPOCH = -1

_PREPARING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
_IDLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do: answer `error`; or write `write` first (then answer none, or the retriable
    CONCURRENT_TRANSACTIONS when `answer_after_write` says so); `markers` when the write starts a completion."""

    error: ErrorCode = ErrorCode.none
    write: TxnValue | None = None
    answer_after_write: ErrorCode = ErrorCode.none

    @property
    def starts_completion(self) -> bool:
        return self.write is not None and self.write.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


def check_producer(current: TxnValue | None, producer_id: int, epoch: int, fence_code: ErrorCode) -> ErrorCode:
    """Whether this producer id and epoch own the transactional id now."""
    if current is None or current.producer_id != producer_id:
        return ErrorCode.invalid_producer_id_mapping
    if epoch != current.producer_epoch:
        return fence_code
    return ErrorCode.none


def init_producer_id(current: TxnValue | None, timeout_ms: int, new_producer_id: int, now_ms: int,
                     expected: tuple[int, int], fence_code: ErrorCode) -> Decision:
    """InitProducerId with a transactional id. `new_producer_id` is used when the id is new or its epoch is spent;
    `expected` is the (producer id, epoch) a KIP-360 client says it has, or (-1, -1)."""
    if current is None:
        return Decision(write=TxnValue(new_producer_id, 0, timeout_ms, TxnState.EMPTY, frozenset(), now_ms, -1))
    if expected[0] != NO_PRODUCER_ID and (expected[0] != current.producer_id or expected[1] != current.producer_epoch):
        # A client resetting its epoch after an error must still be the current owner.
        return Decision(error=fence_code)
    if current.state in _PREPARING:
        return Decision(error=ErrorCode.concurrent_transactions)
    if current.state == TxnState.ONGOING:
        # The previous incarnation crashed mid-transaction: fence it and abort its transaction; the client retries.
        return Decision(write=_prepare(current, commit=False, now_ms=now_ms, bump_epoch=True),
                        answer_after_write=ErrorCode.concurrent_transactions)
    if current.producer_epoch >= MAX_EPOCH:
        return Decision(write=TxnValue(new_producer_id, 0, timeout_ms, TxnState.EMPTY, frozenset(), now_ms, -1))
    return Decision(write=TxnValue(current.producer_id, current.producer_epoch + 1, timeout_ms, TxnState.EMPTY,
                                   frozenset(), now_ms, -1))


def needs_new_producer_id(current: TxnValue | None) -> bool:
    return current is None or current.producer_epoch >= MAX_EPOCH


def add_partitions(current: TxnValue | None, producer_id: int, epoch: int, partitions: Iterable[TopicPartition],
                   now_ms: int, fence_code: ErrorCode) -> Decision:
    error = check_producer(current, producer_id, epoch, fence_code)
    if error != ErrorCode.none:
        return Decision(error=error)
    assert current is not None
    if current.state in _PREPARING:
        return Decision(error=ErrorCode.concurrent_transactions)
    wanted = frozenset(partitions)
    if current.state == TxnState.ONGOING and wanted <= current.partitions:
        return Decision()  # a retry, or partitions already added
    if current.state not in (*_IDLE, TxnState.ONGOING):
        return Decision(error=ErrorCode.invalid_txn_state)
    starting = current.state != TxnState.ONGOING
    return Decision(write=replace(
        current, state=TxnState.ONGOING, partitions=(frozenset() if starting else current.partitions) | wanted,
        last_update_ms=now_ms, start_ms=now_ms if starting else current.start_ms))


def verify_partitions(current: TxnValue | None, producer_id: int, epoch: int,
                      partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
    """KIP-890: is each partition part of this producer's open transaction? Nothing is written."""
    error = check_producer(current, producer_id, epoch, ErrorCode.invalid_producer_epoch)
    if error == ErrorCode.none:
        assert current is not None
        if current.state != TxnState.ONGOING:
            error = ErrorCode.invalid_txn_state
    return {tp: error if error != ErrorCode.none or (current is not None and tp in current.partitions)
            else ErrorCode.invalid_txn_state for tp in partitions}


def end_transaction(current: TxnValue | None, producer_id: int, epoch: int, commit: bool, now_ms: int,
                    fence_code: ErrorCode) -> Decision:
    error = check_producer(current, producer_id, epoch, fence_code)
    if error != ErrorCode.none:
        return Decision(error=error)
    assert current is not None
    state = current.state
    if state == TxnState.ONGOING:
        return Decision(write=_prepare(current, commit=commit, now_ms=now_ms, bump_epoch=False))
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state == done:
        return Decision()  # a retry of an EndTxn that already finished
    if state == preparing:
        return Decision(error=ErrorCode.concurrent_transactions)
    return Decision(error=ErrorCode.invalid_txn_state)


def abort_timed_out(current: TxnValue, now_ms: int) -> Decision:
    """An Ongoing transaction past its timeout: abort it under a bumped epoch, fencing the producer."""
    return Decision(write=_prepare(current, commit=False, now_ms=now_ms, bump_epoch=current.producer_epoch < MAX_EPOCH))


def complete(current: TxnValue, now_ms: int) -> TxnValue:
    """The state once every partition has its marker."""
    state = TxnState.COMPLETE_COMMIT if current.state == TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
    return replace(current, state=state, partitions=frozenset(), last_update_ms=now_ms)


def is_timed_out(value: TxnValue, now_ms: int) -> bool:
    return value.state == TxnState.ONGOING and value.start_ms >= 0 and now_ms - value.start_ms > value.timeout_ms


def is_expired(value: TxnValue, now_ms: int, expiration_ms: int) -> bool:
    """An idle transactional id kept longer than transactional.id.expiration.ms may be forgotten."""
    return value.state in _IDLE and now_ms - value.last_update_ms >= expiration_ms


def _prepare(current: TxnValue, *, commit: bool, now_ms: int, bump_epoch: bool) -> TxnValue:
    return replace(current, state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                   producer_epoch=current.producer_epoch + 1 if bump_epoch else current.producer_epoch,
                   last_update_ms=now_ms)
