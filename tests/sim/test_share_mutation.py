"""The share-partition simulation must catch a broken rule: a lock that expires before its deadline (records go to
a second member while the first still holds them), an acquisition that takes acquired records too, a release
that forgets the delivery limit, and a dead-letter announcement of a record released at the limit that is lost."""

from __future__ import annotations

import pytest

from moldau.share.partition import ArchiveReason, InFlightRecord, RecordState, SharePartition
from tests.sim.share_simulation import InvariantViolation, ShareSimulation

MUTATION_SEEDS = 100


def expire_everything(self: SharePartition, now_ms: int) -> None:
    """`SharePartition.expire` ignoring the lock deadlines."""
    for offset, record in self.records.items():
        if record.state == RecordState.ACQUIRED:
            self._release(record, offset)
    self._advance()


def release_without_limit(self: SharePartition, record: InFlightRecord, offset: int) -> None:
    """`SharePartition._release` that never archives a record at the delivery limit."""
    record.state = RecordState.AVAILABLE
    record.member_id = None
    record.lock_deadline_ms = None


def acquire_acquired_too(self: SharePartition, member_id: str, max_records: int, log_end: int,
                         now_ms: int) -> list:  # type: ignore[type-arg]
    """`SharePartition.acquire` that also takes records another member holds."""
    for record in self.records.values():
        if record.state == RecordState.ACQUIRED:
            record.state = RecordState.AVAILABLE
    return ORIGINAL_ACQUIRE(self, member_id, max_records, log_end, now_ms)


ORIGINAL_ACQUIRE = SharePartition.acquire
ORIGINAL_NOTE = SharePartition._note_archived


def announce_rejections_only(self: SharePartition, offset: int, record: InFlightRecord, reason: ArchiveReason
                             ) -> None:
    """`SharePartition._note_archived` that loses the records that used up their deliveries."""
    if reason == ArchiveReason.REJECTED:
        ORIGINAL_NOTE(self, offset, record, reason)


def first_violation(expected: str) -> None:
    for seed in range(MUTATION_SEEDS):
        try:
            ShareSimulation(seed).run()
        except InvariantViolation as exc:
            assert expected in str(exc), f"seed={seed}: unexpected failure {exc}"
            return
    pytest.fail(f"no seed in range({MUTATION_SEEDS}) caught the broken rule")


def test_simulation_catches_locks_expiring_early(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SharePartition, "expire", expire_everything)
    first_violation("while held by")


def test_simulation_catches_a_record_acquired_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SharePartition, "acquire", acquire_acquired_too)
    first_violation("while held by")


def test_simulation_catches_deliveries_beyond_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SharePartition, "_release", release_without_limit)
    first_violation("limit")


def test_simulation_catches_a_lost_dead_letter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SharePartition, "_note_archived", announce_rejections_only)
    first_violation("dead letters")
