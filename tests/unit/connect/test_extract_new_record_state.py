"""Debezium's ExtractNewRecordState on change events with and without schemas."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.connect.api import SourceRecord
from moldau.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
)
from moldau.connect.errors import ConfigException
from moldau.connect.transforms.debezium import ExtractNewRecordState

ROW = SchemaBuilder.struct().name("db.public.customers.Value").field("id", INT32_SCHEMA) \
    .field("name", OPTIONAL_STRING_SCHEMA).optional().build()
SOURCE = SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source").field("table", STRING_SCHEMA) \
    .field("lsn", INT64_SCHEMA).build()
ENVELOPE = SchemaBuilder.struct().name("db.public.customers.Envelope").field("before", ROW).field("after", ROW) \
    .field("source", SOURCE).field("op", STRING_SCHEMA).build()


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> SourceRecord:
    value = Struct(ENVELOPE, {"op": op, "source": Struct(SOURCE, {"table": "customers", "lsn": 42}),
                              "before": None if before is None else Struct(ROW, before),
                              "after": None if after is None else Struct(ROW, after)})
    return SourceRecord(topic="db.public.customers", key={"id": 1}, value_schema=ENVELOPE, value=value)


def unwrap(**config: str) -> ExtractNewRecordState:
    smt = ExtractNewRecordState()
    smt.configure(config)
    return smt


def test_the_after_row_replaces_the_envelope() -> None:
    out = unwrap().apply(event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}))
    assert out is not None and out.value == Struct(ROW, {"id": 1, "name": "b"}) and out.value_schema == ROW


def test_deletes_and_tombstones_by_default_are_dropped() -> None:
    smt = unwrap()
    assert smt.apply(event("d", {"id": 1, "name": "a"}, None)) is None
    assert smt.apply(SourceRecord(topic="t", key={"id": 1}, value=None)) is None


def test_deletes_as_tombstones_for_a_sink_that_deletes() -> None:
    smt = unwrap(**{"delete.handling.mode": "none", "drop.tombstones": "false"})
    out = smt.apply(event("d", {"id": 1, "name": "a"}, None))
    assert out is not None and out.value is None and out.key == {"id": 1}
    tombstone = SourceRecord(topic="t", key={"id": 1}, value=None)
    assert smt.apply(tombstone) is tombstone
    newer = unwrap(**{"delete.tombstone.handling.mode": "tombstone"})
    out = newer.apply(event("d", {"id": 1, "name": "a"}, None))
    assert out is not None and out.value is None
    assert newer.apply(tombstone) is None


def test_rewrite_marks_every_row_and_adds_envelope_fields() -> None:
    smt = unwrap(**{"delete.handling.mode": "rewrite", "add.fields": "op,table,source.lsn", "add.headers": "op"})
    deleted = smt.apply(event("d", {"id": 1, "name": "a"}, None))
    assert deleted is not None
    assert deleted.value.to_dict() == {"id": 1, "name": "a", "__op": "d", "__table": "customers",
                                       "__source_lsn": 42, "__deleted": "true"}
    assert [(h.key, h.value) for h in deleted.headers] == [("__op", "d")]
    created = smt.apply(event("c", None, {"id": 2, "name": "b"}))
    assert created is not None and created.value.get("__deleted") == "false"


def test_schemaless_events_and_other_records() -> None:
    smt = unwrap(**{"add.fields": "op"})
    record = SourceRecord(topic="t", value={"op": "c", "before": None, "after": {"id": 3}, "source": {}})
    out = smt.apply(record)
    assert out is not None and out.value == {"id": 3, "__op": "c"} and out.value_schema is None
    heartbeat = SourceRecord(topic="__debezium-heartbeat.db", value={"ts_ms": 1})
    assert smt.apply(heartbeat) is heartbeat


def test_a_bad_mode_names_the_option() -> None:
    with pytest.raises(ConfigException, match=r"delete\.handling\.mode"):
        unwrap(**{"delete.handling.mode": "explode"})
