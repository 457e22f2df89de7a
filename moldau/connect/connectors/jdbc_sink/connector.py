"""The JDBC sink connector (Confluent's `io.confluent.connect.jdbc.JdbcSinkConnector`, for PostgreSQL) and its
task. Every `put` is one database transaction, committed before `put` returns, so the consumer offsets the
worker commits afterwards never run ahead of the table. A lost connection is retried `max.retries` times,
`retry.backoff.ms` apart (the worker redelivers the same batch); any other SQL error fails the task with the
database's message. With `insert.mode=upsert` or `update`, redelivered records rewrite the same rows, so a
replay after a crash leaves one row per key with its latest value."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg2

from moldau.connect.api import SinkConnector, SinkRecord, SinkTask, Task
from moldau.connect.config import ConfigDef, ConfigValue
from moldau.connect.connectors.jdbc_sink.config import JdbcSinkConfig, config_def, cross_check
from moldau.connect.connectors.jdbc_sink.writer import BatchWriter
from moldau.connect.errors import ConnectException, RetriableException

__all__ = ["JdbcSinkConnector", "JdbcSinkTask"]

log = logging.getLogger(__name__)

# psycopg2's errors that mean the connection (not the statement) failed: retried on a new connection.
CONNECTION_ERRORS = (psycopg2.OperationalError, psycopg2.InterfaceError)


class JdbcSinkConnector(SinkConnector):
    aliases = ("io.confluent.connect.jdbc.JdbcSinkConnector", "PostgresSink", "JdbcSink")

    def __init__(self) -> None:
        self.props: dict[str, str] = {}

    def config_def(self) -> ConfigDef:
        return config_def()

    def validate(self, props: Mapping[str, str]) -> list[ConfigValue]:
        results = self.config_def().validate(props)
        parsed = {r.name: r.value for r in results if not r.errors}
        return results + cross_check(parsed)

    def start(self, props: Mapping[str, str]) -> None:
        JdbcSinkConfig.parse(props)
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return JdbcSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props) for _ in range(max_tasks)]

    def stop(self) -> None:
        pass


class JdbcSinkTask(SinkTask):
    def __init__(self) -> None:
        self.config: JdbcSinkConfig | None = None
        self.writer: BatchWriter | None = None
        self.connection: Any = None
        self.remaining_retries = 0
        self.stopping = threading.Event()

    def start(self, props: Mapping[str, str]) -> None:
        self.config = JdbcSinkConfig.parse(props)
        self.writer = BatchWriter(self.config)
        self.remaining_retries = self.config.max_retries

    def put(self, records: Sequence[SinkRecord]) -> None:
        if not records:
            return
        assert self.config is not None and self.writer is not None
        try:
            self.writer.write(self._connect(), records)
        except CONNECTION_ERRORS as exc:
            self._close_connection()
            self.writer.tables.forget()
            if self.remaining_retries <= 0:
                raise ConnectException(f"Exceeded max.retries ({self.config.max_retries}) writing to "
                                       f"PostgreSQL: {_message(exc)}") from exc
            self.remaining_retries -= 1
            log.warning("JDBC sink: write of %d records failed (%d retries left): %s", len(records),
                        self.remaining_retries, _message(exc))
            self.context.timeout(self.config.retry_backoff_ms)
            raise RetriableException(_message(exc)) from exc
        except psycopg2.Error as exc:
            raise ConnectException(f"Writing {len(records)} records (offsets {_offsets(records)}) to PostgreSQL "
                                   f"failed: {_message(exc)}") from exc
        self.remaining_retries = self.config.max_retries

    def _connect(self) -> Any:
        """The open connection, or a new one after up to `connection.attempts` tries."""
        if self.connection is not None and not self.connection.closed:
            return self.connection
        assert self.config is not None
        attempt = 1
        while True:
            try:
                self.connection = psycopg2.connect(**self.config.connection)
                return self.connection
            except psycopg2.OperationalError as exc:
                if attempt >= self.config.connection_attempts or \
                        self.stopping.wait(self.config.connection_backoff_ms / 1000):
                    raise
                log.info("JDBC sink: connection attempt %d failed, trying again: %s", attempt, _message(exc))
                attempt += 1

    def _close_connection(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(psycopg2.Error):
                self.connection.close()
        self.connection = None

    def stop(self) -> None:
        self.stopping.set()
        self._close_connection()


def _message(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _offsets(records: Sequence[SinkRecord]) -> str:
    first, last = records[0], records[-1]
    return f"{first.topic}-{first.kafka_partition}@{first.kafka_offset}..{last.topic}-{last.kafka_partition}" \
           f"@{last.kafka_offset}"
