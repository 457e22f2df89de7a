"""Share group membership (epochs, fencing, expiry, assignment) and share sessions (epochs), sans-I/O."""

from __future__ import annotations

import pytest

from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.share.group import Heartbeat, MembershipSettings, ShareGroup
from moldau.share.partition import AckBatch, AcknowledgeError, AckType, SharePartition, ShareSettings
from moldau.share.sessions import ShareSessions

PARTITIONS = {"orders": 3, "audit": 1}


def partitions_of(topic: str) -> int | None:
    return PARTITIONS.get(topic)


def group() -> ShareGroup:
    return ShareGroup("g", MembershipSettings(heartbeat_interval_ms=100, session_timeout_ms=1000))


def test_every_member_gets_every_partition_of_its_topics() -> None:
    g = group()
    a = g.heartbeat(Heartbeat("a", 0, subscribed_topics=("orders",)), 0, partitions_of)
    b = g.heartbeat(Heartbeat("b", 0, subscribed_topics=("orders", "audit")), 0, partitions_of)
    assert a.error == b.error == ErrorCode.none
    assert a.assignment == frozenset(("orders", p) for p in range(3))
    assert b.assignment == frozenset(("orders", p) for p in range(3)) | {("audit", 0)}
    assert a.heartbeat_interval_ms == 100


def test_a_member_must_heartbeat_with_its_epoch() -> None:
    g = group()
    joined = g.heartbeat(Heartbeat("a", 0, subscribed_topics=("orders",)), 0, partitions_of)
    stale = g.heartbeat(Heartbeat("a", joined.member_epoch + 1), 10, partitions_of)
    assert stale.error == ErrorCode.fenced_member_epoch
    unknown = g.heartbeat(Heartbeat("z", 5), 10, partitions_of)
    assert unknown.error == ErrorCode.unknown_member_id
    same = g.heartbeat(Heartbeat("a", joined.member_epoch), 10, partitions_of)
    assert same.error == ErrorCode.none and same.assignment is None  # unchanged: not sent again


def test_joining_without_a_subscription_is_invalid() -> None:
    assert group().heartbeat(Heartbeat("a", 0), 0, partitions_of).error == ErrorCode.invalid_request


def test_a_new_member_moves_the_others_to_the_new_group_epoch() -> None:
    g = group()
    a = g.heartbeat(Heartbeat("a", 0, subscribed_topics=("orders",)), 0, partitions_of)
    g.heartbeat(Heartbeat("b", 0, subscribed_topics=("orders",)), 0, partitions_of)
    again = g.heartbeat(Heartbeat("a", a.member_epoch), 10, partitions_of)
    assert again.member_epoch == g.epoch > a.member_epoch and again.assignment is not None


def test_silent_members_expire_and_leaving_members_go() -> None:
    g = group()
    g.heartbeat(Heartbeat("a", 0, subscribed_topics=("orders",)), 0, partitions_of)
    b = g.heartbeat(Heartbeat("b", 0, subscribed_topics=("orders",)), 500, partitions_of)
    assert g.expire(1000) == ["a"]
    left = g.heartbeat(Heartbeat("b", -1), 600, partitions_of)
    assert left.member_epoch == -1 and not g.members and g.state == "Empty" and b.error == ErrorCode.none


def test_share_session_epochs() -> None:
    sessions: ShareSessions[tuple[str, int]] = ShareSessions()
    with pytest.raises(KafkaError) as missing:
        sessions.fetch("g", "m", 1, [], [], 0)
    assert missing.value.code == ErrorCode.share_session_not_found
    opened = sessions.fetch("g", "m", 0, [("t", 0), ("t", 1)], [], 0)
    assert opened.next_epoch == 1
    sessions.fetch("g", "m", 1, [("u", 0)], [("t", 1)], 0)
    assert opened.partitions == {("t", 0), ("u", 0)} and opened.next_epoch == 2
    with pytest.raises(KafkaError) as wrong:
        sessions.fetch("g", "m", 1, [], [], 0)
    assert wrong.value.code == ErrorCode.invalid_share_session_epoch
    with pytest.raises(KafkaError) as cannot_open:
        sessions.acknowledge("g", "m", 0, 0)
    assert cannot_open.value.code == ErrorCode.invalid_share_session_epoch
    sessions.acknowledge("g", "m", 2, 0)
    assert opened.next_epoch == 3


def test_acknowledging_what_another_member_holds_is_an_invalid_record_state() -> None:
    partition = SharePartition(ShareSettings(), 0)
    (got,) = partition.acquire("a", 10, 5, 0)
    assert (got.first_offset, got.last_offset, got.delivery_count) == (0, 4, 1)
    with pytest.raises(AcknowledgeError) as refused:
        partition.acknowledge("b", [AckBatch(0, 0, (AckType.ACCEPT,))], 1)
    assert refused.value.code == ErrorCode.invalid_record_state
    partition.acknowledge("a", [AckBatch(0, 4, (1, 1, 2, 3, 1))], 1)  # one type per offset
    assert partition.start_offset == 2 and partition.in_flight() == 3
    (again,) = partition.acquire("b", 10, 5, 2)
    assert (again.first_offset, again.last_offset, again.delivery_count) == (2, 2, 2)


def test_locks_expire_and_renew_extends_them() -> None:
    partition = SharePartition(ShareSettings(record_lock_duration_ms=100), 0)
    partition.acquire("a", 2, 2, 0)
    partition.acknowledge("a", [AckBatch(1, 1, (AckType.RENEW,))], 50)
    assert [(r.first_offset, r.last_offset) for r in partition.acquire("b", 10, 2, 100)] == [(0, 0)]
    assert partition.acquire("b", 10, 2, 149) == []
    assert [(r.first_offset, r.delivery_count) for r in partition.acquire("b", 10, 2, 150)] == [(1, 2)]


def test_latest_starts_at_the_log_end_and_earliest_at_the_log_start() -> None:
    assert SharePartition.initial(ShareSettings(), 3, 10).start_offset == 10
    assert SharePartition.initial(ShareSettings(auto_offset_reset="earliest"), 3, 10).start_offset == 3


def test_sessions_end_with_the_connection_of_their_last_request() -> None:
    sessions: ShareSessions[tuple[str, int]] = ShareSessions()
    sessions.fetch("g", "a", 0, [("t", 0)], [], 0, connection="10.0.0.1:5000")
    sessions.fetch("g", "b", 0, [("t", 0)], [], 0, connection="10.0.0.1:5001")
    sessions.fetch("g", "b", 1, [], [], 0, connection="10.0.0.1:5002")  # b reconnected
    assert [s.member_id for s in sessions.close_connection("10.0.0.1:5001")] == []
    assert [s.member_id for s in sessions.close_connection("10.0.0.1:5000")] == ["a"]
    assert sessions.get("g", "a") is None and sessions.get("g", "b") is not None


def test_a_broker_holds_at_most_its_limit_of_sessions() -> None:
    sessions: ShareSessions[tuple[str, int]] = ShareSessions(max_sessions=2)
    sessions.fetch("g", "a", 0, [("t", 0)], [], 0, connection="c1")
    sessions.fetch("g", "b", 0, [("t", 0)], [], 0, connection="c1")
    with pytest.raises(KafkaError) as refused:
        sessions.fetch("g", "invented", 0, [("t", 0)], [], 0, connection="c1")
    assert refused.value.code == ErrorCode.share_session_limit_reached
    assert "group.share.max.share.sessions" in refused.value.message
    sessions.fetch("g", "a", 0, [("t", 1)], [], 0, connection="c2")  # re-opening its own session is not one more
    assert len(sessions) == 2
    sessions.close("g", "b")
    sessions.fetch("g", "c", 0, [], [], 0, connection="c3")  # room again
    assert len(sessions) == 2


def test_the_first_acquirable_offset() -> None:
    partition = SharePartition(ShareSettings(max_record_locks=2), 0)
    assert partition.first_acquirable(0) is None  # nothing in the log
    assert partition.first_acquirable(5) == 0
    partition.acquire("a", 2, 5, 0)
    assert partition.first_acquirable(5) is None  # the window is full
    partition.acknowledge("a", [AckBatch(1, 1, (AckType.RELEASE,))], 1)
    assert partition.first_acquirable(5) == 1


def test_durable_state_round_trips_and_acquisitions_are_not_durable() -> None:
    partition = SharePartition(ShareSettings(delivery_count_limit=3), 10)
    partition.acquire("a", 6, 16, 0)
    partition.acknowledge("a", [AckBatch(11, 11, (AckType.ACCEPT,)), AckBatch(12, 12, (AckType.REJECT,)),
                                AckBatch(13, 13, (AckType.RELEASE,))], 1)
    batches = partition.state_batches()
    assert batches == [(10, 10, 0, 1), (11, 11, 2, 1), (12, 12, 4, 1), (13, 15, 0, 1)]
    restored = SharePartition.restore(ShareSettings(delivery_count_limit=3), partition.start_offset, batches)
    assert restored.start_offset == 10 and restored.next_offset == 16
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in restored.acquire("b", 10, 20, 2)] == [
        (10, 10, 2), (13, 15, 2), (16, 19, 1)]
