"""Committed offsets on one shard: commit rules, fetch, delete, expiry, and replay of the records."""

from __future__ import annotations

from collections.abc import Sequence

from moldau.coordinator.group.classic import GroupState
from moldau.coordinator.group.member import Effects, JoinRequest, JoinResult, ProtocolMetadata, SyncRequest
from moldau.coordinator.group.offsets import OffsetCommit, OffsetStore
from moldau.coordinator.group.records import OffsetKey, OffsetValue, Record
from moldau.coordinator.group.shard import GroupShard, ShardSettings
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import LIMITS, START_MS, SequentialIds, state_of, subscription

RETENTION_MS = 60_000
SETTINGS = ShardSettings(LIMITS, offset_metadata_max_bytes=10, offsets_retention_ms=RETENTION_MS)


class LoggedShard:
    """A shard plus the records a coordinator would have appended for it."""

    def __init__(self) -> None:
        self.now = START_MS
        self.shard = GroupShard(0, SETTINGS, SequentialIds())
        self.log: list[Record] = []
        self._handle = 0

    def write(self, records: Sequence[Record]) -> None:
        self.log += records
        self.shard.replay_all(records, self.now)

    def settle(self, group_id: str, fx: Effects) -> Effects:
        if fx.persist:
            self.log.append(self.shard.group_record(group_id))  # live groups are not replayed
        return fx

    def commit(self, group_id: str, *offsets: tuple[str, int, int], member: str = "", generation: int = -1,
               metadata: str | None = "meta", version: int = 8) -> list[ErrorCode]:
        commits = [OffsetCommit(t, p, o, 3, metadata) for t, p, o in offsets]
        write = self.shard.commit(group_id, member, None, generation, commits, version, self.now)
        self.write(write.records)
        return write.errors

    def committed(self, group_id: str, topic: str, partition: int) -> int:
        ((_, [(_, value)]),) = self.shard.fetch(group_id, [(topic, [partition])])
        assert not isinstance(value, ErrorCode)
        return -1 if value is None else value.offset

    def consumer(self, group_id: str, *topics: str) -> tuple[str, int]:
        """One consumer member through join and sync; returns its member id and generation."""
        self._handle += 1
        request = JoinRequest("", None, "c", "/h", 10_000, 30_000, "consumer",
                              (ProtocolMetadata("range", subscription(*topics)),), False)
        fx = self.settle(group_id, self.shard.join(group_id, self._handle, request, self.now))
        joined = fx.completions[0].result
        assert isinstance(joined, JoinResult)
        member_id = joined.member_id
        generation = self.shard.groups[group_id].generation_id
        self._handle += 1
        sync = SyncRequest(member_id, None, generation, None, None, ((member_id, b"a"),))
        self.settle(group_id, self.shard.sync(group_id, self._handle, sync, self.now))
        return member_id, generation

    def rebuilt(self) -> GroupShard:
        shard = GroupShard(0, SETTINGS, SequentialIds())
        shard.replay_all(self.log, self.now)
        return shard


def test_simple_commit_creates_the_group_and_is_fetched() -> None:
    s = LoggedShard()
    assert s.commit("g", ("t", 0, 5), ("t", 1, 7)) == [ErrorCode.none, ErrorCode.none]
    assert state_of(s.shard.groups["g"]) == GroupState.EMPTY
    assert (s.committed("g", "t", 0), s.committed("g", "t", 1), s.committed("g", "t", 2)) == (5, 7, -1)
    ((topic, partitions),) = s.shard.fetch("g", None)
    assert topic == "t"
    assert [(p, v.offset if isinstance(v, OffsetValue) else None) for p, v in partitions] == [(0, 5), (1, 7)]
    value = partitions[0][1]
    assert isinstance(value, OffsetValue) and (value.metadata, value.leader_epoch, value.commit_timestamp_ms) == \
        ("meta", 3, START_MS)


def test_oversized_metadata_fails_only_its_partition() -> None:
    s = LoggedShard()
    errors = s.commit("g", ("t", 0, 5), metadata="x" * 11)
    assert errors == [ErrorCode.offset_metadata_too_large]
    assert s.commit("g", ("t", 0, 5), metadata=None) == [ErrorCode.none]
    assert s.shard.fetch("g", [("t", [0])])[0][1][0][1].metadata == ""  # type: ignore[union-attr]


def test_member_commits_are_checked_against_the_group() -> None:
    s = LoggedShard()
    member, generation = s.consumer("g", "t")
    assert s.commit("g", ("t", 0, 1), member=member, generation=generation) == [ErrorCode.none]
    assert s.commit("g", ("t", 0, 2), member=member, generation=generation + 1) == [ErrorCode.illegal_generation]
    assert s.commit("g", ("t", 0, 2), member="ghost", generation=generation) == [ErrorCode.unknown_member_id]
    # A simple commit while the group has members would overwrite their progress.
    assert s.commit("g", ("t", 0, 2)) == [ErrorCode.unknown_member_id]
    assert s.committed("g", "t", 0) == 1


def test_commit_during_completing_rebalance_is_refused() -> None:
    s = LoggedShard()
    member, _ = s.consumer("g", "t")
    s._handle += 1
    rejoin = JoinRequest(member, None, "c", "/h", 10_000, 30_000, "consumer",
                         (ProtocolMetadata("range", subscription("t", "u")),), False)
    s.shard.join("g", s._handle, rejoin, s.now)
    group = s.shard.groups["g"]
    assert state_of(group) == GroupState.COMPLETING_REBALANCE
    assert s.commit("g", ("t", 0, 1), member=member, generation=group.generation_id) == \
        [ErrorCode.rebalance_in_progress]


def test_commits_of_a_generation_being_rebalanced_away() -> None:
    """Kafka's rules, decided by the group's state alone: while the group prepares a rebalance the generation
    is still current and commits go through; once the join completes, a member that did not rejoin is gone
    (UNKNOWN_MEMBER_ID), one that rejoined but commits for the old generation is ILLEGAL_GENERATION, and one
    with the new generation but no assignment yet is told REBALANCE_IN_PROGRESS."""
    s = LoggedShard()
    stayer, generation = s.consumer("g", "t")
    group = s.shard.groups["g"]
    s._handle += 1
    newcomer = JoinRequest("", None, "c", "/h", 10_000, 30_000, "consumer",
                           (ProtocolMetadata("range", subscription("t")),), False)
    s.shard.join("g", s._handle, newcomer, s.now)
    assert state_of(group) == GroupState.PREPARING_REBALANCE
    assert s.commit("g", ("t", 0, 1), member=stayer, generation=generation) == [ErrorCode.none]

    # The old member never rejoins: the rebalance timeout ends the join phase without it.
    s.now += 30_000
    s.settle("g", s.shard.tick("g", s.now))
    assert state_of(group) == GroupState.COMPLETING_REBALANCE and stayer not in group.members
    assert group.generation_id == generation + 1
    assert s.commit("g", ("t", 0, 2), member=stayer, generation=generation) == [ErrorCode.unknown_member_id]
    (joined,) = group.members
    assert s.commit("g", ("t", 0, 2), member=joined, generation=generation) == [ErrorCode.illegal_generation]
    assert s.commit("g", ("t", 0, 2), member=joined, generation=generation + 1) == \
        [ErrorCode.rebalance_in_progress]
    assert s.committed("g", "t", 0) == 1

    s._handle += 1
    sync = SyncRequest(joined, None, generation + 1, None, None, ((joined, b"a"),))
    s.settle("g", s.shard.sync("g", s._handle, sync, s.now))
    assert state_of(group) == GroupState.STABLE
    assert s.commit("g", ("t", 0, 2), member=joined, generation=generation + 1) == [ErrorCode.none]
    assert s.committed("g", "t", 0) == 2


def test_commit_with_generation_to_a_missing_group() -> None:
    s = LoggedShard()
    assert s.commit("nope", ("t", 0, 1), member="m", generation=3) == [ErrorCode.illegal_generation]
    assert s.commit("nope", ("t", 0, 1), member="m", generation=3, version=9) == [ErrorCode.group_id_not_found]
    assert "nope" not in s.shard.groups


def test_offset_delete_spares_subscribed_topics() -> None:
    s = LoggedShard()
    member, generation = s.consumer("g", "t")
    s.commit("g", ("t", 0, 1), ("old", 0, 2), member=member, generation=generation)
    error, write = s.shard.delete_offsets("g", [("t", 0), ("old", 0), ("never", 0)])
    assert error == ErrorCode.none
    assert write.errors == [ErrorCode.group_subscribed_to_topic, ErrorCode.none, ErrorCode.none]
    s.write(write.records)
    assert (s.committed("g", "t", 0), s.committed("g", "old", 0)) == (1, -1)
    assert s.shard.delete_offsets("missing", [("t", 0)])[0] == ErrorCode.group_id_not_found


def test_delete_group_needs_an_empty_group() -> None:
    s = LoggedShard()
    s.consumer("busy", "t")
    s.commit("idle", ("t", 0, 1))
    assert s.shard.delete_group("busy")[0] == ErrorCode.non_empty_group
    assert s.shard.delete_group("missing")[0] == ErrorCode.group_id_not_found
    error, records = s.shard.delete_group("idle")
    assert error == ErrorCode.none
    s.write(records)
    assert "idle" not in s.shard.groups and s.committed("idle", "t", 0) == -1


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    s = LoggedShard()
    member, generation = s.consumer("g", "t")
    s.commit("g", ("t", 0, 1), member=member, generation=generation)
    s.now += RETENTION_MS * 2
    assert s.shard.expire(s.now) == []  # a group with members keeps the offsets of what it consumes
    fx = s.shard.leave("g", [(member, None)], s.now).effects
    s.settle("g", fx)
    assert state_of(s.shard.groups["g"]) == GroupState.EMPTY
    s.now += RETENTION_MS - 1
    assert s.shard.expire(s.now) == []
    s.now += 1
    (records,) = s.shard.expire(s.now)
    s.write(records)
    assert "g" not in s.shard.groups and s.committed("g", "t", 0) == -1


def test_simple_commits_expire_one_by_one() -> None:
    s = LoggedShard()
    s.commit("g", ("t", 0, 1))
    s.now += RETENTION_MS // 2
    s.commit("g", ("t", 1, 1))
    s.now += RETENTION_MS // 2
    (records,) = s.shard.expire(s.now)
    s.write(records)
    assert (s.committed("g", "t", 0), s.committed("g", "t", 1)) == (-1, 1)
    assert "g" in s.shard.groups


def test_stable_group_drops_offsets_of_topics_it_left() -> None:
    s = LoggedShard()
    member, generation = s.consumer("g", "t")
    s.commit("g", ("t", 0, 1), ("gone", 0, 1), member=member, generation=generation)
    s.now += RETENTION_MS
    (records,) = s.shard.expire(s.now)
    s.write(records)
    assert (s.committed("g", "t", 0), s.committed("g", "gone", 0)) == (1, -1)


def test_replaying_the_records_reproduces_the_state() -> None:
    s = LoggedShard()
    member, generation = s.consumer("a", "t")
    s.commit("a", ("t", 0, 10), ("t", 1, 11), member=member, generation=generation)
    s.commit("a", ("t", 0, 12), member=member, generation=generation)
    s.commit("b", ("t", 0, 3), ("u", 0, 4))
    s.commit("c", ("t", 0, 1))
    s.write(s.shard.delete_group("c")[1])
    s.write(s.shard.delete_offsets("b", [("u", 0)])[1].records)
    s.commit("c", ("t", 0, 99))  # a group deleted and then used again

    rebuilt = s.rebuilt()
    assert sorted(rebuilt.groups) == sorted(s.shard.groups) == ["a", "b", "c"]
    for group_id, group in s.shard.groups.items():
        assert rebuilt.groups[group_id].to_record() == group.to_record()
        assert rebuilt.groups[group_id].state == group.state
        assert dict(rebuilt.offsets.of(group_id)) == dict(s.shard.offsets.of(group_id))


def _value(offset: int) -> OffsetValue:
    return OffsetValue(offset, 3, "", START_MS)


def test_offset_fetch_answers_only_what_the_high_watermark_has_passed() -> None:
    store = OffsetStore()
    key = OffsetKey("g", "t", 0)
    store.apply(key, _value(5), log_offset=0)  # no high watermark told yet: visible at once
    assert store.visible("g") == {("t", 0): _value(5)}
    store.replicated_to(1)
    store.apply(key, _value(6), log_offset=1)
    store.apply(key, _value(7), log_offset=2)
    store.apply(OffsetKey("g", "t", 1), _value(1), log_offset=3)
    assert store.of("g") == {("t", 0): _value(7), ("t", 1): _value(1)}  # the write path sees the latest
    assert store.visible("g") == {("t", 0): _value(5)}
    store.replicated_to(2)
    assert store.visible("g") == {("t", 0): _value(6)}
    store.replicated_to(4)
    assert store.visible("g") == {("t", 0): _value(7), ("t", 1): _value(1)}
    store.apply(key, None, log_offset=4)  # a tombstone hides the offset only once replicated
    assert store.visible("g") == {("t", 0): _value(7), ("t", 1): _value(1)}
    store.replicated_to(5)
    assert store.visible("g") == {("t", 1): _value(1)}


def test_a_transactional_commit_becomes_visible_with_its_marker() -> None:
    shard = GroupShard(0, SETTINGS, SequentialIds())
    shard.offsets.replicated_to(0)
    record = Record(OffsetKey("g", "t", 0), _value(9))
    shard.replay(record, START_MS, log_offset=0, producer_id=42)
    shard.offsets.replicated_to(1)  # the commit's record is replicated, its marker not yet written
    shard.end_transaction(42, commit=True, marker_offset=1)
    assert shard.fetch("g", [("t", [0])]) == [("t", [(0, None)])]
    shard.offsets.replicated_to(2)
    assert shard.fetch("g", [("t", [0])]) == [("t", [(0, _value(9))])]
