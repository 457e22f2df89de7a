"""The share-partition simulation must catch a broken rule: a lock that expires before its deadline (records go to
a second member while the first still holds them), an acquisition that takes acquired records too, a release
that forgets the delivery limit, and a dead-letter announcement of a record released at the limit that is lost.
The membership simulation must catch members written without tombstones, and members not taken back."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from moldau.coordinator.group.records import Record, ShareMemberValue
from moldau.coordinator.share import coordinator as coordinator_module
from moldau.coordinator.share.records import ShareSnapshot, ShareUpdate
from moldau.server import share_group_records
from moldau.share.group import ShareGroup
from moldau.share.partition import ArchiveReason, InFlightRecord, RecordState, SharePartition
from tests.sim import share_membership_simulation as membership_simulation
from tests.sim.share_membership_simulation import InvariantViolation as MembershipViolation
from tests.sim.share_membership_simulation import MembershipSimulation
from tests.sim.share_simulation import InvariantViolation, ShareSimulation
from tests.sim.share_state_simulation import DurableShareSimulation

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


def test_durable_simulation_catches_updates_not_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay that keeps the snapshot but ignores the updates after it loses acknowledgements: after a crash the
    SPSO goes back, or accepted records are delivered again."""
    def snapshot_only(state: ShareSnapshot, update: ShareUpdate) -> ShareSnapshot:
        return state

    monkeypatch.setattr(coordinator_module, "apply_update", snapshot_only)
    for seed in range(MUTATION_SEEDS):
        try:
            DurableShareSimulation(seed).run()
        except InvariantViolation as exc:
            assert any(sign in str(exc) for sign in ("after it was acknowledged", "SPSO went back",
                                                     "after a crash")), f"seed={seed}: {exc}"
            return
    pytest.fail(f"no seed in range({MUTATION_SEEDS}) caught updates lost on replay")


def members_never_gone(group: ShareGroup, written: Mapping[str, ShareMemberValue]) -> list[Record]:
    """`member_records` that writes no tombstones: a member that left comes back with a restart."""
    return [r for r in ORIGINAL_MEMBER_RECORDS(group, written) if r.value is not None]


ORIGINAL_MEMBER_RECORDS = share_group_records.member_records


def first_membership_violation(*expected: str) -> None:
    """Some seed of the membership simulation fails, for one of the `expected` reasons."""
    for seed in range(MUTATION_SEEDS):
        try:
            MembershipSimulation(seed).run()
        except MembershipViolation as exc:
            assert any(reason in str(exc) for reason in expected), f"seed={seed}: unexpected failure {exc}"
            return
    pytest.fail(f"no seed in range({MUTATION_SEEDS}) caught the broken rule")


def test_the_membership_simulation_catches_members_written_without_tombstones(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(membership_simulation, "member_records", members_never_gone)
    first_membership_violation("restart gave", "is back after it was gone")


def test_the_membership_simulation_catches_members_not_taken_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A coordinator that takes a written group back without its members (as Moldau did before they were
    written): a live member's next heartbeat gets UNKNOWN_MEMBER_ID."""
    monkeypatch.setattr(membership_simulation.WrittenShard, "share_group_members", lambda self, group_id: {})
    first_membership_violation("UNKNOWN_MEMBER_ID", "restart gave")
