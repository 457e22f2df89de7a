"""Which acquired records a read_committed share group archives: aborted transactions' batches (by producer, between
the transaction's first offset and its marker) and markers; nothing else."""

from __future__ import annotations

from moldau.share.isolation import AbortedTxn, StoredBatch, undeliverable, without
from moldau.share.partition import AcquiredRange, SharePartition, ShareSettings


def test_aborted_batches_and_markers_are_undeliverable_and_nothing_else() -> None:
    batches = [StoredBatch(0, 2, 7, True, False),  # producer 7's aborted transaction
               StoredBatch(3, 4, 8, True, False),  # producer 8, interleaved, committed
               StoredBatch(5, 5, 7, True, True),  # producer 7's abort marker
               StoredBatch(6, 6, 8, True, True),  # producer 8's commit marker
               StoredBatch(7, 9, 7, False, False),  # producer 7 again, not transactional
               StoredBatch(10, 11, 7, True, False)]  # producer 7's next transaction, past the aborted one
    assert undeliverable(batches, [AbortedTxn(7, 0, 5)]) == [(0, 2), (5, 5), (6, 6)]


def test_removed_offsets_leave_the_acquired_ranges() -> None:
    acquired = [AcquiredRange(0, 9, 1), AcquiredRange(10, 12, 2)]
    assert without(acquired, [(0, 2), (5, 5), (9, 11)]) == [
        AcquiredRange(3, 4, 1), AcquiredRange(6, 8, 1), AcquiredRange(12, 12, 2)]


def test_archived_acquisitions_move_the_start_and_only_the_members_own() -> None:
    partition = SharePartition.initial(ShareSettings(auto_offset_reset="earliest"), 0, 6)
    partition.acquire("a", 3, 6, 0)
    partition.acquire("b", 3, 6, 0)
    assert partition.archive_acquired("a", [(0, 1), (3, 4)])  # 3 and 4 are b's: kept
    assert partition.start_offset == 2
    assert [partition.records[o].member_id for o in (2, 3, 4)] == ["a", "b", "b"]
