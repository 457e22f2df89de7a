"""The encoding of `__consumer_offsets` records and the placement of groups on its partitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moldau.coordinator.group.consumer_protocol import subscribed_topics
from moldau.coordinator.group.records import (
    CG_MEMBER,
    ClassicMemberMetadata,
    ConsumerGroupKey,
    ConsumerMemberValue,
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    Record,
    RecordFormatError,
    decode,
    encode,
    partition_for,
)
from moldau.coordinator.record_codec import Writer
from tests.unit.coordinator.harness import subscription


def test_partition_placement_matches_kafka() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    # Values computed with Java's String.hashCode, including a negative hash and a non-BMP character.
    assert [partition_for(g, 50) for g in ("test-group", "groupé", "\U0001F600x")] == [12, 6, 39]


def test_offset_key_bytes_are_kafkas() -> None:
    key, value = encode(Record(OffsetKey("g", "t", 3), OffsetValue(42, 7, "m", 1000)))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    assert value == (b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big") + b"\x00\x01m"
                     + (1000).to_bytes(8, "big"))


@settings(max_examples=200, deadline=None)
@given(group=st.text(max_size=40), topic=st.text(max_size=40), partition=st.integers(0, 2**31 - 1),
       offset=st.integers(-1, 2**63 - 1), epoch=st.integers(-1, 2**31 - 1), metadata=st.text(max_size=100),
       timestamp=st.integers(0, 2**42))
def test_offset_records_are_packed_as_field_by_field(group: str, topic: str, partition: int, offset: int, epoch: int,
                                                    metadata: str, timestamp: int) -> None:
    key, value = encode(Record(OffsetKey(group, topic, partition), OffsetValue(offset, epoch, metadata, timestamp)))
    assert key == bytes(Writer(1).string(group).string(topic).i32(partition).buf)
    assert value == bytes(Writer(3).i64(offset).i32(epoch).string(metadata).i64(timestamp).buf)
    assert decode(key, value) == Record(OffsetKey(group, topic, partition), OffsetValue(offset, epoch, metadata,
                                                                                       timestamp))


def test_group_record_round_trip() -> None:
    members = (
        MemberValue("m-1", None, "client", "/10.0.0.1", 30000, 10000, subscription("a", "b"), b"assigned"),
        MemberValue("i-2", "i", "client", "/10.0.0.2", 30000, 10000, b"", b""),
    )
    record = Record(GroupKey("my-group"), GroupValue("consumer", 5, "range", "m-1", 123456, members))
    key, value = encode(record)
    assert key == b"\x00\x02\x00\x08my-group"
    assert decode(key, value) == record


def test_tombstones_round_trip() -> None:
    for record in (Record(GroupKey("g"), None), Record(OffsetKey("g", "t", 0), None)):
        key, value = encode(record)
        assert value is None
        assert decode(key, None) == record


def test_older_value_versions_are_read() -> None:
    key = encode(Record(OffsetKey("g", "t", 0), None))[0]
    v1 = b"\x00\x01" + (5).to_bytes(8, "big") + b"\x00\x00" + (10).to_bytes(8, "big") + (99).to_bytes(8, "big")
    assert decode(key, v1).value == OffsetValue(5, -1, "", 10)
    group_key = encode(Record(GroupKey("g"), None))[0]
    v0 = (b"\x00\x00" + b"\x00\x08consumer" + (1).to_bytes(4, "big") + b"\x00\x05range" + b"\x00\x01m"
          + (1).to_bytes(4, "big") + b"\x00\x01m" + b"\x00\x01c" + b"\x00\x01h" + (6000).to_bytes(4, "big")
          + (0).to_bytes(4, "big") + (0).to_bytes(4, "big"))
    value = decode(group_key, v0).value
    assert isinstance(value, GroupValue)
    assert value.members[0].rebalance_timeout_ms == value.members[0].session_timeout_ms == 6000


def test_malformed_records_are_rejected() -> None:
    with pytest.raises(RecordFormatError):
        decode(b"\x00\x07\x00\x01g", None)
    with pytest.raises(RecordFormatError):
        decode(b"\x00\x01\x00\x05g", None)


def test_consumer_subscription_topics() -> None:
    assert subscribed_topics(subscription("a", "b")) == frozenset({"a", "b"})
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x01\x00\x09ab") is None


def test_consumer_member_records_keep_the_principal_and_read_version_0_without_it() -> None:
    member = ConsumerMemberValue("i", None, "client", "/10.0.0.1", ("a", "b"), "orders-.*", 30_000, "uniform",
                                 principal="User:alice")
    classic = ConsumerMemberValue(None, "rack", "c", "/h", ("t",), None, 5000, None,
                                  ClassicMemberMetadata(6000, (("range", b"\x00\x01"),)), principal="User:bob")
    key = ConsumerGroupKey(CG_MEMBER, "g", "m")
    for value in (member, classic):
        assert decode(*encode(Record(key, value))).value == value
    # Version 0, written before principals were kept: the same fields, no principal.
    key_bytes, v1 = encode(Record(key, member))
    assert v1 is not None and v1.endswith(b"\x00\x0aUser:alice") and v1[:2] == b"\x00\x01"
    v0 = b"\x00\x00" + v1[2:-len(b"\x00\x0aUser:alice")]
    assert decode(key_bytes, v0).value == ConsumerMemberValue("i", None, "client", "/10.0.0.1", ("a", "b"),
                                                              "orders-.*", 30_000, "uniform", principal=None)
    with pytest.raises(RecordFormatError):
        decode(key_bytes, b"\x00\x02" + v1[2:])
