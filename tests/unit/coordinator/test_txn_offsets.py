"""Transactional offset commits on one shard: pending until the marker, commit and abort, replay, the rules.

The fake log below keeps what a coordinator would have appended to the partition, with log offsets, producer
ids and markers, so that rebuilding a shard from it is the same replay a broker does on load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moldau.coordinator.group.consumer import HeartbeatRequest
from moldau.coordinator.group.member import JoinRequest, JoinResult, ProtocolMetadata, SyncRequest
from moldau.coordinator.group.offsets import FetchedValue, OffsetCommit
from moldau.coordinator.group.records import OffsetKey, Record
from moldau.coordinator.group.shard import NO_PRODUCER_ID, GroupShard, ShardSettings
from moldau.protocol.errors import ErrorCode
from tests.unit.coordinator.harness import LIMITS, START_MS, SequentialIds, subscription

RETENTION_MS = 60_000
SETTINGS = ShardSettings(LIMITS, offset_metadata_max_bytes=10, offsets_retention_ms=RETENTION_MS)
PID = 7


@dataclass(frozen=True)
class Marker:
    producer_id: int
    commit: bool
    offset: int


@dataclass(frozen=True)
class Logged:
    record: Record
    offset: int
    producer_id: int


class TxnShard:
    """A shard plus its partition's log: offset records, group snapshots and transaction markers."""

    def __init__(self) -> None:
        self.now = START_MS
        self.shard = GroupShard(0, SETTINGS, SequentialIds())
        self.log: list[Logged | Marker] = []
        self._handle = 0

    def _append(self, records: Sequence[Record], producer_id: int = NO_PRODUCER_ID) -> None:
        first = len(self.log)
        self.log += [Logged(r, first + i, producer_id) for i, r in enumerate(records)]
        self.shard.replay_all(records, self.now, first, producer_id)

    def txn_commit(self, group_id: str, *offsets: tuple[str, int, int], producer_id: int = PID, member: str = "",
                   generation: int = -1, instance: str | None = None) -> list[ErrorCode]:
        commits = [OffsetCommit(t, p, o, 3, "m") for t, p, o in offsets]
        write = self.shard.txn_commit(group_id, member, instance, generation, commits, self.now)
        self._append(write.records, producer_id)
        return write.errors

    def commit(self, group_id: str, *offsets: tuple[str, int, int]) -> list[ErrorCode]:
        commits = [OffsetCommit(t, p, o, 3, "m") for t, p, o in offsets]
        write = self.shard.commit(group_id, "", None, -1, commits, 8, self.now)
        self._append(write.records)
        return write.errors

    def end(self, commit: bool, producer_id: int = PID) -> None:
        marker = Marker(producer_id, commit, len(self.log))
        self.log.append(marker)
        self.shard.end_transaction(producer_id, commit)

    def write(self, records: Sequence[Record]) -> None:
        self._append(records)

    def fetched(self, group_id: str, topic: str = "t", partition: int = 0, stable: bool = False) -> FetchedValue:
        ((_, [(_, value)]),) = self.shard.fetch(group_id, [(topic, [partition])], stable)
        return value

    def committed(self, group_id: str, topic: str = "t", partition: int = 0) -> int:
        value = self.fetched(group_id, topic, partition)
        assert not isinstance(value, ErrorCode)
        return -1 if value is None else value.offset

    def member(self, group_id: str, instance: str | None = None) -> tuple[str, int]:
        """One classic consumer member through join and sync; returns its member id and generation."""
        self._handle += 1
        request = JoinRequest("", instance, "c", "/h", 10_000, 30_000, "consumer",
                              (ProtocolMetadata("range", subscription("t")),), False)
        fx = self.shard.join(group_id, self._handle, request, self.now)
        joined = fx.completions[0].result
        assert isinstance(joined, JoinResult)
        member_id = joined.member_id
        generation = self.shard.groups[group_id].generation_id
        self._handle += 1
        sync = SyncRequest(member_id, instance, generation, None, None, ((member_id, b"a"),))
        self.shard.sync(group_id, self._handle, sync, self.now)
        if fx.persist:
            self.log.append(Logged(self.shard.group_record(group_id), len(self.log), NO_PRODUCER_ID))
        return member_id, generation

    def rebuilt(self) -> GroupShard:
        """What loading the partition from the log gives."""
        shard = GroupShard(0, SETTINGS, SequentialIds())
        for item in self.log:
            if isinstance(item, Marker):
                shard.end_transaction(item.producer_id, item.commit)
            else:
                shard.replay(item.record, self.now, item.offset, item.producer_id)
        return shard


def offsets_of(shard: GroupShard, group_id: str) -> dict[tuple[str, int], int]:
    return {tp: v.offset for tp, v in shard.offsets.of(group_id).items()}


# -- visibility, commit and abort ----------------------------------------------------------------------------


def test_pending_offsets_are_invisible_until_the_transaction_commits() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 5))
    assert s.txn_commit("g", ("t", 0, 10), ("t", 1, 11)) == [ErrorCode.none, ErrorCode.none]
    assert (s.committed("g"), s.committed("g", "t", 1)) == (5, -1)
    s.end(commit=True)
    assert (s.committed("g"), s.committed("g", "t", 1)) == (10, 11)
    assert not s.shard.pending.has_group("g")


def test_abort_drops_the_pending_offsets() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 5))
    s.txn_commit("g", ("t", 0, 10))
    s.end(commit=False)
    assert s.committed("g") == 5
    assert not s.shard.pending.has_group("g")
    s.end(commit=True)  # a marker repeated by a retry: nothing left to commit
    assert s.committed("g") == 5


def test_a_plain_commit_written_during_the_transaction_wins() -> None:
    s = TxnShard()
    s.txn_commit("g", ("t", 0, 10), ("t", 1, 10))
    s.commit("g", ("t", 0, 20))  # newer in the log than the transactional record
    s.end(commit=True)
    assert (s.committed("g"), s.committed("g", "t", 1)) == (20, 10)
    assert offsets_of(s.rebuilt(), "g") == {("t", 0): 20, ("t", 1): 10}


def test_transactions_of_two_producers_and_groups_end_separately() -> None:
    s = TxnShard()
    s.txn_commit("a", ("t", 0, 1), producer_id=1)
    s.txn_commit("b", ("t", 0, 2), producer_id=1)
    s.txn_commit("a", ("t", 1, 3), producer_id=2)
    s.end(commit=False, producer_id=2)
    s.end(commit=True, producer_id=1)
    assert (s.committed("a"), s.committed("a", "t", 1), s.committed("b")) == (1, -1, 2)


def test_a_transactional_commit_creates_a_missing_group() -> None:
    s = TxnShard()
    assert s.txn_commit("new", ("t", 0, 1)) == [ErrorCode.none]
    assert "new" in s.shard.groups
    assert s.txn_commit("other", ("t", 0, 1), generation=3, member="m") == [ErrorCode.illegal_generation]
    assert "other" not in s.shard.groups


def test_oversized_metadata_fails_only_its_partition() -> None:
    s = TxnShard()
    write = s.shard.txn_commit("g", "", None, -1, [OffsetCommit("t", 0, 1, -1, "x" * 11),
                                                   OffsetCommit("t", 1, 2, -1, None)], s.now)
    assert write.errors == [ErrorCode.offset_metadata_too_large, ErrorCode.none]
    assert len(write.records) == 1


# -- require_stable ------------------------------------------------------------------------------------------


def test_require_stable_reports_pending_partitions_as_unstable() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 5), ("t", 1, 6))
    s.txn_commit("g", ("t", 0, 10), ("u", 0, 1))
    assert s.fetched("g", stable=True) == ErrorCode.unstable_offset_commit
    assert s.fetched("g", "u", 0, stable=True) == ErrorCode.unstable_offset_commit
    assert s.committed("g", "t", 1) == 6 and s.fetched("g", stable=False).offset == 5  # type: ignore[union-attr]
    # All partitions: only committed ones are listed, the pending one flagged.
    ((topic, partitions),) = s.shard.fetch("g", None, True)
    assert topic == "t" and partitions[0] == (0, ErrorCode.unstable_offset_commit)
    assert partitions[1][1].offset == 6  # type: ignore[union-attr]
    s.end(commit=True)
    assert s.fetched("g", stable=True).offset == 10  # type: ignore[union-attr]


# -- replay --------------------------------------------------------------------------------------------------


def test_replay_rebuilds_committed_aborted_and_open_transactions() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 1))
    s.txn_commit("g", ("t", 0, 2), producer_id=1)
    s.txn_commit("g", ("t", 1, 3), producer_id=2)
    s.end(commit=True, producer_id=1)
    s.end(commit=False, producer_id=2)
    s.txn_commit("g", ("t", 2, 4), producer_id=3)  # still open when the broker stops
    rebuilt = s.rebuilt()
    assert offsets_of(rebuilt, "g") == offsets_of(s.shard, "g") == {("t", 0): 2}
    assert dict(rebuilt.pending.partitions("g")) == {("t", 2): {3}}
    rebuilt.end_transaction(3, True)
    assert offsets_of(rebuilt, "g") == {("t", 0): 2, ("t", 2): 4}


def test_unload_drops_pending_state() -> None:
    s = TxnShard()
    s.txn_commit("g", ("t", 0, 2))
    s.shard.unload()
    assert not s.shard.pending.has_group("g")
    assert dict(s.rebuilt().pending.partitions("g")) == {("t", 0): {PID}}


# -- deletion and expiry -------------------------------------------------------------------------------------


def test_offset_delete_of_a_pending_partition_drops_the_pending_commit() -> None:
    s = TxnShard()
    s.txn_commit("g", ("t", 0, 10))
    error, write = s.shard.delete_offsets("g", [("t", 0)])
    assert error == ErrorCode.none and write.errors == [ErrorCode.none] and len(write.records) == 1
    s.write(write.records)
    s.end(commit=True)
    assert s.committed("g") == -1
    assert s.rebuilt().offsets.of("g") == {}


def test_delete_group_removes_pending_offsets_too() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 1))
    s.txn_commit("g", ("t", 0, 2), ("t", 1, 3))
    error, records = s.shard.delete_group("g")
    assert error == ErrorCode.none
    assert sorted((r.key.topic, r.key.partition) for r in records[:-1]) == [("t", 0), ("t", 1)]  # type: ignore[union-attr]
    s.write(records)
    s.end(commit=True)
    assert "g" not in s.shard.groups and s.shard.offsets.of("g") == {}
    rebuilt = s.rebuilt()
    assert "g" not in rebuilt.groups and rebuilt.offsets.of("g") == {}


def test_expiry_waits_for_open_transactions() -> None:
    s = TxnShard()
    s.commit("g", ("t", 0, 1), ("t", 1, 1))
    s.txn_commit("g", ("t", 0, 2))
    s.txn_commit("h", ("t", 0, 2))  # a group with nothing but a pending commit
    s.now += RETENTION_MS
    changes = s.shard.expire(s.now)
    assert changes == [[Record(OffsetKey("g", "t", 1), None)]]  # not t-0, and the groups stay
    for records in changes:
        s.write(records)
    s.end(commit=True)
    assert s.committed("g") == 2 and s.committed("h") == 2


# -- who may commit ------------------------------------------------------------------------------------------


def test_classic_group_member_rules() -> None:
    s = TxnShard()
    member, generation = s.member("g")
    assert s.txn_commit("g", ("t", 0, 1), member=member, generation=generation) == [ErrorCode.none]
    assert s.txn_commit("g", ("t", 0, 1), member=member, generation=generation + 1) == [ErrorCode.illegal_generation]
    assert s.txn_commit("g", ("t", 0, 1), member="stranger", generation=generation) == [ErrorCode.unknown_member_id]
    # Without member and generation (v0-v2, or no group metadata): accepted even while the group has members.
    assert s.txn_commit("g", ("t", 0, 1)) == [ErrorCode.none]


def test_static_member_with_a_new_member_id_is_fenced() -> None:
    s = TxnShard()
    member, generation = s.member("g", instance="i1")
    assert s.txn_commit("g", ("t", 0, 1), member=member, generation=generation, instance="i1") == [ErrorCode.none]
    assert s.txn_commit("g", ("t", 0, 1), member="old", generation=generation, instance="i1") == \
        [ErrorCode.fenced_instance_id]
    assert s.txn_commit("g", ("t", 0, 1), member=member, generation=generation, instance="i2") == \
        [ErrorCode.unknown_member_id]


def test_consumer_group_member_epoch_rules() -> None:
    s = TxnShard()
    request = HeartbeatRequest("", 0, rebalance_timeout_ms=30_000, subscribed_topics=("t",), owned=frozenset(),
                               client_id="c")
    outcome = s.shard.consumer_heartbeat("cg", request, {"t": 1})
    s.write(outcome.records)
    member_id, epoch = outcome.result.member_id, outcome.result.member_epoch
    assert s.txn_commit("cg", ("t", 0, 1), member=member_id, generation=epoch) == [ErrorCode.none]
    assert s.txn_commit("cg", ("t", 0, 1), member=member_id, generation=epoch - 1) == [ErrorCode.illegal_generation]
    assert s.txn_commit("cg", ("t", 0, 1), member="stranger", generation=epoch) == [ErrorCode.unknown_member_id]
    assert s.txn_commit("cg", ("t", 0, 1)) == [ErrorCode.unknown_member_id]  # simple commits: only when empty
