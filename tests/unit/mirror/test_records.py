"""MirrorMaker 2's record formats, checked against bytes written out by hand from Kafka's type system."""

from __future__ import annotations

import pytest

from moldau.mirror.records import Checkpoint, Heartbeat, MalformedRecord, OffsetSync


def test_an_offset_sync_is_a_topic_partition_key_and_two_int64s() -> None:
    sync = OffsetSync("orders", 3, 1000, 42)
    assert sync.key() == b"\x00\x06orders" + b"\x00\x00\x00\x03"
    assert sync.value() == (1000).to_bytes(8, "big") + (42).to_bytes(8, "big")
    assert OffsetSync.from_record(sync.key(), sync.value()) == sync


def test_a_checkpoint_value_starts_with_version_zero() -> None:
    checkpoint = Checkpoint("billing", "a.orders", 1, 500, 77, "meta")
    assert checkpoint.key() == b"\x00\x07billing" + b"\x00\x08a.orders" + b"\x00\x00\x00\x01"
    assert checkpoint.value() == (b"\x00\x00" + (500).to_bytes(8, "big") + (77).to_bytes(8, "big")
                                  + b"\x00\x04meta")
    assert Checkpoint.from_record(checkpoint.key(), checkpoint.value()) == checkpoint


def test_a_heartbeat_names_both_clusters_and_carries_a_timestamp() -> None:
    heartbeat = Heartbeat("east", "west", 1_700_000_000_000)
    assert heartbeat.key() == b"\x00\x04east\x00\x04west"
    assert heartbeat.value() == b"\x00\x00" + (1_700_000_000_000).to_bytes(8, "big")
    assert Heartbeat.from_record(heartbeat.key(), heartbeat.value()) == heartbeat


def test_non_ascii_names_are_counted_in_bytes() -> None:
    sync = OffsetSync("zähler", 0, 1, 2)
    assert sync.key()[:2] == len("zähler".encode()).to_bytes(2, "big")
    assert OffsetSync.from_record(sync.key(), sync.value()) == sync


@pytest.mark.parametrize(("key", "value", "message"), [
    (b"\x00\x06orders\x00\x00", bytes(16), "truncated"),
    (b"\x00\x06orders\x00\x00\x00\x00", bytes(17), "past its end"),
    (None, bytes(16), "missing"),
    (b"\x00\x02\xff\xfe\x00\x00\x00\x00", bytes(16), "not UTF-8"),
    (b"\xff\xff", bytes(16), "truncated"),
])
def test_malformed_offset_syncs_are_refused_with_the_reason(key: bytes | None, value: bytes, message: str) -> None:
    with pytest.raises(MalformedRecord, match=message):
        OffsetSync.from_record(key, value)


def test_an_unknown_checkpoint_version_is_refused() -> None:
    checkpoint = Checkpoint("g", "t", 0, 1, 1)
    with pytest.raises(MalformedRecord, match="version 1"):
        Checkpoint.from_record(checkpoint.key(), b"\x00\x01" + checkpoint.value()[2:])
