"""The pgoutput decoder of the PostgreSQL CDC source, on messages built byte by byte as PostgreSQL's
protocol documentation lays them out."""

from __future__ import annotations

import struct

import pytest

from moldau.connect.connectors.postgres_cdc import pgoutput
from moldau.connect.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST, DecodeError, decode


def text(value: str) -> bytes:
    return value.encode() + b"\0"


def tuple_data(*values: str | object | None) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is UNCHANGED_TOAST:
            out += b"u"
        else:
            assert isinstance(value, str)
            encoded = value.encode()
            out += b"t" + struct.pack("!i", len(encoded)) + encoded
    return out


def test_begin_and_commit() -> None:
    begin = decode(b"B" + struct.pack("!QqI", 0x1_0000_0010, 123_456, 731))
    assert begin == pgoutput.Begin(0x1_0000_0010, 123_456, 731)
    commit = decode(b"C" + struct.pack("!bQQq", 0, 0x20, 0x48, 99))
    assert commit == pgoutput.Commit(0, 0x20, 0x48, 99)


def test_relation_lists_columns_with_key_flags() -> None:
    body = struct.pack("!I", 16384) + text("public") + text("orders") + b"d" + struct.pack("!h", 2)
    body += b"\x01" + text("id") + struct.pack("!Ii", 23, -1)
    body += b"\x00" + text("price") + struct.pack("!Ii", 1700, (10 << 16 | 2) + 4)
    relation = decode(b"R" + body)
    assert relation == pgoutput.Relation(16384, "public", "orders", "d", (
        pgoutput.Column("id", 23, -1, True), pgoutput.Column("price", 1700, (10 << 16 | 2) + 4, False)))


def test_empty_namespace_is_pg_catalog() -> None:
    relation = decode(b"R" + struct.pack("!I", 1) + text("") + text("t") + b"f" + struct.pack("!h", 0))
    assert isinstance(relation, pgoutput.Relation) and relation.namespace == "pg_catalog"


def test_insert_update_delete_tuples() -> None:
    assert decode(b"I" + struct.pack("!I", 7) + b"N" + tuple_data("1", None, "x")) == \
        pgoutput.Insert(7, ("1", None, "x"))
    update = decode(b"U" + struct.pack("!I", 7) + b"N" + tuple_data("1", UNCHANGED_TOAST))
    assert update == pgoutput.Update(7, None, ("1", UNCHANGED_TOAST), False)
    full = decode(b"U" + struct.pack("!I", 7) + b"O" + tuple_data("1", "old") + b"N" + tuple_data("1", "new"))
    assert full == pgoutput.Update(7, ("1", "old"), ("1", "new"), False)
    key_change = decode(b"U" + struct.pack("!I", 7) + b"K" + tuple_data("1", None) + b"N" + tuple_data("2", "v"))
    assert isinstance(key_change, pgoutput.Update) and key_change.old_is_key_only
    assert decode(b"D" + struct.pack("!I", 7) + b"K" + tuple_data("1", None)) == \
        pgoutput.Delete(7, ("1", None), True)


def test_truncate_type_origin_and_logical_messages() -> None:
    assert decode(b"T" + struct.pack("!ib", 2, 1) + struct.pack("!II", 5, 6)) == pgoutput.Truncate(1, (5, 6))
    assert decode(b"Y" + struct.pack("!I", 90000) + text("public") + text("mood")) == \
        pgoutput.TypeInfo(90000, "public", "mood")
    assert decode(b"O" + struct.pack("!Q", 5) + text("node1")) == pgoutput.Origin(5, "node1")
    assert decode(b"M" + b"\x01anything") is None


def test_utf8_values() -> None:
    insert = decode(b"I" + struct.pack("!I", 7) + b"N" + tuple_data("żółw"))
    assert isinstance(insert, pgoutput.Insert) and insert.new == ("żółw",)


@pytest.mark.parametrize("data", [
    b"", b"Z", b"B\x00\x01", b"I" + struct.pack("!I", 7) + b"X",
    b"I" + struct.pack("!I", 7) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", 10) + b"abc",
    b"I" + struct.pack("!I", 7) + b"N" + struct.pack("!h", 1) + b"?",
    b"R" + struct.pack("!I", 1) + b"no-terminator",
    b"D" + struct.pack("!I", 7) + b"N" + tuple_data("1"),
])
def test_malformed_messages_are_decode_errors(data: bytes) -> None:
    with pytest.raises(DecodeError):
        decode(data)


def test_timestamps_count_from_2000() -> None:
    assert pgoutput.pg_timestamp(0).isoformat() == "2000-01-01T00:00:00+00:00"
    assert pgoutput.pg_timestamp(1_500_000).isoformat() == "2000-01-01T00:00:01.500000+00:00"
