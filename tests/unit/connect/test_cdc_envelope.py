"""Debezium's event shapes as the PostgreSQL CDC source builds them: schemas, type mapping, the envelope of each
operation, TOAST placeholders, offsets and the skip rule after a restart."""

from __future__ import annotations

import decimal
import json

from moldau.connect.connectors.postgres_cdc import pgoutput
from moldau.connect.connectors.postgres_cdc.config import ColumnFilter, MessageKeyColumns, TableFilter, validate
from moldau.connect.connectors.postgres_cdc.envelope import ColumnInfo, SourceInfo, TableSchema
from moldau.connect.connectors.postgres_cdc.events import ChangeContext, change_records, read_record, truncate_record
from moldau.connect.connectors.postgres_cdc.offsets import ResumePoint, format_lsn, parse_lsn, snapshot_completed
from moldau.connect.connectors.postgres_cdc.pgoutput import UNCHANGED_TOAST
from moldau.connect.converters.json import JsonConverter
from moldau.connect.data import Struct, Type

NUMERIC_10_2 = (10 << 16 | 2) + 4
COLUMNS = [ColumnInfo("id", 23, -1, False), ColumnInfo("name", 25, -1, True),
           ColumnInfo("price", 1700, NUMERIC_10_2, True), ColumnInfo("at", 1114, -1, True),
           ColumnInfo("body", 25, -1, False)]
RELATION = pgoutput.Relation(1, "public", "items", "d", tuple(
    pgoutput.Column(c.name, c.type_oid, c.type_modifier, c.name == "id") for c in COLUMNS))
SOURCE = SourceInfo("srv", "shop", 1_700_000_000_000, "false", 42, 1000, (900, 1000))
CTX = ChangeContext({"server": "srv"}, {"lsn": 1000, "lsn_commit": 1100, "txId": 42, "ts_usec": 1}, SOURCE, 5)


def table() -> TableSchema:
    return TableSchema("srv", "public", "items", COLUMNS, ["id"])


def test_schema_names_and_types() -> None:
    items = table()
    assert items.topic == "srv.public.items"
    assert items.key_schema is not None and items.key_schema.name == "srv.public.items.Key"
    assert items.key_schema.field_names() == ["id"]
    assert items.value_schema.name == "srv.public.items.Value" and items.value_schema.optional
    assert items.envelope_schema.name == "srv.public.items.Envelope"
    assert items.envelope_schema.field_names() == ["before", "after", "source", "op", "ts_ms", "transaction"]
    price = items.types["price"].schema
    assert price.name == "org.apache.kafka.connect.data.Decimal" and price.parameters is not None
    assert price.parameters["scale"] == "2"
    assert items.types["at"].schema.name == "io.debezium.time.MicroTimestamp"
    assert items.types["at"].schema.type is Type.INT64
    assert not items.types["body"].schema.optional and items.types["name"].schema.optional


def test_a_table_without_primary_key_has_no_key() -> None:
    no_key = TableSchema("srv", "public", "log", COLUMNS, [])
    assert no_key.key_schema is None and no_key.key(no_key.parse(("1", None, None, None, "b"))) is None


def test_insert_envelope_through_the_json_converter() -> None:
    [record] = change_records(table(), RELATION, pgoutput.Insert(1, ("7", "pen", "3.50", "2024-01-02 03:04:05.5",
                                                                     "b")), CTX)
    assert record.topic == "srv.public.items" and record.source_offset == CTX.offset
    converter = JsonConverter()
    converter.configure({"schemas.enable": False}, False)
    value = json.loads(converter.from_connect_data(record.topic, record.value_schema, record.value) or b"")
    assert value["op"] == "c" and value["before"] is None and value["ts_ms"] == 5
    assert value["after"] == {"id": 7, "name": "pen", "price": "AV4=", "at": 1704164645500000, "body": "b"}
    assert value["source"] == {"version": value["source"]["version"], "connector": "postgresql", "name": "srv",
                               "ts_ms": 1_700_000_000_000, "snapshot": "false", "db": "shop",
                               "sequence": '["900","1000"]', "schema": "public", "table": "items", "txId": 42,
                               "lsn": 1000, "xmin": None}
    assert record.key == Struct(table().key_schema, {"id": 7})  # type: ignore[arg-type]
    assert record.value.get("after").get("price") == decimal.Decimal("3.50")


def test_update_with_unchanged_toast_gets_the_placeholder_or_the_old_value() -> None:
    [plain] = change_records(table(), RELATION, pgoutput.Update(1, None, ("7", "x", None, None, UNCHANGED_TOAST),
                                                                False), CTX)
    assert plain.value.get("op") == "u" and plain.value.get("before") is None
    assert plain.value.get("after").get("body") == "__debezium_unavailable_value"
    full_old = ("7", "w", None, None, "long body")
    [full] = change_records(table(), RELATION, pgoutput.Update(1, full_old, ("7", "x", None, None, UNCHANGED_TOAST),
                                                               False), CTX)
    assert full.value.get("after").get("body") == "long body"
    assert full.value.get("before").get("name") == "w"


def test_delete_writes_the_old_key_then_a_tombstone() -> None:
    delete, tombstone = change_records(table(), RELATION, pgoutput.Delete(1, ("7", None, None, None, None), True),
                                       CTX)
    assert delete.value.get("op") == "d" and delete.value.get("after") is None
    before = delete.value.get("before")
    assert before.get("id") == 7 and before.get("name") is None and before.get("body") == ""
    assert tombstone.value is None and tombstone.value_schema is None and tombstone.key == delete.key


def test_a_primary_key_change_is_a_delete_tombstone_and_create() -> None:
    records = change_records(table(), RELATION, pgoutput.Update(1, ("7", None, None, None, None),
                                                                ("8", "n", None, None, "b"), True), CTX)
    assert [r.value.get("op") if r.value else None for r in records] == ["d", None, "c"]
    assert [r.key.get("id") for r in records] == [7, 7, 8]


def test_skipped_operations_and_truncate() -> None:
    quiet = ChangeContext(CTX.partition, CTX.offset, SOURCE, 5, frozenset({"c", "u"}))
    assert change_records(table(), RELATION, pgoutput.Insert(1, ("1", None, None, None, "b")), quiet) == []
    truncate = truncate_record(table(), CTX)
    assert truncate.key is None and truncate.value.get("op") == "t" and truncate.value.get("after") is None


def test_snapshot_read_record() -> None:
    snapshot = SourceInfo("srv", "shop", 1, "last", 3, 500)
    record = read_record(table(), ("1", None, None, None, "b"),
                         ChangeContext({"server": "srv"}, {"lsn": 500, "snapshot": True}, snapshot, 2))
    assert record.value.get("op") == "r" and record.value.get("source").get("snapshot") == "last"
    assert record.value.get("source").get("sequence") is None


def test_type_mapping_of_text_values() -> None:
    kinds = TableSchema("p", "s", "t", [
        ColumnInfo("b", 16, -1, True), ColumnInfo("i8", 20, -1, True), ColumnInfo("f", 701, -1, True),
        ColumnInfo("by", 17, -1, True), ColumnInfo("d", 1082, -1, True), ColumnInfo("tz", 1184, -1, True),
        ColumnInfo("n", 1700, -1, True), ColumnInfo("tm", 1083, -1, True)], [])
    row = kinds.parse(("t", "-9000000000", "1.5", "\\x00ff", "1970-01-11", "2024-01-01 10:00:00+02", "-12.345",
                       "01:00:00.25"))
    assert row.get("b") is True and row.get("i8") == -9_000_000_000 and row.get("f") == 1.5
    assert row.get("by") == b"\x00\xff" and row.get("d") == 10 and row.get("tz") == "2024-01-01T08:00:00Z"
    variable = row["n"]
    assert variable.get("scale") == 3 and int.from_bytes(variable.get("value"), "big", signed=True) == -12345
    assert row.get("tm") == 3_600_250_000
    as_string = TableSchema("p", "s", "t", [ColumnInfo("n", 1700, NUMERIC_10_2, True)], [], "string")
    assert as_string.parse(("1.20",))["n"] == "1.20"


def test_resume_point_skips_only_what_was_written() -> None:
    streaming = ResumePoint.from_offset({"lsn": 150, "lsn_commit": 200, "txId": 1, "ts_usec": 0})
    assert streaming.skips_transaction(199) and not streaming.skips_transaction(200)
    assert streaming.skips_event(200, 150) and not streaming.skips_event(200, 151)
    assert not streaming.skips_event(300, 10)
    snapshot = ResumePoint.from_offset({"lsn": 500, "snapshot": True, "last_snapshot_record": True})
    assert snapshot.skips_transaction(499) and not snapshot.skips_event(500, 1)
    assert not ResumePoint.from_offset(None).skips_event(0, 0)
    assert snapshot_completed({"lsn": 1, "snapshot": True, "last_snapshot_record": True})
    assert not snapshot_completed({"lsn": 1, "snapshot": True, "last_snapshot_record": False})
    assert not snapshot_completed(None) and snapshot_completed({"lsn": 1, "lsn_commit": 1})
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"


def test_config_validation_and_table_filter() -> None:
    errors = {v.name: v.errors for v in validate({"database.hostname": "h", "database.user": "u",
                                                   "database.dbname": "d", "topic.prefix": "p",
                                                   "plugin.name": "wal2json", "tasks.max": "3"}) if v.errors}
    assert set(errors) == {"plugin.name", "tasks.max"}
    assert "database.hostname" in {v.name for v in validate({}) if v.errors}
    include = TableFilter.of(include=[r"public\.a.*"])
    assert include.accepts("public", "abc") and not include.accepts("public", "b")
    assert not include.accepts("other", "abc")  # anchored: the whole schema.table must match
    exclude = TableFilter.of(exclude=[r"public\.b"])
    assert exclude.accepts("public", "a") and not exclude.accepts("public", "b")


BASE = {"database.hostname": "h", "database.user": "u", "database.dbname": "d", "topic.prefix": "p"}


def failing(props: dict[str, str]) -> dict[str, list[str]]:
    return {v.name: v.errors for v in validate({**BASE, **props}) if v.errors}


def test_include_and_exclude_lists_of_one_kind_are_mutually_exclusive() -> None:
    for kind in ("table", "schema", "column"):
        errors = failing({f"{kind}.include.list": "a", f"{kind}.exclude.list": "b"})
        assert set(errors) == {f"{kind}.exclude.list"} and "mutually exclusive" in errors[f"{kind}.exclude.list"][0]
    assert failing({"schema.include.list": "inventory", "table.include.list": r"inventory\.a",
                    "column.exclude.list": r"inventory\.a\.secret"}) == {}
    assert set(failing({"column.exclude.list": "a(b"})) == {"column.exclude.list"}


def test_schema_lists_combine_with_table_lists_and_every_list_ignores_case() -> None:
    schemas = TableFilter.of(schema_include=["inventory"])
    assert schemas.accepts("inventory", "a") and schemas.accepts("INVENTORY", "b")
    assert not schemas.accepts("inventory2", "a")  # the whole schema name must match
    both = TableFilter.of(include=[r".*\.orders"], schema_exclude=["archive"])
    assert both.accepts("public", "orders") and not both.accepts("archive", "orders")
    assert not both.accepts("public", "customers")
    assert TableFilter.of(include=[r"Public\.Orders"]).accepts("public", "orders")


def test_column_lists_select_by_schema_table_column() -> None:
    excluded = ColumnFilter.of(exclude=[r"public\.users\.(ssn|password)"])
    assert not excluded.accepts("public", "users", "ssn") and not excluded.accepts("public", "users", "Password")
    assert excluded.accepts("public", "users", "name") and excluded.accepts("other", "users", "ssn")
    included = ColumnFilter.of(include=[r"public\.users\.(id|name)"])
    assert included.accepts("public", "users", "id") and not included.accepts("public", "users", "ssn")


def test_message_key_columns_are_parsed_as_debezium_does() -> None:
    keys = MessageKeyColumns.parse(r"public.orders:customer,number; (.*)\.events:tenant")
    columns = ["number", "tenant", "customer", "id"]
    assert keys.for_table("public", "orders", columns) == ["customer", "number"]  # in the order named
    assert keys.for_table("audit", "events", columns) == ["tenant"]
    assert keys.for_table("public", "customers", columns) is None  # not named: the primary key stays the key
    assert MessageKeyColumns.parse(None).for_table("public", "orders", columns) is None
    for bad in ("public.orders", "public.orders:", "public.orders:a b", "a:b;;c:d"):
        assert set(failing({"message.key.columns": bad})) == {"message.key.columns"}, bad
    assert failing({"message.key.columns": "public.orders:a,b;public.lines:c;"}) == {}


def test_values_keep_the_selected_columns_and_keys_their_own() -> None:
    items = TableSchema("srv", "public", "items", COLUMNS, ["id"], value_columns=["name", "price"],
                        key_columns=["name", "body"])
    assert items.value_schema.field_names() == ["name", "price"]
    assert items.key_schema is not None and items.key_schema.field_names() == ["name", "body"]
    [record] = change_records(items, RELATION, pgoutput.Insert(1, ("7", "pen", "3.50", None, "b")), CTX)
    assert record.key == Struct(items.key_schema, {"name": "pen", "body": "b"})
    after = record.value.get("after")
    assert after.schema.field_names() == ["name", "price"] and after.get("price") == decimal.Decimal("3.50")
    delete, tombstone = change_records(items, RELATION, pgoutput.Delete(1, ("7", "pen", "3.50", None, "b"), False),
                                       CTX)
    assert delete.value.get("before").schema.field_names() == ["name", "price"] and tombstone.value is None
    assert delete.key == tombstone.key == record.key
    pk_only = TableSchema("srv", "public", "items", COLUMNS, ["id"], value_columns=["name"])
    assert pk_only.key_schema is not None and pk_only.key_schema.field_names() == ["id"]
    assert pk_only.value_schema.field_names() == ["name"]
