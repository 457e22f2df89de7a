"""The incremental cooperative assignor's rules on small, exact cases, and the Connect protocol's bytes."""

from __future__ import annotations

from moldau.connect.distributed.assignor import AssignorState, assign
from moldau.connect.distributed.protocol import (
    Allocation,
    Assignment,
    MemberMetadata,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)

DELAY = 1000


def _tasks(connector: str, count: int) -> list[tuple[str, int]]:
    return [(connector, t) for t in range(count)]


CONFIGURED = Allocation.of(["a", "b"], _tasks("a", 3) + _tasks("b", 3))


def test_first_round_spreads_everything_evenly() -> None:
    decisions, _ = assign({"w1": Allocation(), "w2": Allocation()}, CONFIGURED, 0, DELAY, AssignorState())
    assert {len(d.assigned.tasks) for d in decisions.values()} == {3}
    assert {len(d.assigned.connectors) for d in decisions.values()} == {1}
    assert not any(d.revoked for d in decisions.values())


def test_a_joining_member_takes_only_the_surplus_in_two_rounds() -> None:
    decisions, state = assign({"w1": Allocation(), "w2": Allocation()}, CONFIGURED, 0, DELAY, AssignorState())
    held = {m: d.assigned for m, d in decisions.items()}
    decisions, state = assign({**held, "w3": Allocation()}, CONFIGURED, 10, DELAY, state)
    # One task from each old member is revoked, nothing is handed out yet; nothing else moves.
    assert [len(decisions[m].revoked.tasks) for m in ("w1", "w2", "w3")] == [1, 1, 0]
    assert not decisions["w3"].assigned.tasks
    held = {m: held.get(m, Allocation()) - d.revoked for m, d in decisions.items()}
    decisions, _ = assign(held, CONFIGURED, 20, DELAY, state)
    assert len(decisions["w3"].assigned.tasks) == 2
    assert not any(d.revoked for d in decisions.values())


def test_work_of_a_departed_member_waits_for_the_delay_then_goes_to_whoever_is_least_loaded() -> None:
    decisions, state = assign({"w1": Allocation(), "w2": Allocation()}, CONFIGURED, 0, DELAY, AssignorState())
    lost, kept = decisions["w2"].assigned, decisions["w1"].assigned
    decisions, state = assign({"w1": kept}, CONFIGURED, 100, DELAY, state)
    assert decisions["w1"].delay_ms == DELAY and not decisions["w1"].assigned and state.lost == lost
    # The worker comes back (a new member id) within the delay: still held back, the delay keeps its deadline.
    held = {"w1": kept, "w2-new": Allocation()}
    decisions, state = assign(held, CONFIGURED, 600, DELAY, state)
    assert decisions["w2-new"].delay_ms == 500 and not decisions["w2-new"].assigned
    decisions, state = assign(held, CONFIGURED, 1100, DELAY, state)
    assert decisions["w2-new"].assigned == lost and decisions["w2-new"].delay_ms == 0
    assert state.deadline_ms is None


def test_deleted_connectors_are_revoked_and_eager_hands_out_everything() -> None:
    held = {"w1": Allocation.of(["a", "gone"], _tasks("a", 3) + _tasks("gone", 1)), "w2": Allocation()}
    decisions, _ = assign(held, CONFIGURED, 0, DELAY, AssignorState())
    assert decisions["w1"].revoked.connectors >= {"gone"} and ("gone", 0) in decisions["w1"].revoked.tasks
    decisions, _ = assign(held, CONFIGURED, 0, DELAY, AssignorState(), eager=True)
    assert not any(d.revoked for d in decisions.values())
    assert decisions["w1"].assigned | decisions["w2"].assigned == CONFIGURED


def test_metadata_and_assignments_round_trip_in_both_versions() -> None:
    allocation = Allocation.of(["a"], [("a", 0), ("b", 2)])
    for version in (0, 1):
        metadata = MemberMetadata("http://h:8083/", 42, allocation if version else Allocation())
        assert decode_metadata(encode_metadata(metadata, version)) == metadata
        assignment = Assignment("m-1", "http://h:8083/", 42, allocation,
                                Allocation.of(["b"]) if version else Allocation(), 300 if version else 0)
        assert decode_assignment(encode_assignment(assignment, version)) == assignment


def test_metadata_bytes_are_kafkas_layout() -> None:
    raw = encode_metadata(MemberMetadata("u", 7), 0)
    assert raw == b"\x00\x00" + b"\x00\x01u" + (7).to_bytes(8, "big")
