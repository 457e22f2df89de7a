"""The initial snapshot: every captured table's rows read in one REPEATABLE READ transaction that sees the
database exactly as of the slot's consistent point (the slot's exported snapshot, when the slot was just
created), so the stream that follows starts where the snapshot ends.

Rows are read through a server-side cursor, a batch at a time, as text (`::text`), so snapshot and stream
values go through the same parsers. Only the columns of the key and the value are selected (a column the
column lists leave out may be one the user cannot read). The last row of the whole snapshot is marked
`snapshot: "last"`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg2
from psycopg2 import sql

from .config import PostgresCdcConfig
from .envelope import TableSchema
from .replication import captured_tables, describe_table

__all__ = ["SnapshotRows", "open_snapshot"]


class SnapshotRows:
    """The rows of every captured table, as (table, text values), with the transaction they are read in."""

    def __init__(self, conn: Any, tables: list[TableSchema], tx_id: int, batch_size: int) -> None:
        self.conn = conn
        self.tables = tables
        self.tx_id = tx_id
        self.batch_size = batch_size
        self._rows = self._iterate()
        self._lookahead: tuple[TableSchema, tuple[str | None, ...]] | None = next(self._rows, None)

    def _iterate(self) -> Iterator[tuple[TableSchema, tuple[str | None, ...]]]:
        for number, table in enumerate(self.tables):
            read = table.read_columns
            if not read:  # every column left out of a table without a key: one row of nothing per row
                query = sql.SQL("SELECT FROM {}").format(sql.Identifier(table.namespace, table.table))
            else:
                columns = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(name)) for name in read)
                query = sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(table.namespace, table.table))
            # Values in the table's column order, None where a column was not read (nothing uses it).
            slots = [read.index(c.name) if c.name in read else None for c in table.columns]
            with self.conn.cursor(name=f"moldau_snapshot_{number}") as cur:
                cur.itersize = self.batch_size
                cur.execute(query)
                for row in cur:
                    yield table, tuple(None if slot is None else row[slot] for slot in slots)

    def next_batch(self) -> list[tuple[TableSchema, tuple[str | None, ...], bool]]:
        """Up to `batch_size` rows as (table, values, is the snapshot's last row); [] when done."""
        batch: list[tuple[TableSchema, tuple[str | None, ...], bool]] = []
        while self._lookahead is not None and len(batch) < self.batch_size:
            current = self._lookahead
            self._lookahead = next(self._rows, None)
            batch.append((current[0], current[1], self._lookahead is None))
        return batch

    def close(self) -> None:
        try:
            self.conn.rollback()
            self.conn.close()
        except psycopg2.Error:
            pass


def open_snapshot(config: PostgresCdcConfig, snapshot_name: str | None) -> SnapshotRows:
    """Begin the snapshot transaction (importing `snapshot_name` when given) and describe the tables in it."""
    conn = psycopg2.connect(**config.dsn())
    conn.set_session(isolation_level="REPEATABLE READ", readonly=True)
    with conn.cursor() as cur:
        if snapshot_name is not None:
            cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
        cur.execute("SELECT txid_snapshot_xmin(txid_current_snapshot())")
        row = cur.fetchone()
        tx_id = int(row[0]) if row else 0
    tables = [describe_table(conn, config, schema, table) for schema, table in captured_tables(conn, config.tables)]
    return SnapshotRows(conn, tables, tx_id, config.max_batch_size)
