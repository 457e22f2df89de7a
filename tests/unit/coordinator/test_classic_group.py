"""The classic group state machine, driven with fake time: no sockets, no event loop."""

from __future__ import annotations

from dataclasses import replace

from moldau.coordinator.group.classic import ClassicGroup, GroupState
from moldau.coordinator.group.member import ProtocolMetadata
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import (
    LIMITS,
    RANGE,
    REBALANCE_MS,
    SESSION_MS,
    START_MS,
    Driver,
    SequentialIds,
    state_of,
    subscription,
)


def protocols(*names: str, topics: tuple[str, ...] = ("t",)) -> tuple[ProtocolMetadata, ...]:
    return tuple(ProtocolMetadata(n, subscription(*topics)) for n in names)


# -- joining ------------------------------------------------------------------------------------------------


def test_member_id_handshake_then_single_member_generation() -> None:
    d = Driver()
    first = d.join_result(d.join(client="app"))
    assert first.error == ErrorCode.member_id_required
    assert first.member_id.startswith("app-")
    assert state_of(d.group) == GroupState.EMPTY and not d.group.members

    handle = d.join(first.member_id, client="app")
    joined = d.join_result(handle)
    assert (joined.error, joined.generation_id, joined.leader, joined.protocol_name) == \
        (ErrorCode.none, 1, first.member_id, "range")
    assert [m.member_id for m in joined.members] == [first.member_id]
    assert state_of(d.group) == GroupState.COMPLETING_REBALANCE

    synced = d.sync_result(d.sync(first.member_id, 1, {first.member_id: b"all"}))
    assert (synced.error, synced.assignment) == (ErrorCode.none, b"all")
    assert state_of(d.group) == GroupState.STABLE
    assert d.persists == 1
    assert d.heartbeat(first.member_id) == ErrorCode.none


def test_join_without_handshake_before_v4() -> None:
    d = Driver()
    joined = d.join_result(d.join(handshake=False, client="old"))
    assert joined.error == ErrorCode.none and joined.member_id.startswith("old-")
    assert joined.generation_id == 1


def test_initial_delay_collects_members_arriving_together() -> None:
    d = Driver(replace(LIMITS, initial_rebalance_delay_ms=3000))
    a, ha = d.new_member("a")
    d.advance(1000)
    b, hb = d.new_member("b")
    d.advance(1999)
    assert d.pending(ha) and d.pending(hb)
    d.advance(1)  # the first delay ends, but a member arrived during it: wait one more delay
    assert d.pending(ha) and state_of(d.group) == GroupState.PREPARING_REBALANCE
    d.advance(3000)
    assert d.join_result(ha).generation_id == d.join_result(hb).generation_id == 1
    assert {m.member_id for m in d.join_result(ha).members} == {a, b}
    assert d.join_result(hb).members == ()


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    d = Driver(replace(LIMITS, initial_rebalance_delay_ms=3000))
    _, first = d.new_member("a")
    for i in range(200):  # a new member every 2.5 s would extend the delay forever
        d.advance(500)
        if i % 5 == 4:
            d.new_member(f"m{i}")
        if not d.pending(first):
            break
    assert not d.pending(first)
    assert d.now - START_MS == REBALANCE_MS


def test_followers_wait_for_the_leaders_assignment() -> None:
    d = Driver()
    leader, follower = d.new_member("l")[0], d.new_member("f")[0]
    d.join(leader)  # the second member started a rebalance; the first rejoins
    generation = d.group.generation_id
    assert d.group.leader_id == leader
    pending = d.sync(follower, generation)
    assert d.pending(pending)
    d.sync(leader, generation, {leader: b"L", follower: b"F", "stranger": b"?"})
    assert d.sync_result(pending).assignment == b"F"
    assert d.group.members[leader].assignment == b"L"


def test_members_left_out_of_the_assignment_get_an_empty_one() -> None:
    d = Driver()
    ids = d.stable_group(2)
    d.join(ids[0])
    d.join(ids[1])
    gen = d.group.generation_id
    assert gen == 3
    follower = d.sync(ids[1], gen)
    d.sync(ids[0], gen, {ids[0]: b"x"})
    assert d.sync_result(follower).assignment == b""


def test_protocol_selection_takes_one_all_support_by_votes() -> None:
    d = Driver()
    a = d.new_member("a", protocols("roundrobin", "range"))[0]
    d.new_member("b", protocols("roundrobin", "range"))
    d.new_member("c", protocols("range", "roundrobin"))
    handle = d.join(a, protocols=protocols("roundrobin", "range"))
    assert d.join_result(handle).protocol_name == "roundrobin"  # two votes to one


def test_protocol_selection_ignores_protocols_not_everyone_supports() -> None:
    d = Driver()
    a = d.new_member("a", protocols("sticky", "range"))[0]
    d.new_member("b", protocols("range"))
    handle = d.join(a, protocols=protocols("sticky", "range"))
    assert d.join_result(handle).protocol_name == "range"


def test_inconsistent_protocols_are_refused() -> None:
    d = Driver()
    d.stable_group(1)
    other_type = d.join_result(d.join(protocol_type="connect"))
    assert other_type.error == ErrorCode.inconsistent_group_protocol
    nothing_shared = d.join_result(d.join(protocols=protocols("sticky")))
    assert nothing_shared.error == ErrorCode.inconsistent_group_protocol
    empty = Driver()
    assert empty.join_result(empty.join(protocols=())).error == ErrorCode.inconsistent_group_protocol


def test_session_timeout_bounds() -> None:
    d = Driver()
    assert d.join_result(d.join(session_ms=999)).error == ErrorCode.invalid_session_timeout
    assert d.join_result(d.join(session_ms=60_001)).error == ErrorCode.invalid_session_timeout


def test_group_max_size() -> None:
    d = Driver(replace(LIMITS, max_size=2))
    d.stable_group(2)
    assert d.join_result(d.join()).error == ErrorCode.group_max_size_reached
    # A member id handed out before the group filled up is refused too.
    d2 = Driver(replace(LIMITS, max_size=1))
    early = d2.join_result(d2.join()).member_id
    d2.stable_group(1)
    assert d2.join_result(d2.join(early)).error == ErrorCode.group_max_size_reached


# -- rebalancing ----------------------------------------------------------------------------------------------


def test_new_member_triggers_rebalance_through_heartbeats() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    gen = d.group.generation_id
    _c, hc = d.new_member("c")
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE
    assert d.heartbeat(a) == ErrorCode.rebalance_in_progress
    ha = d.join(a)
    assert d.pending(hc) and d.pending(ha)
    hb = d.join(b)
    results = [d.join_result(h) for h in (ha, hb, hc)]
    assert {r.generation_id for r in results} == {gen + 1}
    assert [len(r.members) for r in results] == [3, 0, 0]  # a is still the leader
    # The old generation is over for everyone.
    assert d.sync_result(d.sync(b, gen)).error == ErrorCode.illegal_generation


def test_leave_triggers_rebalance() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    assert d.leave((b, None)) == (ErrorCode.none,)
    assert d.heartbeat(a) == ErrorCode.rebalance_in_progress
    joined = d.join_result(d.join(a))
    assert [m.member_id for m in joined.members] == [a]
    assert d.heartbeat(b) == ErrorCode.unknown_member_id


def test_leader_leaving_hands_leadership_on() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    d.leave((a, None))
    joined = d.join_result(d.join(b))
    assert joined.leader == b and len(joined.members) == 1


def test_last_member_leaving_empties_the_group() -> None:
    d = Driver()
    (a,) = d.stable_group(1)
    gen = d.group.generation_id
    before = d.persists
    d.leave((a, None))
    assert state_of(d.group) == GroupState.EMPTY
    assert d.group.generation_id == gen + 1 and d.group.protocol_name is None
    assert d.persists == before + 1


def test_session_expiry_removes_a_silent_member() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    for _ in range(3):
        d.advance(SESSION_MS // 2)
        assert d.heartbeat(a) == ErrorCode.none or state_of(d.group) == GroupState.PREPARING_REBALANCE
    assert b not in d.group.members
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE
    assert d.join_result(d.join(a)).generation_id == 3


def test_session_deadline_is_exact() -> None:
    d = Driver()
    a, _b = d.stable_group(2)
    d.advance(1000)
    d.heartbeat(a)
    assert d.group.next_deadline_ms() == d.now - 1000 + SESSION_MS  # b's
    d.advance(SESSION_MS - 1001)
    assert state_of(d.group) == GroupState.STABLE
    d.advance(1)
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE
    assert list(d.group.members) == [a]


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    _, hc = d.new_member("c")
    ha = d.join(a)
    for _ in range(REBALANCE_MS // 5000 - 1):
        d.advance(5000)
        assert d.heartbeat(b) == ErrorCode.rebalance_in_progress  # alive, but never rejoins
    assert d.pending(ha)
    d.advance(5000)
    assert not d.pending(ha) and not d.pending(hc)
    assert b not in d.group.members
    assert {m.member_id for m in d.join_result(ha).members} == {a, d.join_result(hc).member_id}


def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    d.join(a)
    d.join(b)
    gen = d.group.generation_id
    waiting = d.sync(b, gen)
    d.advance(REBALANCE_MS)
    assert d.sync_result(waiting).error == ErrorCode.rebalance_in_progress
    assert a not in d.group.members
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE


def test_outstanding_member_ids_hold_the_join_until_they_expire() -> None:
    d = Driver()
    (a,) = d.stable_group(1)
    handed_out = d.join_result(d.join(session_ms=5000)).member_id
    ha = d.join(a, protocols=protocols("range", topics=("t", "u")))  # a changed its subscription: rebalance
    assert d.pending(ha), "a member id was handed out and may come back"
    d.advance(5000)
    assert d.join_result(ha).generation_id == 2
    assert d.join_result(d.join(handed_out)).error == ErrorCode.unknown_member_id


def test_rejoin_during_completing_rebalance_returns_the_current_generation() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    d.join(a)
    d.join(b)
    gen = d.group.generation_id
    again = d.join_result(d.join(b))
    assert (again.error, again.generation_id, again.members) == (ErrorCode.none, gen, ())
    leader_again = d.join_result(d.join(a))
    assert len(leader_again.members) == 2
    assert state_of(d.group) == GroupState.COMPLETING_REBALANCE


def test_stable_follower_rejoining_unchanged_does_not_rebalance() -> None:
    d = Driver()
    a, b = d.stable_group(2)
    gen = d.group.generation_id
    assert d.join_result(d.join(b)).generation_id == gen
    assert state_of(d.group) == GroupState.STABLE
    d.join(a)  # the leader rejoining always rebalances: it may want to reassign
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE


def test_removed_member_waiting_in_join_is_told_unknown_member() -> None:
    d = Driver()
    _a, b = d.stable_group(2)
    d.new_member("c")
    hb = d.join(b)
    d.leave((b, None))
    assert d.join_result(hb).error == ErrorCode.unknown_member_id


# -- errors ----------------------------------------------------------------------------------------------------


def test_error_codes_for_unknown_members_and_generations() -> None:
    d = Driver()
    a, _ = d.stable_group(2)
    gen = d.group.generation_id
    assert d.join_result(d.join("nobody")).error == ErrorCode.unknown_member_id
    assert d.sync_result(d.sync("nobody", gen)).error == ErrorCode.unknown_member_id
    assert d.heartbeat("nobody") == ErrorCode.unknown_member_id
    assert d.heartbeat(a, gen + 1) == ErrorCode.illegal_generation
    assert d.sync_result(d.sync(a, gen - 1)).error == ErrorCode.illegal_generation
    assert d.leave(("nobody", None)) == (ErrorCode.unknown_member_id,)
    assert state_of(d.group) == GroupState.STABLE  # bad requests change nothing


def test_sync_during_rebalance() -> None:
    d = Driver()
    a, _ = d.stable_group(2)
    d.new_member("c")
    assert d.sync_result(d.sync(a, d.group.generation_id)).error == ErrorCode.rebalance_in_progress


def test_empty_group_knows_no_member() -> None:
    d = Driver()
    assert d.heartbeat("x", 0) == ErrorCode.unknown_member_id
    assert d.join_result(d.join("x")).error == ErrorCode.unknown_member_id


# -- static membership ------------------------------------------------------------------------------------------


def static_pair(d: Driver) -> tuple[str, str]:
    """Two static members (instances i1, i2) in a Stable group; returns their member ids, leader first."""
    h1 = d.join(instance="i1")
    first = d.join_result(h1)
    assert first.error == ErrorCode.none  # static members skip the handshake
    h2 = d.join(instance="i2")
    d.join(first.member_id, instance="i1")
    m1 = d.join_result(d.join(first.member_id, instance="i1")).member_id if d.pending(h2) else first.member_id
    m2 = d.join_result(h2).member_id
    gen = d.group.generation_id
    d.sync(m2, gen, instance="i2")
    d.sync(m1, gen, {m1: b"one", m2: b"two"}, instance="i1")
    assert state_of(d.group) == GroupState.STABLE
    return m1, m2


def test_static_member_restart_keeps_assignment_without_rebalance() -> None:
    d = Driver()
    m1, m2 = static_pair(d)
    gen, persists = d.group.generation_id, d.persists
    rejoined = d.join_result(d.join(instance="i2"))
    assert rejoined.error == ErrorCode.none
    assert rejoined.member_id not in (m1, m2) and rejoined.generation_id == gen
    assert (rejoined.members, rejoined.skip_assignment) == ((), False)
    assert state_of(d.group) == GroupState.STABLE and d.persists == persists + 1
    synced = d.sync_result(d.sync(rejoined.member_id, gen, instance="i2"))
    assert synced.assignment == b"two"
    # The old incarnation is fenced everywhere.
    assert d.heartbeat(m2, instance="i2") == ErrorCode.fenced_instance_id
    assert d.sync_result(d.sync(m2, gen, instance="i2")).error == ErrorCode.fenced_instance_id
    assert d.join_result(d.join(m2, instance="i2")).error == ErrorCode.fenced_instance_id
    assert d.heartbeat(m1, instance="i1") == ErrorCode.none


def test_static_leader_restart_gets_members_but_skips_assignment() -> None:
    d = Driver()
    _m1, m2 = static_pair(d)
    rejoined = d.join_result(d.join(instance="i1"))
    assert rejoined.skip_assignment and rejoined.leader == rejoined.member_id
    assert {m.member_id for m in rejoined.members} == {rejoined.member_id, m2}
    assert state_of(d.group) == GroupState.STABLE


def test_static_member_restart_with_new_subscription_rebalances() -> None:
    d = Driver()
    _, _m2 = static_pair(d)
    handle = d.join(instance="i2", protocols=protocols("range", topics=("t", "other")))
    assert d.pending(handle)
    assert state_of(d.group) == GroupState.PREPARING_REBALANCE


def test_static_member_restart_with_new_owned_partitions_does_not_rebalance() -> None:
    d = Driver()
    static_pair(d)
    # Same topics, other trailing bytes (owned partitions, user data): the assignment still holds.
    metadata = subscription("t")[:-4] + b"\x00\x00\x00\x02ab"
    d.join(instance="i2", protocols=(ProtocolMetadata("range", metadata),))
    assert state_of(d.group) == GroupState.STABLE


def test_static_member_leaves_by_instance_id() -> None:
    d = Driver()
    _m1, m2 = static_pair(d)
    assert d.leave(("other-id", "i2"), ("", "nope")) == \
        (ErrorCode.fenced_instance_id, ErrorCode.unknown_member_id)
    assert d.leave(("", "i2")) == (ErrorCode.none,)
    assert m2 not in d.group.members and state_of(d.group) == GroupState.PREPARING_REBALANCE


def test_static_member_pending_join_is_fenced_by_its_restart() -> None:
    d = Driver()
    _m1, m2 = static_pair(d)
    d.new_member("x")  # a rebalance starts
    old = d.join(m2, instance="i2")
    d.join(instance="i2")
    assert d.join_result(old).error == ErrorCode.fenced_instance_id


# -- durable form ----------------------------------------------------------------------------------------------


def test_record_round_trip_rebuilds_a_stable_group() -> None:
    d = Driver()
    m1, m2 = static_pair(d)
    record = d.group.to_record()
    loaded = ClassicGroup.from_record("g", record, LIMITS, d.now + 5, SequentialIds())
    assert loaded.to_record() == record
    assert loaded.state == GroupState.STABLE and loaded.leader_id == m1
    assert loaded.static_member_id("i2") == m2
    assert loaded.heartbeat(m2, "i2", d.group.generation_id, d.now + 5) == ErrorCode.none


def test_loaded_members_that_never_come_back_expire() -> None:
    d = Driver()
    d.stable_group(2)
    loaded = Driver(group=ClassicGroup.from_record("g", d.group.to_record(), LIMITS, d.now, SequentialIds()))
    loaded.now = d.now
    loaded.advance(SESSION_MS)
    assert loaded.group.state == GroupState.EMPTY and not loaded.group.members


def test_empty_group_record_has_no_members() -> None:
    d = Driver()
    record = d.group.to_record()
    assert (record.generation, record.protocol, record.leader, record.members) == (0, None, None, ())
    assert RANGE  # the default protocols used above
