"""The JDBC sink's pure parts: the connection URL, config combinations, table names, PostgreSQL types, the
SQL statements, the columns of a record per pk.mode, row values, and how a batch is split into runs."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest

from moldau.connect.api import SinkRecord
from moldau.connect.connectors.jdbc_sink.config import JdbcSinkConfig, PkMode, connection_params
from moldau.connect.connectors.jdbc_sink.dialect import Column, Dialect, TableId, sql_type
from moldau.connect.connectors.jdbc_sink.fields import fields_metadata
from moldau.connect.connectors.jdbc_sink.rows import RowConverter
from moldau.connect.connectors.jdbc_sink.writer import _last_per_key, plan_runs
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import ConfigException, ConnectException, DataException
from moldau.connect.plugins import PluginRegistry

URL = "jdbc:postgresql://db.example:5433/shop"


def config(**extra: str) -> JdbcSinkConfig:
    return JdbcSinkConfig.parse({"connection.url": URL, **extra})


# --- config ----------------------------------------------------------------------------------------------

def test_jdbc_and_libpq_urls_become_psycopg2_parameters() -> None:
    assert connection_params(URL + "?user=u&password=p%40ss&currentSchema=sales&loggerLevel=OFF") == {
        "host": "db.example", "port": 5433, "dbname": "shop", "user": "u", "password": "p@ss",
        "options": "-c search_path=sales"}
    assert connection_params("postgresql://me:secret@127.0.0.1/db") == {
        "host": "127.0.0.1", "port": 5432, "dbname": "db", "user": "me", "password": "secret"}
    assert connection_params("jdbc:postgresql:localdb") == {"host": "localhost", "port": 5432, "dbname": "localdb"}
    assert connection_params(URL + "?user=u", user="admin", password="pw")["user"] == "admin"


@pytest.mark.parametrize("url", ["jdbc:mysql://h:3306/db", "jdbc:sqlserver://h;databaseName=x", "mongodb://h",
                                 "jdbc:postgresql://h:notaport/db"])
def test_a_url_that_is_not_postgresql_is_a_config_error_on_connection_url(url: str) -> None:
    with pytest.raises(ConfigException) as caught:
        JdbcSinkConfig.parse({"connection.url": url})
    assert caught.value.name == "connection.url"


@pytest.mark.parametrize(("props", "at_fault"), [
    ({"delete.enabled": "true"}, "delete.enabled"),
    ({"delete.enabled": "true", "pk.mode": "record_value"}, "delete.enabled"),
    ({"insert.mode": "upsert"}, "pk.mode"),
    ({"insert.mode": "update", "pk.mode": "none"}, "pk.mode"),
    ({"pk.mode": "kafka", "pk.fields": "t,p"}, "pk.fields"),
    ({"pk.mode": "primary"}, "pk.mode"),
    ({"insert.mode": "merge"}, "insert.mode"),
    ({"dialect.name": "MySqlDatabaseDialect"}, "dialect.name"),
])
def test_bad_combinations_name_the_config_to_change(props: dict[str, str], at_fault: str) -> None:
    with pytest.raises(ConfigException) as caught:
        config(**props)
    assert caught.value.name == at_fault


def test_defaults_are_confluents() -> None:
    parsed = config()
    assert (parsed.insert_mode.value, parsed.pk_mode, parsed.batch_size, parsed.max_retries,
            parsed.retry_backoff_ms, parsed.table_name_format, parsed.auto_create, parsed.auto_evolve,
            parsed.delete_enabled, parsed.connection_attempts, parsed.connection_backoff_ms) == (
        "insert", PkMode.NONE, 3000, 10, 3000, "${topic}", False, False, False, 3, 10000)
    assert config(**{"pk.mode": "kafka"}).pk_fields == ("__connect_topic", "__connect_partition",
                                                        "__connect_offset")


def test_the_connector_is_registered_by_confluents_class_name_and_short_names() -> None:
    registry = PluginRegistry.discover(entry_points=False)
    info = registry.connector("io.confluent.connect.jdbc.JdbcSinkConnector")
    assert info.type == "sink"
    assert registry.connector("PostgresSink").cls is info.cls is registry.connector("JdbcSink").cls


# --- names and types -------------------------------------------------------------------------------------

def test_table_names_drop_a_database_prefix() -> None:
    assert TableId.parse("orders") == TableId(None, "orders")
    assert TableId.parse("public.orders") == TableId("public", "orders")
    assert TableId.parse("dbserver1.inventory.customers") == TableId("inventory", "customers")
    for bad in ("a..b", "a.b.c.d", ""):
        with pytest.raises(ConnectException):
            TableId.parse(bad)


def named(type_: Type, name: str) -> Schema:
    return SchemaBuilder.of(type_).name(name).build()


@pytest.mark.parametrize(("schema", "expected"), [
    (Schema(Type.INT8), "SMALLINT"), (Schema(Type.INT16), "SMALLINT"), (Schema(Type.INT32), "INT"),
    (Schema(Type.INT64), "BIGINT"), (Schema(Type.FLOAT32), "REAL"), (Schema(Type.FLOAT64), "DOUBLE PRECISION"),
    (Schema(Type.BOOLEAN), "BOOLEAN"), (Schema(Type.STRING), "TEXT"), (Schema(Type.BYTES), "BYTEA"),
    (decimal_schema(2), "DECIMAL"), (named(Type.INT32, "org.apache.kafka.connect.data.Date"), "DATE"),
    (named(Type.INT32, "org.apache.kafka.connect.data.Time"), "TIME"),
    (named(Type.INT64, "org.apache.kafka.connect.data.Timestamp"), "TIMESTAMP"),
    (named(Type.INT64, "io.debezium.time.MicroTimestamp"), "TIMESTAMP"),
    (named(Type.STRING, "io.debezium.time.ZonedTimestamp"), "TIMESTAMPTZ"),
    (named(Type.STRING, "io.debezium.data.Json"), "JSONB"),
    (SchemaBuilder.array(INT32_SCHEMA).build(), "INT[]"),
])
def test_connect_types_map_to_postgresql_types(schema: Schema, expected: str) -> None:
    assert sql_type(schema) == expected


def test_structs_and_maps_have_no_column_type() -> None:
    for schema in (SchemaBuilder.struct().field("a", INT32_SCHEMA).build(),
                   SchemaBuilder.map(STRING_SCHEMA, STRING_SCHEMA).build()):
        with pytest.raises(ConnectException):
            sql_type(schema)


# --- statements ------------------------------------------------------------------------------------------

T = TableId("s", "t")


def test_insert_and_upsert_statements() -> None:
    d = Dialect()
    assert d.insert(T, ["id"], ["a", "b"]) == 'INSERT INTO "s"."t" ("id", "a", "b") VALUES %s'
    assert d.upsert(T, ["id"], ["a", "b"]) == ('INSERT INTO "s"."t" ("id", "a", "b") VALUES %s ON CONFLICT ("id") '
                                               'DO UPDATE SET "a"=EXCLUDED."a", "b"=EXCLUDED."b"')
    assert d.upsert(T, ["a", "b"], []) == 'INSERT INTO "s"."t" ("a", "b") VALUES %s ON CONFLICT ("a", "b") DO NOTHING'
    with pytest.raises(ConnectException, match="requires key field names"):
        d.upsert(T, [], ["a"])


def test_update_and_delete_statements_take_the_key_last() -> None:
    d = Dialect()
    assert d.update(T, ["k1", "k2"], ["a"]) == 'UPDATE "s"."t" SET "a"=%s WHERE "k1"=%s AND "k2"=%s'
    assert d.delete(TableId(None, "t"), ["k"]) == 'DELETE FROM "t" WHERE "k"=%s'


def test_identifiers_are_quoted_and_escaped() -> None:
    d = Dialect()
    assert d.ident('we"ird') == '"we""ird"'
    # In statements with parameters a % must not read as a placeholder.
    assert d.insert(TableId(None, "100%"), ["id"], []) == 'INSERT INTO "100%%" ("id") VALUES %s'
    assert Dialect(quote=False).insert(TableId(None, "t"), ["id"], ["a"]) == "INSERT INTO t (id, a) VALUES %s"


def test_create_table_has_nullability_defaults_and_the_primary_key() -> None:
    columns = [Column("id", INT64_SCHEMA, True), Column("name", OPTIONAL_STRING_SCHEMA),
               Column("level", SchemaBuilder.of(Type.INT32).default_value(3).build()),
               Column("note", SchemaBuilder.of(Type.STRING).optional().default_value("it's").build())]
    assert Dialect().create_table(T, columns) == (
        'CREATE TABLE IF NOT EXISTS "s"."t" (\n  "id" BIGINT NOT NULL,\n  "name" TEXT NULL,\n'
        '  "level" INT DEFAULT 3 NOT NULL,\n  "note" TEXT DEFAULT \'it\'\'s\' NULL,\n  PRIMARY KEY("id"))')
    assert Dialect().add_columns(T, columns[1:2]) == 'ALTER TABLE "s"."t" ADD COLUMN IF NOT EXISTS "name" TEXT NULL'


# --- columns and rows ------------------------------------------------------------------------------------

KEY = SchemaBuilder.struct().name("key").field("id", INT32_SCHEMA).build()
VALUE = (SchemaBuilder.struct().name("value").field("id", INT32_SCHEMA).field("name", OPTIONAL_STRING_SCHEMA)
         .field("city", OPTIONAL_STRING_SCHEMA).build())


def record(key: Any = None, value: Any = None, key_schema: Schema | None = None, offset: int = 0,
           topic: str = "t") -> SinkRecord:
    return SinkRecord(topic=topic, kafka_partition=0, key_schema=key_schema, key=key,
                      value_schema=value.schema if isinstance(value, Struct) else None, value=value,
                      kafka_offset=offset)


def person(id_: int, name: str) -> Struct:
    return Struct(VALUE, {"id": id_, "name": name, "city": "Prague"})


def test_record_key_columns_come_from_the_key_and_are_not_repeated_from_the_value() -> None:
    rec = record(Struct(KEY, {"id": 7}), person(7, "Ada"), KEY)
    fields = fields_metadata(config(**{"pk.mode": "record_key"}), rec, VALUE)
    assert (fields.key_names, fields.value_names) == (["id"], ["name", "city"])
    rows = RowConverter(PkMode.RECORD_KEY)
    assert (rows.key(rec, fields), rows.values(rec, fields)) == ((7,), ("Ada", "Prague"))


def test_a_primitive_key_needs_exactly_one_pk_field() -> None:
    rec = record("k1", person(1, "Ada"), STRING_SCHEMA)
    fields = fields_metadata(config(**{"pk.mode": "record_key", "pk.fields": "code"}), rec, VALUE)
    assert fields.key_names == ["code"] and fields.keys[0].schema == STRING_SCHEMA
    with pytest.raises(ConnectException, match="exactly one PK column"):
        fields_metadata(config(**{"pk.mode": "record_key"}), rec, VALUE)


def test_record_value_kafka_none_modes_and_the_whitelist() -> None:
    rec = record(None, person(1, "Ada"))
    by_value = fields_metadata(config(**{"pk.mode": "record_value", "pk.fields": "id"}), rec, VALUE)
    assert (by_value.key_names, by_value.value_names) == (["id"], ["name", "city"])
    all_keys = fields_metadata(config(**{"pk.mode": "record_value"}), rec, VALUE)
    assert (all_keys.key_names, all_keys.value_names) == (["id", "name", "city"], [])
    kafka = fields_metadata(config(**{"pk.mode": "kafka"}), rec, VALUE)
    assert kafka.key_names == ["__connect_topic", "__connect_partition", "__connect_offset"]
    assert RowConverter(PkMode.KAFKA).key(record(None, person(1, "A"), offset=42), kafka) == ("t", 0, 42)
    listed = fields_metadata(config(**{"fields.whitelist": "name"}), rec, VALUE)
    assert (listed.key_names, listed.value_names) == ([], ["name"])
    with pytest.raises(ConnectException, match="not present"):
        fields_metadata(config(**{"pk.mode": "record_value", "pk.fields": "nope"}), rec, VALUE)


def test_logical_values_become_python_dates_times_and_decimals() -> None:
    rows = RowConverter(PkMode.NONE)
    assert rows.sql_value(named(Type.INT32, "org.apache.kafka.connect.data.Date"), 366) == datetime.date(1971, 1, 2)
    assert rows.sql_value(named(Type.INT32, "org.apache.kafka.connect.data.Time"), 3_723_004) == \
        datetime.time(1, 2, 3, 4000)
    assert rows.sql_value(named(Type.INT64, "org.apache.kafka.connect.data.Timestamp"), 1_500) == \
        datetime.datetime(1970, 1, 1, 0, 0, 1, 500_000)
    assert rows.sql_value(named(Type.INT64, "io.debezium.time.MicroTimestamp"), -1) == \
        datetime.datetime(1969, 12, 31, 23, 59, 59, 999_999)
    assert rows.sql_value(named(Type.INT64, "io.debezium.time.NanoTime"), 1_000_001_000) == \
        datetime.time(0, 0, 1, 1)
    assert rows.sql_value(decimal_schema(2), b"\x30\x39") == decimal.Decimal("123.45")
    assert rows.sql_value(Schema(Type.BYTES), bytearray(b"ab")) == b"ab"
    prague = RowConverter(PkMode.NONE, "Europe/Prague")
    assert prague.sql_value(named(Type.INT64, "org.apache.kafka.connect.data.Timestamp"), 0) == \
        datetime.datetime(1970, 1, 1, 1, 0)
    with pytest.raises(DataException):
        RowConverter(PkMode.NONE, "Mars/Olympus")


# --- runs ------------------------------------------------------------------------------------------------

def test_a_batch_splits_into_runs_per_table_and_operation_in_order() -> None:
    cfg = config(**{"pk.mode": "record_key", "insert.mode": "upsert", "delete.enabled": "true"})

    def key(i: int) -> Struct:
        return Struct(KEY, {"id": i})

    batch = [record(key(1), person(1, "a"), KEY), record(key(2), person(2, "b"), KEY),
             record(key(1), None, KEY), record(key(3), None, KEY), record(key(1), person(1, "a2"), KEY),
             record(key(4), person(4, "x"), KEY, topic="other")]
    runs = plan_runs(cfg, batch, RowConverter(PkMode.RECORD_KEY))
    assert [(r.table.table, r.delete, [k for k, _ in r.rows]) for r in runs] == [
        ("t", False, [(1,), (2,)]), ("t", True, [(1,), (3,)]), ("t", False, [(1,)]), ("other", False, [(4,)])]


def test_a_tombstone_without_delete_enabled_is_an_error() -> None:
    with pytest.raises(ConnectException, match=r"delete\.enabled=false"):
        plan_runs(config(), [record(None, None)], RowConverter(PkMode.NONE))


def test_a_schemaless_value_is_an_error_naming_the_converters_that_give_schemas() -> None:
    with pytest.raises(DataException, match=r"schemas\.enable=true"):
        plan_runs(config(), [record(None, {"id": 1})], RowConverter(PkMode.NONE))


def test_upserts_keep_the_last_row_of_each_key() -> None:
    rows = [((1,), ("a",)), ((2,), ("b",)), ((1,), ("a2",)), ((3,), ("c",))]
    assert list(_last_per_key(rows)) == [(2, "b"), (1, "a2"), (3, "c")]
