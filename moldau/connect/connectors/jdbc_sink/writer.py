"""Writing a batch of records in one transaction. Consecutive records for the same table with the same
columns and the same operation (write or delete) form a run, written with one statement batch (runs keep the
records' order, so a delete followed by a re-insert of a key ends with the row). In upsert mode a run keeps only
the last row of each key, which is what applying them in order leaves; PostgreSQL refuses one INSERT ... ON
CONFLICT that touches a row twice."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg2.extras import execute_batch, execute_values

from moldau.connect.api import SinkRecord
from moldau.connect.connectors.jdbc_sink.config import InsertMode, JdbcSinkConfig
from moldau.connect.connectors.jdbc_sink.dialect import Dialect, TableId
from moldau.connect.connectors.jdbc_sink.fields import FieldsMetadata, fields_metadata, require_value_schema
from moldau.connect.connectors.jdbc_sink.rows import RowConverter
from moldau.connect.connectors.jdbc_sink.tables import TableManager
from moldau.connect.errors import ConnectException

__all__ = ["BatchWriter", "Run", "plan_runs", "table_for"]


def table_for(config: JdbcSinkConfig, topic: str) -> TableId:
    return TableId.parse(config.table_name_format.replace("${topic}", topic))


@dataclass
class Run:
    """Records in a row for one table, with the same columns and operation."""

    table: TableId
    fields: FieldsMetadata
    delete: bool
    rows: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = field(default_factory=list)  # (key, other values)


def plan_runs(config: JdbcSinkConfig, records: Sequence[SinkRecord], rows: RowConverter) -> list[Run]:
    """The runs of `records`, in order, with their rows converted."""
    runs: list[Run] = []
    for record in records:
        tombstone = record.value is None
        if tombstone and not config.delete_enabled:
            raise ConnectException(
                f"Sink connector is configured with 'delete.enabled=false' and 'pk.mode={config.pk_mode.value}' "
                f"and therefore requires records with a non-null Struct value and non-null Struct schema, but "
                f"found record at (topic='{record.topic}', partition={record.kafka_partition}, offset="
                f"{record.kafka_offset}) with a null value")
        value_schema = None if tombstone else require_value_schema(record)
        table = table_for(config, record.topic)
        fields = fields_metadata(config, record, value_schema)
        if not runs or (runs[-1].table, runs[-1].fields, runs[-1].delete) != (table, fields, tombstone):
            runs.append(Run(table, fields, tombstone))
        values = () if tombstone else rows.values(record, fields)
        runs[-1].rows.append((rows.key(record, fields), values))
    return runs


class BatchWriter:
    """Writes runs through one connection: tables first (DDL, committed on its own), then every run's rows
    in a single transaction, committed at the end or rolled back on any error."""

    def __init__(self, config: JdbcSinkConfig) -> None:
        self.config = config
        self.dialect = Dialect(config.quote_identifiers)
        self.rows = RowConverter(config.pk_mode, config.db_timezone)
        self.tables = TableManager(self.dialect, config.auto_create, config.auto_evolve)

    def write(self, connection: Any, records: Sequence[SinkRecord]) -> None:
        runs = plan_runs(self.config, records, self.rows)
        for run in runs:
            if not run.delete:
                self.tables.ensure(connection, run.table, run.fields)
        try:
            with connection.cursor() as cursor:
                for run in runs:
                    self._write_run(cursor, run)
            connection.commit()
        except Exception:
            connection.rollback()
            raise

    def _write_run(self, cursor: Any, run: Run) -> None:
        keys, values = run.fields.key_names, run.fields.value_names
        page = self.config.batch_size
        if run.delete:
            execute_batch(cursor, self.dialect.delete(run.table, keys), [k for k, _ in run.rows], page_size=page)
            return
        mode = self.config.insert_mode
        if mode is InsertMode.UPDATE:
            if values:
                statement = self.dialect.update(run.table, keys, values)
                execute_batch(cursor, statement, [v + k for k, v in run.rows], page_size=page)
            return
        if mode is InsertMode.UPSERT:
            statement = self.dialect.upsert(run.table, keys, values)
            rows = list(_last_per_key(run.rows))
        else:
            statement = self.dialect.insert(run.table, keys, values)
            rows = [k + v for k, v in run.rows]
        execute_values(cursor, statement, rows, page_size=page)


def _last_per_key(rows: Sequence[tuple[tuple[Any, ...], tuple[Any, ...]]]) -> Iterator[tuple[Any, ...]]:
    last: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for key, values in rows:
        last.pop(key, None)  # a key seen again moves to the end: it is written in its latest position
        last[key] = values
    for key, values in last.items():
        yield key + values
