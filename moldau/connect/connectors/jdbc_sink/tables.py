"""The destination tables: which columns they have (read from `information_schema`), creating a missing one
(`auto.create`) and adding missing columns (`auto.evolve`), as Confluent's sink does. DDL commits on its own,
before the batch's transaction, and uses IF NOT EXISTS so tasks racing to create a table all succeed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import psycopg2.errors

from moldau.connect.connectors.jdbc_sink.dialect import Column, Dialect, TableId
from moldau.connect.connectors.jdbc_sink.fields import FieldsMetadata
from moldau.connect.errors import ConnectException

__all__ = ["TableManager"]

log = logging.getLogger(__name__)

RACED_DDL = (psycopg2.errors.UniqueViolation, psycopg2.errors.DuplicateTable, psycopg2.errors.DuplicateColumn)

COLUMNS_QUERY = ("SELECT column_name FROM information_schema.columns "
                 "WHERE table_schema = COALESCE(%s, current_schema()) AND table_name = %s")


class TableManager:
    """Knows the columns of the tables written so far; `ensure` makes a table fit a record's columns."""

    def __init__(self, dialect: Dialect, auto_create: bool, auto_evolve: bool) -> None:
        self.dialect = dialect
        # PostgreSQL folds unquoted names to lower case, so with quote.sql.identifiers=never that is how the
        # catalog spells them.
        self.fold: Callable[[str], str] = (lambda name: name) if dialect.quote_identifiers else str.lower
        self.auto_create = auto_create
        self.auto_evolve = auto_evolve
        self.known: dict[TableId, set[str]] = {}

    def forget(self) -> None:
        """Read the tables again next time (after a reconnect: they may have changed meanwhile)."""
        self.known.clear()

    def ensure(self, connection: Any, table: TableId, fields: FieldsMetadata) -> None:
        columns = self.known.get(table)
        if columns is None or any(self.fold(c.name) not in columns for c in fields.columns):
            columns = self._describe(connection, table)
        if not columns:
            columns = self._create(connection, table, fields)
        missing = [c for c in fields.columns if self.fold(c.name) not in columns]
        if missing:
            columns = self._evolve(connection, table, missing)
        self.known[table] = columns

    def _describe(self, connection: Any, table: TableId) -> set[str]:
        with connection.cursor() as cursor:
            schema = None if table.schema is None else self.fold(table.schema)
            cursor.execute(COLUMNS_QUERY, (schema, self.fold(table.table)))
            found = {str(row[0]) for row in cursor.fetchall()}
        connection.commit()
        return found

    def _create(self, connection: Any, table: TableId, fields: FieldsMetadata) -> set[str]:
        if not self.auto_create:
            raise ConnectException(f"Table {self.dialect.table(table)} is missing and auto-creation is disabled")
        self._run(connection, self.dialect.create_table(table, fields.columns))
        return self._describe(connection, table)

    def _evolve(self, connection: Any, table: TableId, missing: list[Column]) -> set[str]:
        names = ", ".join(c.name for c in missing)
        if not self.auto_evolve:
            raise ConnectException(f"Table {self.dialect.table(table)} is missing fields ({names}) and "
                                   "auto-evolution is disabled")
        for column in missing:
            if column.is_key:
                raise ConnectException(f"Cannot ALTER TABLE {self.dialect.table(table)} to add missing primary "
                                       f"key field {column.name}: the primary key of a table is not changed")
            if not column.schema.optional and column.schema.default is None:
                raise ConnectException(f"Cannot ALTER TABLE {self.dialect.table(table)} to add missing field "
                                       f"{column.name}, as the field is not optional and does not have a default "
                                       "value")
        self._run(connection, self.dialect.add_columns(table, missing))
        return self._describe(connection, table)

    def _run(self, connection: Any, statement: str) -> None:
        log.info("JDBC sink: %s", statement)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
            connection.commit()
        except RACED_DDL as exc:
            # Another task created the table or column between IF NOT EXISTS and its own catalog entry.
            connection.rollback()
            log.info("JDBC sink: another writer ran the same DDL first: %s", exc)
        except Exception:
            connection.rollback()
            raise
