"""A share group's record in `__consumer_offsets` (type 11, its epoch and topics): the bytes, the shard's replay,
the group id it keeps from classic and consumer groups, and the share manager taking a written group back after a
restart."""

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
    """The group coordinator's side as the share manager sees it: the groups written, by epoch."""

    def __init__(self, epochs: dict[str, int]) -> None:
        self.epochs = epochs

    def share_group_epoch(self, group_id: str) -> int | None:
        return self.epochs.get(group_id)

    def share_group_epochs(self) -> Mapping[str, int]:
        return self.epochs


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
