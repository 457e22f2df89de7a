"""Consumer groups of the KIP-848 protocol, sans-I/O: heartbeats in, records and answers out.

A driver plays the coordinator's part: it keeps the records every step returns as the partition log, replays
them into the shard, and starts sessions, so replaying the whole log into a fresh shard must give the same
groups.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from moldau.coordinator.group.assignors import range_assign, uniform_assign
from moldau.coordinator.group.consumer import (
    STABLE,
    UNRELEASED,
    UNREVOKED,
    ConsumerGroup,
    ConsumerSettings,
    HeartbeatRequest,
    HeartbeatResult,
    TPs,
)
from moldau.coordinator.group.records import Record, decode, encode
from moldau.coordinator.group.shard import GroupShard, ShardSettings
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import SequentialIds

GROUP = "g"
SESSION_MS = 10_000
SETTINGS = ConsumerSettings(heartbeat_interval_ms=1000, session_timeout_ms=SESSION_MS, max_size=4)


def tps(topic: str, *partitions: int) -> TPs:
    return frozenset((topic, p) for p in partitions)


class Driver:
    def __init__(self, topics: dict[str, int] | None = None, settings: ConsumerSettings = SETTINGS) -> None:
        self.shard = GroupShard(0, ShardSettings(consumer=settings), SequentialIds())
        self.topics = dict(topics or {"t": 6})
        self.log: list[Record] = []
        self.now = 1_000
        self.owned: dict[str, TPs] = {}
        self.epochs: dict[str, int] = {}

    @property
    def group(self) -> ConsumerGroup:
        return self.shard.consumer_groups[GROUP]

    def _apply(self, records: list[Record]) -> None:
        for record in records:  # through the binary form, as the log would
            key, value = encode(record)
            self.log.append(decode(key, value))
        self.shard.replay_all(self.log[len(self.log) - len(records):], self.now)

    def send(self, request: HeartbeatRequest) -> HeartbeatResult:
        outcome = self.shard.consumer_heartbeat(GROUP, request, self.topics)
        self._apply(outcome.records)
        if outcome.result.error == ErrorCode.none and GROUP in self.shard.consumer_groups:
            self.group.touch(outcome.result.member_id, self.now)
        return outcome.result

    def join(self, member: str, topics: tuple[str, ...] = ("t",), **fields: object) -> HeartbeatResult:
        result = self.send(HeartbeatRequest(member, 0, rebalance_timeout_ms=5000, subscribed_topics=topics,
                                            owned=frozenset(), **fields))  # type: ignore[arg-type]
        self._track(member, result)
        return result

    def beat(self, member: str, **fields: object) -> HeartbeatResult:
        """A heartbeat as a well-behaved client sends it: its epoch and what it owns."""
        request = HeartbeatRequest(member, self.epochs[member], owned=self.owned.get(member, frozenset()))
        result = self.send(replace(request, **fields))  # type: ignore[arg-type]
        self._track(member, result)
        return result

    def _track(self, member: str, result: HeartbeatResult) -> None:
        if result.error == ErrorCode.none:
            self.epochs[member] = result.member_epoch
            if result.assignment is not None:
                self.owned[member] = result.assignment

    def settle(self, *members: str, rounds: int = 6) -> None:
        for _ in range(rounds):
            for m in members:
                self.beat(m)

    def tick(self, ms: int) -> None:
        self.now += ms
        self._apply(self.group.tick(self.now, self.topics))


def assert_partitioned(d: Driver, members: tuple[str, ...], total: TPs) -> None:
    owned = [d.owned[m] for m in members]
    assert frozenset().union(*owned) == total
    assert sum(len(o) for o in owned) == len(total)


def test_first_member_gets_everything_at_epoch_one() -> None:
    d = Driver()
    result = d.join("a")
    assert (result.error, result.member_epoch, result.assignment) == (ErrorCode.none, 1, tps("t", *range(6)))
    assert result.heartbeat_interval_ms == 1000
    assert d.group.state == "Stable" and d.group.current["a"].state == STABLE
    assert d.beat("a").assignment is None  # nothing changed: nothing resent


def test_empty_member_id_gets_one_generated() -> None:
    d = Driver()
    result = d.send(HeartbeatRequest("", 0, rebalance_timeout_ms=1, subscribed_topics=("t",)))
    assert result.error == ErrorCode.none and result.member_id


def test_joining_member_waits_for_revocation_before_taking_partitions() -> None:
    d = Driver()
    d.join("a")
    result = d.join("b")
    assert result.member_epoch == 2 and result.assignment == frozenset()  # all still held by a
    a = d.beat("a")  # a must give half up, keeping its epoch until it has
    assert a.member_epoch == 1 and a.assignment is not None and len(a.assignment) == 3
    assert d.group.current["a"].state == UNREVOKED
    assert d.group.current["b"].state == UNRELEASED
    d.beat("a")  # now reports owning only what it kept
    assert d.group.current["a"].member_epoch == 2
    b = d.beat("b")
    assert b.assignment is not None and len(b.assignment) == 3
    assert_partitioned(d, ("a", "b"), tps("t", *range(6)))
    assert d.group.state == "Stable"


def test_unaffected_member_keeps_its_partitions() -> None:
    d = Driver({"t": 4})
    for m in ("a", "b"):
        d.join(m)
    d.settle("a", "b")
    before = {m: d.owned[m] for m in ("a", "b")}
    d.join("c")
    d.settle("a", "b", "c")
    assert_partitioned(d, ("a", "b", "c"), tps("t", 0, 1, 2, 3))
    for m in ("a", "b"):
        assert d.owned[m] <= before[m]  # only gave up, never swapped


def test_leaving_member_partitions_go_to_the_others() -> None:
    d = Driver()
    for m in ("a", "b", "c"):
        d.join(m)
    d.settle("a", "b", "c")
    result = d.beat("b", member_epoch=-1)
    assert (result.error, result.member_epoch) == (ErrorCode.none, -1)
    assert "b" not in d.group.members
    d.settle("a", "c")
    assert_partitioned(d, ("a", "c"), tps("t", *range(6)))


def test_session_expiry_removes_the_member() -> None:
    d = Driver()
    d.join("a")
    d.join("b")
    d.settle("a", "b")
    for _ in range(3):
        d.tick(SESSION_MS // 2)
        d.beat("a")
    assert set(d.group.members) == {"a"}
    d.settle("a")
    assert d.owned["a"] == tps("t", *range(6))
    assert d.beat("b").error == ErrorCode.unknown_member_id


def test_member_that_never_revokes_is_fenced_after_the_rebalance_timeout() -> None:
    d = Driver()
    d.join("a")
    d.join("b")
    d.beat("a")
    assert d.group.current["a"].state == UNREVOKED
    for _ in range(6):
        d.tick(1000)
        d.send(HeartbeatRequest("a", 1, owned=tps("t", *range(6))))  # keeps claiming everything
        d.beat("b")
    assert set(d.group.members) == {"b"}


def test_fencing() -> None:
    d = Driver()
    d.join("a")
    assert d.beat("a", member_epoch=5).error == ErrorCode.fenced_member_epoch
    assert d.send(HeartbeatRequest("x", 1)).error == ErrorCode.unknown_member_id


def test_lost_answer_lets_member_one_epoch_behind_catch_up() -> None:
    d = Driver()
    d.join("a")
    d.join("b")
    d.settle("a", "b")
    d.group.current["a"] = replace(d.group.current["a"], member_epoch=3, previous_member_epoch=2)
    assert d.send(HeartbeatRequest("a", 2, owned=d.owned["a"])).error == ErrorCode.none


def test_missing_group_and_bad_input() -> None:
    d = Driver()
    assert d.send(HeartbeatRequest("a", 3)).error == ErrorCode.group_id_not_found
    assert d.send(HeartbeatRequest("a", 0, subscribed_topics=("t",))).error == ErrorCode.invalid_request
    assert d.send(HeartbeatRequest("a", 0, rebalance_timeout_ms=1)).error == ErrorCode.invalid_request
    bad = HeartbeatRequest("a", 0, rebalance_timeout_ms=1, subscribed_topics=("t",), server_assignor="sticky")
    assert d.send(bad).error == ErrorCode.unsupported_assignor
    assert GROUP not in d.shard.consumer_groups  # failed joins create nothing


def test_max_size() -> None:
    d = Driver()
    for m in "abcd":
        d.join(m)
    assert d.join("e").error == ErrorCode.group_max_size_reached


def test_static_member_leaves_and_comes_back_under_a_new_id() -> None:
    d = Driver()
    d.join("a", instance_id="i1")
    d.join("b")
    d.settle("a", "b")
    kept = d.owned["a"]
    assert d.join("a2", instance_id="i1").error == ErrorCode.unreleased_instance_id
    assert d.beat("a", member_epoch=-2, instance_id="i1").member_epoch == -2
    epoch = d.group.epoch
    back = d.join("a2", instance_id="i1")
    assert back.error == ErrorCode.none and back.assignment == kept
    assert d.group.epoch == epoch  # no rebalance
    assert "a" not in d.group.members


def test_new_partitions_change_the_target() -> None:
    d = Driver({"t": 2})
    d.join("a")
    d.join("b")
    d.settle("a", "b")
    d.topics["t"] = 4
    d.settle("a", "b")
    assert_partitioned(d, ("a", "b"), tps("t", 0, 1, 2, 3))


def test_range_assignor_is_used_when_members_ask_for_it() -> None:
    d = Driver({"t": 4})
    d.join("a", server_assignor="range")
    d.join("b", server_assignor="range")
    d.settle("a", "b")
    assert d.group.assignor_name() == "range"
    assert d.owned == {"a": tps("t", 0, 1), "b": tps("t", 2, 3)}


def test_offset_commit_checks_member_epoch() -> None:
    d = Driver()
    d.join("a")
    group = d.group
    assert group.validate_offset_commit("a", 1) == ErrorCode.none
    assert group.validate_offset_commit("a", 0) == ErrorCode.stale_member_epoch
    assert group.validate_offset_commit("x", 1) == ErrorCode.unknown_member_id
    # Without a member only while the group is empty (as Kafka): it would overwrite the members' progress.
    assert group.validate_offset_commit("", -1) == ErrorCode.unknown_member_id
    # Members of this protocol put their epoch in the field OffsetCommit v9 added.
    assert group.validate_offset_commit("a", 1, version=8) == ErrorCode.unsupported_version
    # OffsetFetch without a member is an admin's, whatever the group holds.
    assert group.validate_offset_fetch("", -1) == ErrorCode.none
    assert group.validate_offset_fetch("a", 0) == ErrorCode.stale_member_epoch
    d.beat("a", member_epoch=-1)
    assert group.validate_offset_commit("", -1) == ErrorCode.none


def test_replay_rebuilds_the_groups() -> None:
    d = Driver()
    for m in ("a", "b", "c"):
        d.join(m)
    d.settle("a", "b")  # c has not caught up: mid-reconciliation state must survive too
    d.beat("b", member_epoch=-1)
    fresh = GroupShard(0, ShardSettings(consumer=SETTINGS))
    fresh.replay_all(d.log, d.now)
    old, new = d.group, fresh.consumer_groups[GROUP]
    assert (new.epoch, new.target_epoch, new.partition_metadata) == (old.epoch, old.target_epoch,
                                                                     old.partition_metadata)
    assert (new.members, new.targets, new.current) == (old.members, old.targets, old.current)


def test_delete_empty_group_removes_it_on_replay() -> None:
    d = Driver()
    d.join("a")
    assert d.shard.delete_group(GROUP)[0] == ErrorCode.non_empty_group
    d.beat("a", member_epoch=-1)
    error, records = d.shard.delete_group(GROUP)
    assert error == ErrorCode.none
    d.shard.replay_all(records, d.now)
    assert GROUP not in d.shard.consumer_groups


# -- assignors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7])
def test_uniform_is_balanced_and_complete(members: int) -> None:
    subs = {f"m{i}": frozenset({"t", "u"}) for i in range(members)}
    out = uniform_assign(subs, {"t": 7, "u": 3}, {})
    sizes = [len(v) for v in out.values()]
    assert max(sizes) - min(sizes) <= 1
    assert sorted(tp for v in out.values() for tp in v) == sorted([("t", p) for p in range(7)]
                                                                  + [("u", p) for p in range(3)])


def test_uniform_is_sticky() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    first = uniform_assign(subs, {"t": 6}, {})
    second = uniform_assign({**subs, "c": frozenset({"t"})}, {"t": 6}, first)
    for m in ("a", "b"):
        assert second[m] <= first[m]


def test_uniform_respects_subscriptions() -> None:
    out = uniform_assign({"a": frozenset({"t"}), "b": frozenset({"u"})}, {"t": 3, "u": 1}, {})
    assert out == {"a": tps("t", 0, 1, 2), "b": tps("u", 0)}


def test_range_splits_each_topic_in_member_order() -> None:
    out = range_assign({"b": frozenset({"t"}), "a": frozenset({"t"})}, {"t": 5})
    assert out == {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4)}


def test_a_regex_member_gets_the_topics_it_matches_and_follows_new_ones() -> None:
    d = Driver({"orders-eu": 2, "orders-us": 1, "payments": 3, "__transaction_state": 50})
    joined = d.join("a", topics=(), subscribed_regex="orders-.*|__.*")
    assert joined.assignment == tps("orders-eu", 0, 1) | tps("orders-us", 0)  # internal topics never match
    assert d.group.subscribed_topics() == {"orders-eu", "orders-us"}
    epoch = d.group.epoch
    d.topics = {**d.topics, "orders-asia": 2}  # created later: a new mapping, as a new metadata image gives
    d.settle("a")
    assert d.owned["a"] == tps("orders-eu", 0, 1) | tps("orders-us", 0) | tps("orders-asia", 0, 1)
    assert d.group.epoch == epoch + 1
    d.beat("a", subscribed_regex="", subscribed_topics=("payments",))  # back to names: "" clears the regex
    d.settle("a")
    assert d.owned["a"] == tps("payments", 0, 1, 2) and d.group.members["a"].subscribed_regex is None
    assert d.group._resolved == {}  # no member uses the regex any more: what it resolved to is dropped


def test_a_regex_resolves_only_to_topics_the_members_principal_may_describe() -> None:
    rights = {("User:alice", "orders-eu"), ("User:alice", "orders-us"), ("User:bob", "orders-us")}
    asked: set[tuple[str, str]] = set()

    def visible(principal: str, host: str, topic: str) -> bool:
        asked.add((principal, host))
        return (principal, topic) in rights

    d = Driver({"orders-eu": 2, "orders-us": 1, "payments": 1}, replace(SETTINGS, topic_visible=visible))
    joined = d.join("a", topics=(), subscribed_regex="orders-.*", principal="User:alice", client_host="/10.0.0.1")
    assert joined.assignment == tps("orders-eu", 0, 1) | tps("orders-us", 0)
    assert asked == {("User:alice", "10.0.0.1")}  # the ACL host, as the connection gives it
    d.join("b", topics=(), subscribed_regex="orders-.*", principal="User:bob")
    d.settle("a", "b")
    assert d.group._subscription(d.group.members["b"], d.topics) == {"orders-us"}
    assert all(topic == "orders-us" for topic, _ in d.owned["b"])
    # An ACL taken away: the next metadata image (a new mapping) resolves the regex again, and the topic goes.
    rights.discard(("User:alice", "orders-eu"))
    epoch = d.group.epoch
    d.topics = dict(d.topics)
    d.settle("a", "b")
    assert d.group.epoch > epoch
    assert d.owned["a"] | d.owned["b"] == tps("orders-us", 0) and d.group.subscribed_topics() == {"orders-us"}
    # The principal is in the member's record: the group replayed from the log resolves the same way.
    fresh = GroupShard(0, ShardSettings(consumer=replace(SETTINGS, topic_visible=visible)), SequentialIds())
    fresh.replay_all(d.log, d.now)
    group = fresh.consumer_groups[GROUP]
    assert group.members["b"].principal == "User:bob"
    assert group._subscription(group.members["a"], d.topics) == {"orders-us"}


def test_an_invalid_or_too_long_regex_is_refused() -> None:
    d = Driver()
    bad = d.send(HeartbeatRequest("a", 0, rebalance_timeout_ms=5000, subscribed_regex="orders-(",
                                  owned=frozenset()))
    assert bad.error == ErrorCode.invalid_regular_expression and "orders-(" in (bad.message or "")
    long = d.send(HeartbeatRequest("a", 0, rebalance_timeout_ms=5000, subscribed_regex="a" * 20_000,
                                   owned=frozenset()))
    assert long.error == ErrorCode.invalid_regular_expression
    assert GROUP not in d.shard.consumer_groups
