"""Debezium's ExtractNewRecordState on hand-built Debezium change event envelopes."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.connect.api import SinkRecord
from moldau.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
)
from moldau.connect.errors import ConfigException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.transforms.debezium import ExtractNewRecordState

ROW = (SchemaBuilder.struct().name("db.public.t.Value").optional().field("id", INT32_SCHEMA)
       .field("name", OPTIONAL_STRING_SCHEMA).build())
SOURCE = (SchemaBuilder.struct().name("io.debezium.connector.postgresql.Source").field("table", STRING_SCHEMA)
          .field("lsn", OPTIONAL_INT64_SCHEMA).field("ts_ms", INT64_SCHEMA).build())
ENVELOPE = (SchemaBuilder.struct().name("db.public.t.Envelope").field("before", ROW).field("after", ROW)
            .field("source", SOURCE).field("op", STRING_SCHEMA).field("ts_ms", OPTIONAL_INT64_SCHEMA).build())


def event(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> SinkRecord:
    value = Struct(ENVELOPE, {
        "before": Struct(ROW, before) if before else None, "after": Struct(ROW, after) if after else None,
        "source": Struct(SOURCE, {"table": "t", "lsn": 42, "ts_ms": 1000}), "op": op, "ts_ms": 2000})
    return SinkRecord(topic="db.public.t", kafka_partition=0, value_schema=ENVELOPE, value=value)


def smt(**configs: str) -> ExtractNewRecordState:
    transform = ExtractNewRecordState()
    transform.configure(configs)
    return transform


def test_it_is_known_by_debeziums_class_name() -> None:
    info = PluginRegistry.discover(entry_points=False).get("io.debezium.transforms.ExtractNewRecordState")
    assert info.cls is ExtractNewRecordState and info.type == "transformation"


def test_creates_and_updates_become_the_new_row() -> None:
    out = smt().apply(event("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}))
    assert out is not None and out.value_schema == ROW and out.value.to_dict() == {"id": 1, "name": "b"}


def test_deletes_are_dropped_by_default_and_tombstones_too() -> None:
    delete = event("d", {"id": 1, "name": "a"}, None)
    tombstone = SinkRecord(topic="db.public.t", key=1, value=None)
    assert smt().apply(delete) is None and smt().apply(tombstone) is None
    assert smt(**{"drop.tombstones": "false"}).apply(tombstone) is tombstone


def test_delete_handling_none_keeps_a_null_value() -> None:
    out = smt(**{"delete.handling.mode": "none"}).apply(event("d", {"id": 1, "name": "a"}, None))
    assert out is not None and out.value is None and out.value_schema == ROW


def test_delete_handling_rewrite_marks_rows_deleted_or_not() -> None:
    transform = smt(**{"delete.handling.mode": "rewrite"})
    deleted = transform.apply(event("d", {"id": 1, "name": "a"}, None))
    kept = transform.apply(event("c", None, {"id": 2, "name": "b"}))
    assert deleted is not None and deleted.value.to_dict() == {"id": 1, "name": "a", "__deleted": "true"}
    assert kept is not None and kept.value.to_dict() == {"id": 2, "name": "b", "__deleted": "false"}
    assert deleted.value_schema is kept.value_schema  # one derived schema per row schema


def test_add_fields_and_headers_copy_envelope_and_source_fields() -> None:
    out = smt(**{"add.fields": "op,table,source.ts_ms", "add.headers": "lsn", "add.headers.prefix": "dbz."}).apply(
        event("c", None, {"id": 3, "name": "c"}))
    assert out is not None
    assert out.value.to_dict() == {"id": 3, "name": "c", "__op": "c", "__table": "t", "__source_ts_ms": 1000}
    assert [(h.key, h.value) for h in out.headers] == [("dbz.lsn", 42)]


def test_records_that_are_not_envelopes_pass_unchanged_and_truncates_are_dropped() -> None:
    plain = SinkRecord(topic="t", value_schema=ROW, value=Struct(ROW, {"id": 1}))
    assert smt().apply(plain) is plain
    schemaless = SinkRecord(topic="t", value={"id": 1})
    assert smt().apply(schemaless) is schemaless
    assert smt(**{"delete.handling.mode": "rewrite"}).apply(event("t", None, None)) is None


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigException) as caught:
        smt(**{"delete.handling.mode": "keep"})
    assert caught.value.name == "delete.handling.mode"
    with pytest.raises(ConfigException):
        smt(**{"add.fields": "a.b.c"})


def test_the_newer_single_option_and_schemaless_events() -> None:
    tombstones = smt(**{"delete.tombstone.handling.mode": "tombstone"})
    out = tombstones.apply(event("d", {"id": 1, "name": "a"}, None))
    assert out is not None and out.value is None
    assert tombstones.apply(SinkRecord(topic="t", kafka_partition=0, value=None)) is None  # the original one
    kept = smt(**{"delete.tombstone.handling.mode": "rewrite-with-tombstone"})
    tombstone = SinkRecord(topic="t", kafka_partition=0, value=None)
    assert kept.apply(tombstone) is tombstone
    schemaless = smt(**{"add.fields": "op"}).apply(SinkRecord(
        topic="t", kafka_partition=0, value={"op": "c", "before": None, "after": {"id": 3}, "source": {}}))
    assert schemaless is not None and schemaless.value == {"id": 3, "__op": "c"} and schemaless.value_schema is None
