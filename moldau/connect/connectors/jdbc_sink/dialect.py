"""PostgreSQL's side of the sink: table names, quoted identifiers, the column type of each Connect schema, and
the text of every statement the sink runs. Pure: no I/O.

DML statements use psycopg2's `%s` placeholders (a `%` in an identifier is doubled for them); DDL statements
run without parameters. INSERT statements end in `VALUES %s`, for `psycopg2.extras.execute_values`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from moldau.connect.data import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Type
from moldau.connect.errors import ConnectException

__all__ = [
    "Column", "Dialect", "TableId", "sql_type",
]

# Debezium's temporal and semantic types, by schema name, with the PostgreSQL column type they become.
DEBEZIUM_TYPES = {
    "io.debezium.time.Date": "DATE",
    "io.debezium.time.Time": "TIME", "io.debezium.time.MicroTime": "TIME", "io.debezium.time.NanoTime": "TIME",
    "io.debezium.time.Timestamp": "TIMESTAMP", "io.debezium.time.MicroTimestamp": "TIMESTAMP",
    "io.debezium.time.NanoTimestamp": "TIMESTAMP",
    "io.debezium.time.ZonedTimestamp": "TIMESTAMPTZ", "io.debezium.time.ZonedTime": "TIMETZ",
    "io.debezium.data.Json": "JSONB", "io.debezium.data.Uuid": "UUID", "io.debezium.data.Xml": "XML",
}
KAFKA_LOGICAL_TYPES = {DECIMAL_NAME: "DECIMAL", DATE_NAME: "DATE", TIME_NAME: "TIME", TIMESTAMP_NAME: "TIMESTAMP"}
PRIMITIVE_TYPES = {
    Type.INT8: "SMALLINT", Type.INT16: "SMALLINT", Type.INT32: "INT", Type.INT64: "BIGINT",
    Type.FLOAT32: "REAL", Type.FLOAT64: "DOUBLE PRECISION", Type.BOOLEAN: "BOOLEAN", Type.STRING: "TEXT",
    Type.BYTES: "BYTEA",
}


def sql_type(schema: Schema) -> str:
    """The PostgreSQL column type for values of `schema`; ConnectException when there is none."""
    if schema.name in KAFKA_LOGICAL_TYPES:
        return KAFKA_LOGICAL_TYPES[schema.name]
    if schema.name in DEBEZIUM_TYPES:
        return DEBEZIUM_TYPES[schema.name]
    if schema.type in PRIMITIVE_TYPES:
        return PRIMITIVE_TYPES[schema.type]
    if schema.type is Type.ARRAY and schema.value_schema is not None and schema.value_schema.type.is_primitive:
        return sql_type(schema.value_schema) + "[]"
    raise ConnectException(f"{schema.name or schema.type.value} ({schema.type.value}) has no PostgreSQL "
                           "column type: the sink writes primitive fields, arrays of them, and logical types")


@dataclass(frozen=True)
class TableId:
    """A table, optionally in a schema (`schema.table`); a database prefix (`db.schema.table`) is dropped:
    the connection already names the database."""

    schema: str | None
    table: str

    @classmethod
    def parse(cls, name: str) -> TableId:
        parts = name.split(".")
        if any(not part for part in parts) or len(parts) > 3:
            raise ConnectException(f"{name!r} is not a table name (table, schema.table or database.schema.table)")
        return cls(None, parts[0]) if len(parts) == 1 else cls(parts[-2], parts[-1])

    def __str__(self) -> str:
        return self.table if self.schema is None else f"{self.schema}.{self.table}"


@dataclass(frozen=True)
class Column:
    """A column to write: its name, the Connect schema of its values, and whether it is in the primary key."""

    name: str
    schema: Schema
    is_key: bool = False


class Dialect:
    """Statements for PostgreSQL; `quote` False writes identifiers unquoted (quote.sql.identifiers=never)."""

    def __init__(self, quote: bool = True) -> None:
        self.quote_identifiers = quote

    def ident(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"' if self.quote_identifiers else name

    def table(self, table: TableId) -> str:
        return self.ident(table.table) if table.schema is None else \
            f"{self.ident(table.schema)}.{self.ident(table.table)}"

    def _dml(self, name: str) -> str:
        return self.ident(name).replace("%", "%%")

    def _dml_table(self, table: TableId) -> str:
        return self.table(table).replace("%", "%%")

    # --- DDL -------------------------------------------------------------------------------------------

    def column_definition(self, column: Column) -> str:
        text = f"{self.ident(column.name)} {sql_type(column.schema)}"
        # Logical types' defaults are physical values (days, ms) that would not fit their column's type.
        default = literal(column.schema.default) if column.schema.name is None else None
        if default is not None:
            text += f" DEFAULT {default}"
        return text + (" NULL" if column.schema.optional and not column.is_key else " NOT NULL")

    def create_table(self, table: TableId, columns: Sequence[Column]) -> str:
        definitions = [self.column_definition(c) for c in columns]
        keys = [self.ident(c.name) for c in columns if c.is_key]
        if keys:
            definitions.append(f"PRIMARY KEY({', '.join(keys)})")
        return f"CREATE TABLE IF NOT EXISTS {self.table(table)} (\n  " + ",\n  ".join(definitions) + ")"

    def add_columns(self, table: TableId, columns: Sequence[Column]) -> str:
        additions = [f"ADD COLUMN IF NOT EXISTS {self.column_definition(c)}" for c in columns]
        return f"ALTER TABLE {self.table(table)} " + ", ".join(additions)

    # --- DML -------------------------------------------------------------------------------------------

    def insert(self, table: TableId, keys: Sequence[str], values: Sequence[str]) -> str:
        names = ", ".join(self._dml(n) for n in (*keys, *values))
        return f"INSERT INTO {self._dml_table(table)} ({names}) VALUES %s"

    def upsert(self, table: TableId, keys: Sequence[str], values: Sequence[str]) -> str:
        """INSERT ... ON CONFLICT on the key columns: update the other columns, or do nothing when every
        column is a key column."""
        if not keys:
            raise ConnectException(f"Write to table '{table}' in UPSERT mode requires key field names to be "
                                   "known, check the primary key configuration")
        conflict = ", ".join(self._dml(k) for k in keys)
        if not values:
            return f"{self.insert(table, keys, values)} ON CONFLICT ({conflict}) DO NOTHING"
        updates = ", ".join(f"{self._dml(v)}=EXCLUDED.{self._dml(v)}" for v in values)
        return f"{self.insert(table, keys, values)} ON CONFLICT ({conflict}) DO UPDATE SET {updates}"

    def update(self, table: TableId, keys: Sequence[str], values: Sequence[str]) -> str:
        """UPDATE of the non-key columns of the row with the key; parameters: the values, then the key."""
        if not keys:
            raise ConnectException(f"Write to table '{table}' in UPDATE mode requires key field names to be "
                                   "known, check the primary key configuration")
        sets = ", ".join(f"{self._dml(v)}=%s" for v in values)
        return f"UPDATE {self._dml_table(table)} SET {sets} WHERE {self._key_condition(keys)}"

    def delete(self, table: TableId, keys: Sequence[str]) -> str:
        if not keys:
            raise ConnectException(f"Delete from table '{table}' requires key field names to be known")
        return f"DELETE FROM {self._dml_table(table)} WHERE {self._key_condition(keys)}"

    def _key_condition(self, keys: Sequence[str]) -> str:
        return " AND ".join(f"{self._dml(k)}=%s" for k in keys)


def literal(value: Any) -> str | None:
    """`value` as an SQL literal for a DEFAULT clause, or None when it has no simple literal form."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return None
