"""Debezium's change event shapes, built from a table's description. Pure: times come in as arguments.

A change to table `s.t` goes to topic `<prefix>.s.t` with key `<prefix>.s.t.Key` (the primary key columns, or
those `message.key.columns` names; null for a table without either) and value `<prefix>.s.t.Envelope`: `before`,
`after` (both `<prefix>.s.t.Value`: the columns the column lists keep), `source`
(`io.debezium.connector.postgresql.Source`), `op`, `ts_ms` and `transaction` (null unless
`provide.transaction.metadata` is on: then the transaction's id and the event's place in it).

A row is first parsed into all its columns (`TableSchema.parse`), from which the key and the value are built: the
key may hold columns the value leaves out, as Debezium's does.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from moldau.connect.data import DECIMAL_NAME, Schema, SchemaBuilder, Struct, Type

from .pgoutput import UNCHANGED_TOAST, TupleValue
from .types import ColumnType, column_type

__all__ = ["DEBEZIUM_VERSION", "TRANSACTION_SCHEMA", "ColumnInfo", "SourceInfo", "TableSchema",
           "heartbeat_key_schema", "heartbeat_value_schema", "source_schema", "transaction_key_schema",
           "transaction_table_schema", "transaction_value_schema"]

DEBEZIUM_VERSION = "2.5.4.Final"  # the Debezium release whose event shapes these are (no ts_us/ts_ns yet)
CONNECTOR = "postgresql"
SOURCE_SCHEMA_NAME = "io.debezium.connector.postgresql.Source"


def _optional(type_: Type, name: str | None = None) -> Schema:
    builder = SchemaBuilder.of(type_).optional()
    if name:
        builder.name(name).version(1)
    return builder.build()


def _required(type_: Type) -> Schema:
    return SchemaBuilder.of(type_).build()


def source_schema() -> Schema:
    snapshot = (SchemaBuilder.of(Type.STRING).name("io.debezium.data.Enum").version(1)
                .parameter("allowed", "true,last,false,incremental").default_value("false").optional().build())
    return (SchemaBuilder.struct().name(SOURCE_SCHEMA_NAME)
            .field("version", _required(Type.STRING)).field("connector", _required(Type.STRING))
            .field("name", _required(Type.STRING)).field("ts_ms", _required(Type.INT64))
            .field("snapshot", snapshot).field("db", _required(Type.STRING))
            .field("sequence", _optional(Type.STRING)).field("schema", _required(Type.STRING))
            .field("table", _required(Type.STRING)).field("txId", _optional(Type.INT64))
            .field("lsn", _optional(Type.INT64)).field("xmin", _optional(Type.INT64)).build())


SOURCE_SCHEMA = source_schema()


def transaction_schema() -> Schema:
    """The envelope's optional `transaction` block (filled only with `provide.transaction.metadata`)."""
    return (SchemaBuilder.struct().name("event.block").version(1).optional()
            .field("id", _required(Type.STRING)).field("total_order", _required(Type.INT64))
            .field("data_collection_order", _required(Type.INT64)).build())


TRANSACTION_SCHEMA = transaction_schema()


def transaction_key_schema() -> Schema:
    """The key of a record in the transaction topic."""
    return (SchemaBuilder.struct().name("io.debezium.connector.common.TransactionMetadataKey").version(1)
            .field("id", _required(Type.STRING)).build())


def transaction_table_schema() -> Schema:
    """One table's count of events in an END record."""
    return (SchemaBuilder.struct().name("event.collection").version(1).optional()
            .field("data_collection", _required(Type.STRING)).field("event_count", _required(Type.INT64)).build())


def transaction_value_schema() -> Schema:
    """The value of a BEGIN or END record in the transaction topic; `event_count` and `data_collections` (events
    per table) are null in a BEGIN."""
    per_table = transaction_table_schema()
    return (SchemaBuilder.struct().name("io.debezium.connector.common.TransactionMetadataValue").version(1)
            .field("status", _required(Type.STRING)).field("id", _required(Type.STRING))
            .field("event_count", _optional(Type.INT64))
            .field("data_collections", SchemaBuilder.array(per_table).optional().build())
            .field("ts_ms", _required(Type.INT64)).build())


def heartbeat_key_schema() -> Schema:
    return SchemaBuilder.struct().name("io.debezium.connector.common.ServerNameKey") \
        .field("serverName", _required(Type.STRING)).build()


def heartbeat_value_schema() -> Schema:
    return SchemaBuilder.struct().name("io.debezium.connector.common.Heartbeat") \
        .field("ts_ms", _required(Type.INT64)).build()


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type_oid: int
    type_modifier: int
    optional: bool  # the column is nullable


@dataclass(frozen=True)
class SourceInfo:
    """Where an event comes from: the `source` block minus the table."""

    server: str
    db: str
    ts_ms: int  # commit time (streaming) or snapshot time
    snapshot: str  # "true", "last" or "false"
    tx_id: int | None
    lsn: int | None
    sequence: tuple[int | None, int | None] | None = None  # (last commit LSN, this event's LSN)


Row = dict[str, Any]  # every column of a row, parsed


class TableSchema:
    """A table's key, value and envelope schemas, and the structs of its rows.

    `value_columns` are the names the value keeps (all when None); `key_columns` those of the key (the primary
    key when None)."""

    def __init__(self, prefix: str, namespace: str, table: str, columns: Sequence[ColumnInfo],
                 primary_key: Sequence[str], decimal_mode: str = "precise", *,
                 value_columns: Sequence[str] | None = None, key_columns: Sequence[str] | None = None) -> None:
        self.namespace = namespace
        self.table = table
        self.topic = f"{prefix}.{namespace}.{table}"
        self.columns = tuple(columns)
        self.types: dict[str, ColumnType] = {
            c.name: column_type(c.type_oid, c.type_modifier, c.optional and c.name not in primary_key, decimal_mode)
            for c in columns}
        self.primary_key = tuple(name for name in primary_key if name in self.types)
        keys = self.primary_key if key_columns is None else key_columns
        self.key_columns = tuple(name for name in keys if name in self.types)
        kept = None if value_columns is None else set(value_columns)
        self.value_columns = tuple(c.name for c in self.columns if kept is None or c.name in kept)
        # What a snapshot selects: only what the key or the value holds, as a column left out may not be readable.
        self.read_columns = tuple(c.name for c in self.columns
                                  if c.name in self.key_columns or c.name in self.value_columns)
        value = SchemaBuilder.struct().name(f"{self.topic}.Value").optional()
        for name in self.value_columns:
            value.field(name, self.types[name].schema)
        self.value_schema = value.build()
        self.key_schema: Schema | None = None
        if self.key_columns:
            key = SchemaBuilder.struct().name(f"{self.topic}.Key")
            for name in self.key_columns:
                key.field(name, self.types[name].schema)
            self.key_schema = key.build()
        self.envelope_schema = (SchemaBuilder.struct().name(f"{self.topic}.Envelope").version(1)
                                .field("before", self.value_schema).field("after", self.value_schema)
                                .field("source", SOURCE_SCHEMA).field("op", _required(Type.STRING))
                                .field("ts_ms", _optional(Type.INT64))
                                .field("transaction", TRANSACTION_SCHEMA).build())

    def parse(self, values: Sequence[TupleValue], present: Sequence[bool] | None = None) -> Row:
        """Every column's value from text values in column order. Columns not `present` (absent from an old key
        tuple) are null, or their type's zero value when the column is NOT NULL."""
        fields: Row = {}
        for index, column in enumerate(self.columns):
            kind = self.types[column.name]
            text = values[index] if index < len(values) else None
            if present is not None and not present[index]:
                fields[column.name] = None if kind.schema.optional else _zero(kind.schema)
            elif text is UNCHANGED_TOAST:
                fields[column.name] = kind.placeholder()
            elif text is None:
                fields[column.name] = None if kind.schema.optional else _zero(kind.schema)
            else:
                assert isinstance(text, str)
                fields[column.name] = kind.parse(text)
        return fields

    def value(self, row: Row | None) -> Struct | None:
        if row is None:
            return None
        return Struct(self.value_schema, {name: row[name] for name in self.value_columns})

    def key(self, row: Row | None) -> Struct | None:
        if self.key_schema is None or row is None:
            return None
        return Struct(self.key_schema, {name: row.get(name) for name in self.key_columns})

    def source(self, info: SourceInfo) -> Struct:
        sequence = None
        if info.sequence is not None:
            sequence = json.dumps([None if lsn is None else str(lsn) for lsn in info.sequence], separators=(",", ":"))
        return Struct(SOURCE_SCHEMA, {
            "version": DEBEZIUM_VERSION, "connector": CONNECTOR, "name": info.server, "ts_ms": info.ts_ms,
            "snapshot": info.snapshot, "db": info.db, "sequence": sequence, "schema": self.namespace,
            "table": self.table, "txId": info.tx_id, "lsn": info.lsn, "xmin": None})

    def envelope(self, op: str, before: Row | None, after: Row | None, info: SourceInfo, ts_ms: int) -> Struct:
        return Struct(self.envelope_schema, {"before": self.value(before), "after": self.value(after),
                                             "source": self.source(info), "op": op, "ts_ms": ts_ms})


def _zero(schema: Schema) -> Any:
    zeros: Mapping[Type, Any] = {Type.BOOLEAN: False, Type.INT8: 0, Type.INT16: 0, Type.INT32: 0, Type.INT64: 0,
                                 Type.FLOAT32: 0.0, Type.FLOAT64: 0.0, Type.STRING: "", Type.BYTES: b""}
    if schema.type is Type.STRUCT:
        return Struct(schema, {f.name: _zero(f.schema) for f in schema.fields})
    if schema.name == DECIMAL_NAME:
        return decimal.Decimal(0)
    return zeros[schema.type]
