"""The group simulation must catch a broken rule: a commit fence that lets a fenced member commit, a SyncGroup
that hands a member a partition another member owns, a consumer-group reconciliation that gives a member a
partition another has not revoked yet, and a classic member of a consumer group given partitions not released."""

from __future__ import annotations

import pytest

from moldau.coordinator.group import migration, offsets
from moldau.coordinator.group.classic import ClassicGroup, GroupState
from moldau.coordinator.group.consumer import ConsumerGroup
from moldau.coordinator.group.consumer_protocol import encode_assignment
from moldau.coordinator.group.member import ClassicMember, SyncRequest, SyncResult
from moldau.protocol.errors import ErrorCode
from tests.sim.group_simulation import GroupSimulation, InvariantViolation

MUTATION_SEEDS = 200


def commit_without_fence(group: ClassicGroup | None, generation_id: int, member_id: str, instance_id: str | None,
                         version: int) -> ErrorCode:
    """`offsets.validate_commit` that checks neither the member nor its generation."""
    if group is not None and group.state == GroupState.DEAD:
        return ErrorCode.coordinator_not_available
    return ErrorCode.none


def leader_assignment_for_all(self: ClassicGroup, member: ClassicMember) -> SyncResult:
    """`ClassicGroup._sync_result` answering every member with the leader's assignment."""
    leader = self.members.get(self.leader_id or "", member)
    return SyncResult(ErrorCode.none, leader.assignment, self.protocol_type, self.protocol_name)


def nothing_owned_by_others(self: ConsumerGroup, member_id: str) -> frozenset[tuple[str, int]]:
    """`ConsumerGroup.owned_by_others` forgetting what other members still hold."""
    return frozenset()


def first_violation(expected: str) -> None:
    for seed in range(MUTATION_SEEDS):
        try:
            GroupSimulation(seed).run()
        except InvariantViolation as exc:
            assert expected in str(exc), f"seed={seed}: unexpected failure {exc}"
            return
    pytest.fail(f"no seed in range({MUTATION_SEEDS}) caught the broken rule")


def test_simulation_catches_commits_from_fenced_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offsets, "validate_commit", commit_without_fence)
    first_violation("went back")


def test_simulation_catches_a_partition_handed_to_two_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ClassicGroup, "_sync_result", leader_assignment_for_all)
    first_violation("owned by")


def test_simulation_catches_a_partition_taken_before_it_is_revoked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ConsumerGroup, "owned_by_others", nothing_owned_by_others)
    first_violation("held by")


def sync_with_the_target(group: ConsumerGroup, request: SyncRequest) -> SyncResult:
    """`migration.sync` handing a classic member its target, including partitions others have not released."""
    if request.member_id not in group.current:
        return SyncResult(ErrorCode.unknown_member_id)
    target = group.targets.get(request.member_id, frozenset())
    return SyncResult(ErrorCode.none, encode_assignment(target), "consumer", request.protocol_name)


def test_simulation_catches_a_classic_member_given_unreleased_partitions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migration, "sync", sync_with_the_target)
    first_violation("owned by")
