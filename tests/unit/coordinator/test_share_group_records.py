"""A share group's records in `__consumer_offsets` (type 11, its epoch and topics; type 10, each member): the
bytes, the shard's replay, the group id it keeps from classic and consumer groups, and the share manager taking a
written group and its members back after a restart."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from moldau.clock import ManualClock
from moldau.coordinator.group.consumer import HeartbeatRequest
from moldau.coordinator.group.member import JoinRequest, ProtocolMetadata
from moldau.coordinator.group.records import (
    Record,
    RecordFormatError,
    ShareGroupKey,
    ShareGroupValue,
    ShareMemberKey,
    ShareMemberValue,
    decode,
    encode,
)
from moldau.coordinator.group.shard import GroupShard, ShardSettings
from moldau.protocol.errors import ErrorCode
from moldau.share.group import Heartbeat
from moldau.share.manager import ShareGroups
from moldau.share.settings import ShareBrokerSettings
from tests.unit.coordinator.harness import SequentialIds


def test_the_record_is_type_11_with_the_epoch_and_topics_and_a_tombstone_deletes() -> None:
    record = Record(ShareGroupKey("queue"), ShareGroupValue(7, ("jobs",)))
    key, value = encode(record)
    assert key == b"\x00\x0b\x00\x05queue"
    assert value == b"\x00\x00" + b"\x00\x00\x00\x07" + b"\x00\x00\x00\x01" + b"\x00\x04jobs"
    assert decode(key, value) == record
    assert decode(key, None) == Record(ShareGroupKey("queue"), None)


def test_malformed_values_are_refused_so_loading_skips_them() -> None:
    key = encode(Record(ShareGroupKey("queue"), None))[0]
    huge_count = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x7f\xff\xff\xff"
    truncated_name = b"\x00\x00" + bytes(4) + b"\x00\x00\x00\x01" + b"\x00\x09ab"
    for value in (huge_count, b"\x00\x00\x00\x00", b"\x00\x07" + bytes(8), truncated_name):
        with pytest.raises(RecordFormatError):
            decode(key, value)


def join(shard: GroupShard, group_id: str) -> ErrorCode:
    request = JoinRequest("", None, "c", "/h", 10_000, 10_000, "consumer", (ProtocolMetadata("range", b""),), True)
    [completion] = shard.join(group_id, 1, request, 0).completions
    return completion.result.error


def consumer_heartbeat(shard: GroupShard, group_id: str) -> ErrorCode:
    request = HeartbeatRequest("m", 0, None, None, 10_000, ("t",), None, None, None, "c", "/h")
    return shard.consumer_heartbeat(group_id, request, {"t": 1}, 0).result.error


def test_a_written_share_group_keeps_its_id_until_its_deletion_is_replayed() -> None:
    shard = GroupShard(0, ShardSettings(), SequentialIds())
    shard.replay(GroupShard.share_group_record("queue", ShareGroupValue(3)), 0)
    assert shard.share_groups == {"queue": ShareGroupValue(3)}
    assert join(shard, "queue") == ErrorCode.inconsistent_group_protocol
    assert consumer_heartbeat(shard, "queue") == ErrorCode.group_id_not_found
    shard.replay(GroupShard.share_group_record("queue", None), 0)
    assert shard.share_groups == {}
    assert join(shard, "queue") == ErrorCode.member_id_required  # a classic group may have the id now


class Written:
    """The group coordinator's side as the share manager sees it: the groups written, by epoch, their members, and
    which loading of the partition coordinates them."""

    def __init__(self, epochs: dict[str, int], members: dict[str, dict[str, ShareMemberValue]] | None = None) -> None:
        self.epochs = epochs
        self.members = members or {}
        self.load: int | None = 1

    def share_group_epoch(self, group_id: str) -> int | None:
        return None if self.load is None else self.epochs.get(group_id)

    def share_group_epochs(self) -> Mapping[str, int]:
        return {} if self.load is None else self.epochs

    def share_group_members(self, group_id: str) -> Mapping[str, ShareMemberValue]:
        return {} if self.load is None else self.members.get(group_id, {})

    def share_group_load(self, group_id: str) -> int | None:
        return self.load


def test_the_share_manager_takes_a_written_group_back_empty_at_its_epoch() -> None:
    written = Written({"queue": 5})
    share = ShareGroups(ShareBrokerSettings(), ManualClock(), None, durable=written)  # type: ignore[arg-type]
    assert [(g.group_id, g.epoch, g.state) for g in share.list_groups()] == [("queue", 5, "Empty")]
    answer = share.heartbeat("queue", Heartbeat("m", 0, subscribed_topics=("t",)), lambda topic: 1)
    assert answer.error == ErrorCode.none and answer.member_epoch > 5  # on from the written epoch
    share.heartbeat("other", Heartbeat("n", 0, subscribed_topics=("t",)), lambda topic: 1)
    assert [g.group_id for g in share.list_groups()] == ["queue"]  # only what is written is listed
    fresh = ShareGroups(ShareBrokerSettings(), ManualClock(), None, durable=Written({}))  # type: ignore[arg-type]
    assert fresh.describe("queue") is None and fresh.delete_group("queue") is None


def test_a_member_record_is_type_10_keyed_by_group_and_member() -> None:
    record = Record(ShareMemberKey("queue", "m1"), ShareMemberValue(4, None, "cli", "/10.0.0.1", ("a", "b")))
    key, value = encode(record)
    assert key == b"\x00\x0a\x00\x05queue\x00\x02m1"
    assert value == (b"\x00\x00" + b"\x00\x00\x00\x04" + b"\xff\xff" + b"\x00\x03cli" + b"\x00\x09/10.0.0.1"
                     + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x01b")
    assert decode(key, value) == record
    assert decode(key, None) == Record(ShareMemberKey("queue", "m1"), None)
    for bad in (b"\x00\x01" + value[2:], value[:-1], b"\x00\x00\x00"):
        with pytest.raises(RecordFormatError):
            decode(key, bad)


def test_the_shard_keeps_written_members_until_their_tombstone_or_the_groups() -> None:
    shard = GroupShard(0, ShardSettings(), SequentialIds())
    member = ShareMemberValue(2, "rack", "c", "/h", ("t",))
    shard.replay(GroupShard.share_group_record("queue", ShareGroupValue(2, ("t",))), 0)
    for member_id in ("m1", "m2"):
        shard.replay(Record(ShareMemberKey("queue", member_id), member), 0)
    shard.replay(Record(ShareMemberKey("queue", "m1"), None), 0)
    assert shard.share_members == {"queue": {"m2": member}}
    shard.replay(GroupShard.share_group_record("queue", None), 0)
    assert shard.share_members == {} and shard.share_groups == {}


def test_written_members_carry_on_at_their_epoch_after_a_restart() -> None:
    clock = ManualClock()
    written = Written({"queue": 5}, {"queue": {"m": ShareMemberValue(5, None, "c", "/h", ("t",))}})
    share = ShareGroups(ShareBrokerSettings(), clock, None, durable=written)  # type: ignore[arg-type]
    (group,) = share.list_groups()
    assert (group.state, list(group.members)) == ("Stable", ["m"])
    carried = share.heartbeat("queue", Heartbeat("m", 5), lambda topic: 2)
    # Not UNKNOWN_MEMBER_ID: the member goes on, and gets its assignment again at the next epoch.
    assert carried.error == ErrorCode.none and carried.member_epoch > 5
    assert carried.assignment == frozenset({("t", 0), ("t", 1)})
    stranger = share.heartbeat("queue", Heartbeat("x", 3), lambda topic: 2)
    assert stranger.error == ErrorCode.unknown_member_id


def test_a_written_member_that_never_comes_back_expires_and_its_group_is_noted() -> None:
    clock = ManualClock()
    written = Written({"queue": 5}, {"queue": {"gone": ShareMemberValue(5, None, "c", "/h", ("t",))}})
    share = ShareGroups(ShareBrokerSettings(), clock, None, durable=written)  # type: ignore[arg-type]
    assert share.describe("queue") is not None
    clock.advance(ShareBrokerSettings().membership.session_timeout_ms + 1)
    share.expire_members(share.now_ms())
    assert share.take_expired_in() == {"queue"} and share.take_expired_in() == set()
    described = share.describe("queue")
    assert described is not None and described.state == "Empty" and described.epoch == 6


def test_a_group_kept_from_an_earlier_loading_gives_way_to_what_is_written() -> None:
    """The group's partition was led elsewhere and came back: its coordinator there may have moved it on."""
    written = Written({"queue": 5})
    share = ShareGroups(ShareBrokerSettings(), ManualClock(), None, durable=written)  # type: ignore[arg-type]
    joined = share.heartbeat("queue", Heartbeat("m", 0, subscribed_topics=("t",)), lambda topic: 1)
    epoch = joined.member_epoch
    written.epochs["queue"] = 20
    written.members["queue"] = {"n": ShareMemberValue(20, None, "c", "/h", ("t",))}
    same = share.describe("queue")
    assert same is not None and (same.epoch, list(same.members)) == (epoch, ["m"])  # the same loading: memory
    written.load = 2
    again = share.describe("queue")
    assert again is not None and (again.epoch, list(again.members)) == (20, ["n"])
    written.load = None  # led elsewhere now: nothing here
    assert share.describe("queue") is None
