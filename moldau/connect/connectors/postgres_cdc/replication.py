"""Everything that talks to PostgreSQL for the stream: the publication and slot (created when missing), the
catalog lookups that describe a table, and the logical replication stream read through psycopg2.

psycopg2 is the driver because its `LogicalReplicationConnection` speaks the streaming replication protocol
(START_REPLICATION, keepalives, standby status feedback with an explicit flush LSN); psycopg 3 has no
replication API.
"""

from __future__ import annotations

import contextlib
import select
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras
from psycopg2 import sql

from moldau.connect.errors import ConnectException

from .config import PostgresCdcConfig, TableFilter
from .envelope import ColumnInfo, TableSchema
from .offsets import parse_lsn

__all__ = ["CreatedSlot", "ReplicationStream", "StreamMessage", "captured_tables", "describe_table",
           "ensure_publication", "open_sql", "slot_exists"]

SYSTEM_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast")


def open_sql(config: PostgresCdcConfig) -> Any:
    """An ordinary connection, autocommit, for catalog queries and publication management."""
    conn = psycopg2.connect(**config.dsn())
    conn.autocommit = True
    return conn


def captured_tables(conn: Any, tables: TableFilter) -> list[tuple[str, str]]:
    """(schema, table) of every ordinary or partitioned table the filter selects."""
    with conn.cursor() as cur:
        cur.execute("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT IN %s "
                    "AND n.nspname NOT LIKE 'pg_temp%%' ORDER BY 1, 2", (SYSTEM_SCHEMAS,))
        return [(schema, table) for schema, table in cur.fetchall() if tables.accepts(schema, table)]


def describe_table(conn: Any, config: PostgresCdcConfig, namespace: str, table: str,
                   columns: Sequence[tuple[str, int, int]] | None = None) -> TableSchema:
    """The table's schema: its columns (as the catalog has them, or as a Relation message listed them) with
    their nullability, and its primary key; the value keeps the columns the column lists select, the key is
    the primary key unless `message.key.columns` names other columns. A table dropped since the change was made
    (the catalog is today's) still gets a schema, from the message's columns, all nullable and without a
    primary key."""
    with conn.cursor() as cur:
        cur.execute("SELECT a.attname, a.atttypid, a.atttypmod, NOT a.attnotnull FROM pg_attribute a "
                    "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                    (_qualified(conn, namespace, table),))
        catalog = {name: (type_oid, typmod, nullable) for name, type_oid, typmod, nullable in cur.fetchall()}
        cur.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                    "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = to_regclass(%s) AND i.indisprimary "
                    "ORDER BY array_position(i.indkey::int2[], a.attnum)", (_qualified(conn, namespace, table),))
        primary_key = [row[0] for row in cur.fetchall()]
    if columns is None:
        columns = [(name, type_oid, typmod) for name, (type_oid, typmod, _) in catalog.items()]
    infos = [ColumnInfo(name, type_oid, typmod, catalog.get(name, (0, 0, True))[2])
             for name, type_oid, typmod in columns]
    names = [info.name for info in infos]
    return TableSchema(config.topic_prefix, namespace, table, infos, primary_key, config.decimal_mode,
                       value_columns=[name for name in names if config.columns.accepts(namespace, table, name)],
                       key_columns=config.message_key_columns.for_table(namespace, table, names))


def _qualified(conn: Any, namespace: str, table: str) -> str:
    return str(sql.Identifier(namespace, table).as_string(conn))


def ensure_publication(conn: Any, config: PostgresCdcConfig) -> None:
    """Create the publication as `publication.autocreate.mode` says, if it does not exist."""
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (config.publication_name,))
        if cur.fetchone() is not None:
            return
        mode = config.publication_autocreate
        if mode == "disabled":
            raise ConnectException(f"publication {config.publication_name!r} does not exist and "
                               "publication.autocreate.mode is disabled")
        name = sql.Identifier(config.publication_name)
        if mode == "all_tables":
            cur.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(name))
            return
        tables = captured_tables(conn, config.tables)
        if not tables:
            raise ConnectException("publication.autocreate.mode is filtered but no table matches the include list")
        listed = sql.SQL(", ").join(sql.Identifier(schema, table) for schema, table in tables)
        cur.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(name, listed))


def slot_exists(conn: Any, slot_name: str) -> bool:
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot_name,))
        return cur.fetchone() is not None


@dataclass(frozen=True)
class CreatedSlot:
    consistent_point: int
    snapshot_name: str | None  # usable by SET TRANSACTION SNAPSHOT until the next replication command


@dataclass(frozen=True)
class StreamMessage:
    payload: bytes
    data_start: int  # the WAL position of the change (for Commit: of the commit record)


class ReplicationStream:
    """The replication connection: creates the slot, then streams pgoutput messages without blocking."""

    def __init__(self, config: PostgresCdcConfig) -> None:
        self.config = config
        self.conn: Any = psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection,
                                          **config.dsn())
        self.cursor: Any = self.conn.cursor()
        self.started = False

    def create_slot(self, export_snapshot: bool) -> CreatedSlot:
        mode = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
        self.cursor.execute(f'CREATE_REPLICATION_SLOT "{self.config.slot_name}" LOGICAL pgoutput {mode}')
        _, consistent_point, snapshot_name, _ = self.cursor.fetchone()
        return CreatedSlot(parse_lsn(consistent_point), snapshot_name)

    def start(self, start_lsn: int) -> None:
        self.cursor.start_replication(
            slot_name=self.config.slot_name, decode=False, start_lsn=start_lsn,
            options={"proto_version": "1", "publication_names": self.config.publication_name})
        self.started = True

    def read(self) -> StreamMessage | None:
        """The next message if one has arrived (keepalives are answered inside), else None at once."""
        message = self.cursor.read_message()
        if message is None:
            return None
        return StreamMessage(bytes(message.payload), int(message.data_start))

    def wait(self, timeout_s: float) -> None:
        """Wait up to `timeout_s` for the connection to have something to read."""
        select.select([self.cursor], [], [], timeout_s)

    @property
    def wal_end(self) -> int:
        """The server's position as of the last message or keepalive: everything before it was sent."""
        return int(self.cursor.wal_end)

    def confirm(self, flush_lsn: int) -> None:
        """Tell the server every change up to `flush_lsn` is written and its WAL may be recycled."""
        self.cursor.send_feedback(write_lsn=flush_lsn, flush_lsn=flush_lsn, reply=True)

    def close(self) -> None:
        with contextlib.suppress(psycopg2.Error):
            self.conn.close()
