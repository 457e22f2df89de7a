"""The transaction state rules, one transactional id at a time, and the record format they are kept in."""

from __future__ import annotations

import pytest

from moldau.coordinator.record_codec import RecordFormatError
from moldau.coordinator.txn import transitions as rules
from moldau.coordinator.txn.records import TxnState, TxnValue, decode_key, decode_value, encode_key, encode_value
from moldau.protocol.errors import ErrorCode

NOW = 1_700_000_000_000
FENCED = ErrorCode.producer_fenced
NO_EXPECTATION = (-1, -1)


def empty(epoch: int = 0, producer_id: int = 7) -> TxnValue:
    return TxnValue(producer_id, epoch, 60_000, TxnState.EMPTY, frozenset(), NOW, -1)


def ongoing(*partitions: tuple[str, int], epoch: int = 0) -> TxnValue:
    return TxnValue(7, epoch, 60_000, TxnState.ONGOING, frozenset(partitions), NOW, NOW)


def test_a_new_id_gets_the_fresh_producer_id_at_epoch_zero() -> None:
    decision = rules.init_producer_id(None, 30_000, 42, NOW, NO_EXPECTATION, FENCED)
    assert decision.write == TxnValue(42, 0, 30_000, TxnState.EMPTY, frozenset(), NOW, -1)
    assert rules.needs_new_producer_id(None)


def test_init_again_bumps_the_epoch_and_keeps_the_producer_id() -> None:
    decision = rules.init_producer_id(empty(epoch=3), 30_000, -1, NOW, NO_EXPECTATION, FENCED)
    assert decision.write is not None
    assert (decision.write.producer_id, decision.write.producer_epoch) == (7, 4)


def test_an_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    current = empty(epoch=rules.MAX_EPOCH)
    assert rules.needs_new_producer_id(current)
    decision = rules.init_producer_id(current, 30_000, 99, NOW, NO_EXPECTATION, FENCED)
    assert decision.write is not None
    assert (decision.write.producer_id, decision.write.producer_epoch) == (99, 0)


def test_init_with_an_open_transaction_fences_and_aborts_it() -> None:
    decision = rules.init_producer_id(ongoing(("t", 0), epoch=2), 30_000, -1, NOW, NO_EXPECTATION, FENCED)
    assert decision.write is not None
    assert decision.write.state == TxnState.PREPARE_ABORT
    assert decision.write.producer_epoch == 3  # the zombie's epoch 2 is now fenced everywhere
    assert decision.write.partitions == {("t", 0)}
    assert decision.answer_after_write == ErrorCode.concurrent_transactions
    assert decision.starts_completion


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_init_while_completing_is_retried(state: TxnState) -> None:
    current = TxnValue(7, 0, 60_000, state, frozenset({("t", 0)}), NOW, NOW)
    assert rules.init_producer_id(current, 1, -1, NOW, NO_EXPECTATION, FENCED).error == \
        ErrorCode.concurrent_transactions


def test_kip360_init_must_name_the_current_producer() -> None:
    assert rules.init_producer_id(empty(epoch=5), 1, -1, NOW, (7, 4), FENCED).error == FENCED
    assert rules.init_producer_id(empty(epoch=5), 1, -1, NOW, (7, 5), FENCED).write is not None


def test_adding_partitions_starts_the_transaction_once() -> None:
    decision = rules.add_partitions(empty(), 7, 0, [("t", 0)], NOW + 5, FENCED)
    assert decision.write == TxnValue(7, 0, 60_000, TxnState.ONGOING, frozenset({("t", 0)}), NOW + 5, NOW + 5)
    more = rules.add_partitions(decision.write, 7, 0, [("t", 1)], NOW + 9, FENCED)
    assert more.write is not None
    assert more.write.partitions == {("t", 0), ("t", 1)} and more.write.start_ms == NOW + 5
    again = rules.add_partitions(more.write, 7, 0, [("t", 1)], NOW + 10, FENCED)
    assert again == rules.Decision()  # nothing to write


def test_a_completed_transaction_does_not_leak_partitions_into_the_next() -> None:
    done = TxnValue(7, 0, 60_000, TxnState.COMPLETE_COMMIT, frozenset(), NOW, NOW)
    decision = rules.add_partitions(done, 7, 0, [("u", 2)], NOW + 1, FENCED)
    assert decision.write is not None and decision.write.partitions == {("u", 2)}


@pytest.mark.parametrize(("producer_id", "epoch", "error"), [
    (8, 0, ErrorCode.invalid_producer_id_mapping), (7, 1, FENCED), (7, -1, FENCED)])
def test_only_the_current_producer_may_act(producer_id: int, epoch: int, error: ErrorCode) -> None:
    assert rules.add_partitions(empty(), producer_id, epoch, [("t", 0)], NOW, FENCED).error == error
    assert rules.end_transaction(ongoing(("t", 0)), producer_id, epoch, True, NOW, FENCED).error == error


def test_an_unknown_id_has_no_producer() -> None:
    assert rules.add_partitions(None, 7, 0, [("t", 0)], NOW, FENCED).error == ErrorCode.invalid_producer_id_mapping


def test_end_transaction_prepares_then_completes() -> None:
    decision = rules.end_transaction(ongoing(("t", 0)), 7, 0, True, NOW + 1, FENCED)
    assert decision.write is not None and decision.write.state == TxnState.PREPARE_COMMIT
    assert decision.starts_completion and decision.answer_after_write == ErrorCode.none
    done = rules.complete(decision.write, NOW + 2)
    assert done.state == TxnState.COMPLETE_COMMIT and done.partitions == frozenset()
    # A retry of the same EndTxn after its answer was lost succeeds without a write.
    assert rules.end_transaction(done, 7, 0, True, NOW + 3, FENCED) == rules.Decision()
    # The opposite outcome is a misuse.
    assert rules.end_transaction(done, 7, 0, False, NOW + 3, FENCED).error == ErrorCode.invalid_txn_state
    # While the markers are being written, the producer waits.
    assert rules.end_transaction(decision.write, 7, 0, True, NOW, FENCED).error == ErrorCode.concurrent_transactions
    assert rules.add_partitions(decision.write, 7, 0, [("t", 0)], NOW, FENCED).error == \
        ErrorCode.concurrent_transactions


def test_ending_without_a_transaction_is_invalid() -> None:
    assert rules.end_transaction(empty(), 7, 0, True, NOW, FENCED).error == ErrorCode.invalid_txn_state


def test_verification_accepts_only_partitions_of_the_open_transaction() -> None:
    current = ongoing(("t", 0))
    assert rules.verify_partitions(current, 7, 0, [("t", 0), ("t", 1)]) == {
        ("t", 0): ErrorCode.none, ("t", 1): ErrorCode.invalid_txn_state}
    committed = rules.complete(rules.end_transaction(current, 7, 0, True, NOW, FENCED).write or current, NOW)
    assert rules.verify_partitions(committed, 7, 0, [("t", 0)]) == {("t", 0): ErrorCode.invalid_txn_state}
    assert rules.verify_partitions(current, 7, 1, [("t", 0)]) == {("t", 0): ErrorCode.invalid_producer_epoch}


def test_timeout_aborts_under_a_bumped_epoch() -> None:
    current = ongoing(("t", 0), epoch=4)
    assert not rules.is_timed_out(current, NOW + 60_000)
    assert rules.is_timed_out(current, NOW + 60_001)
    decision = rules.abort_timed_out(current, NOW + 60_001)
    assert decision.write is not None
    assert (decision.write.state, decision.write.producer_epoch) == (TxnState.PREPARE_ABORT, 5)


def test_only_idle_ids_expire() -> None:
    assert rules.is_expired(empty(), NOW + 10, 10)
    assert not rules.is_expired(empty(), NOW + 9, 10)
    assert not rules.is_expired(ongoing(("t", 0)), NOW + 10**9, 10)


def test_records_round_trip_in_kafkas_format() -> None:
    value = TxnValue(123, 4, 60_000, TxnState.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}), NOW, NOW - 5)
    data = encode_value(value)
    assert data is not None
    # version 0, producer id, epoch, timeout, status, then topics sorted: "a" with [0, 2], "b" with [1].
    assert data[:2] == b"\x00\x00" and data[2:10] == (123).to_bytes(8, "big") and data[16] == 1
    assert decode_value(data) == value
    assert decode_key(encode_key("tx-1")) == "tx-1"
    assert encode_value(None) is None and decode_value(None) is None
    with pytest.raises(RecordFormatError):
        decode_value(b"\x00\x00\x00")


def test_state_names_are_kafkas() -> None:
    assert TxnState.PREPARE_COMMIT.display_name == "PrepareCommit"
    assert TxnState.from_display_name("CompleteAbort") == TxnState.COMPLETE_ABORT
    assert TxnState.from_display_name("Nope") is None
