"""The source task: the snapshot (when the mode asks for one), then the change stream, heartbeats, and the
confirmation of LSNs to PostgreSQL once the records up to them are acknowledged.

Threads: the worker calls `poll`, `commit_record` and `commit` from the task's thread and `stop` from another;
a lock keeps `stop` from closing the connections under a running `poll`, and `poll` waits for the socket at
most `poll.interval.ms`, so `stop` never waits long.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg2

from moldau.connect.api import RecordMetadata, SourceRecord, SourceTask
from moldau.connect.data import Struct
from moldau.connect.errors import ConnectException

from . import pgoutput
from .config import PostgresCdcConfig
from .envelope import SourceInfo, TableSchema, heartbeat_key_schema, heartbeat_value_schema
from .events import ChangeContext, change_records, read_record, truncate_record
from .offsets import FlushTracker, ResumePoint, parse_lsn, snapshot_completed
from .replication import ReplicationStream, describe_table, ensure_publication, open_sql, slot_exists
from .snapshot import SnapshotRows, open_snapshot
from .transaction_metadata import KEY_SCHEMA as TRANSACTION_KEY_SCHEMA
from .transaction_metadata import VALUE_SCHEMA as TRANSACTION_VALUE_SCHEMA
from .transaction_metadata import TransactionEvents

__all__ = ["PostgresCdcSourceTask"]

log = logging.getLogger(__name__)

UNIX_EPOCH_IN_PG_US = 946_684_800_000_000  # 2000-01-01 in microseconds since 1970-01-01
MAX_RECONNECTS = 5  # replication errors in a row (without a good poll between) before the task fails
RECONNECT_BACKOFF_S = 1.0  # wait before the n-th reconnect: (n - 1) times this


class _Transaction:
    def __init__(self, begin: pgoutput.Begin, skipped: bool, metadata: bool) -> None:
        self.final_lsn = begin.final_lsn
        self.xid = begin.xid
        self.ts_usec = begin.commit_time_us + UNIX_EPOCH_IN_PG_US
        self.skipped = skipped
        self.emitted = 0
        # With provide.transaction.metadata: its events numbered so far (also those a restart skips, which were
        # written before it), whether its BEGIN record was written, and the offset of its latest event.
        self.events = TransactionEvents(str(begin.xid), self.ts_usec // 1000) if metadata else None
        self.began = False
        self.last_offset: dict[str, Any] | None = None


class PostgresCdcSourceTask(SourceTask):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.config: PostgresCdcConfig | None = None
        self.partition: dict[str, Any] = {}
        self.catalog: Any = None
        self.stream: ReplicationStream | None = None
        self.snapshot: SnapshotRows | None = None
        self.snapshot_lsn = 0
        self.snapshot_ts_us = 0
        self.streaming = False
        self.resume = ResumePoint()
        self.relations: dict[int, tuple[pgoutput.Relation, TableSchema | None]] = {}
        self.transaction: _Transaction | None = None
        self.last_commit_lsn: int | None = None
        self.last_offset: dict[str, Any] | None = None
        self.tracker = FlushTracker()
        self.in_flight: dict[int, tuple[SourceRecord, int]] = {}
        self.idle_lsn = 0  # every change before this position was processed (all its records emitted)
        self.confirmed_lsn = 0
        self.last_heartbeat = 0.0
        self.failures_in_a_row = 0

    # --- lifecycle ------------------------------------------------------------------------------------

    def start(self, props: Mapping[str, str]) -> None:
        config = PostgresCdcConfig.from_props(props)
        self.config = config
        self.partition = {"server": config.topic_prefix}
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.resume = ResumePoint.from_offset(stored)
        self.last_heartbeat = self.clock()
        wants_snapshot = config.snapshot_mode == "always" or (
            config.snapshot_mode in ("initial", "initial_only") and not snapshot_completed(stored))
        try:
            self.catalog = open_sql(config)
            if config.snapshot_mode == "initial_only":
                # No stream follows, so no slot is needed: a plain REPEATABLE READ snapshot.
                if wants_snapshot:
                    self._begin_snapshot(None, 0)
                return
            ensure_publication(self.catalog, config)
            self.stream = ReplicationStream(config)
            if slot_exists(self.catalog, config.slot_name):
                if wants_snapshot:
                    self._begin_snapshot(None, self._slot_position())
            else:
                created = self.stream.create_slot(export_snapshot=wants_snapshot)
                log.info("postgres-cdc %s: created slot %s at %X", config.topic_prefix, config.slot_name,
                         created.consistent_point)
                if wants_snapshot:
                    self._begin_snapshot(created.snapshot_name, created.consistent_point)
            if self.snapshot is None:
                self._start_streaming()
        except ConnectException:
            self._close()
            raise
        except psycopg2.Error as exc:
            self._close()
            raise ConnectException(f"cannot start capturing changes from {config.dbname}: {exc}") from exc

    def _slot_position(self) -> int:
        assert self.catalog is not None and self.config is not None
        with self.catalog.cursor() as cur:
            cur.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                        (self.config.slot_name,))
            row = cur.fetchone()
        return parse_lsn(row[0]) if row and row[0] else 0

    def _begin_snapshot(self, snapshot_name: str | None, lsn: int) -> None:
        assert self.config is not None
        self.snapshot = open_snapshot(self.config, snapshot_name)
        self.snapshot_lsn = lsn
        self.snapshot_ts_us = int(self.clock() * 1_000_000)
        if snapshot_name is not None:
            # Exported: the snapshot holds exactly what was committed before the consistent point.
            self.resume = ResumePoint(lsn)
        log.info("postgres-cdc %s: snapshot of %d tables", self.config.topic_prefix, len(self.snapshot.tables))

    def _start_streaming(self) -> None:
        assert self.stream is not None and self.config is not None
        self.stream.start(0)  # the slot resumes at its confirmed position; the stored offset skips the rest
        self.streaming = True
        log.info("postgres-cdc %s: streaming from slot %s", self.config.topic_prefix, self.config.slot_name)

    def stop(self) -> None:
        self.stopping.set()
        with self.lock:
            self._close()

    def _close(self) -> None:
        if self.snapshot is not None:
            self.snapshot.close()
            self.snapshot = None
        self._close_connections()
        self.streaming = False

    def _close_connections(self) -> None:
        """Close the replication and catalog connections (the next poll reconnects while streaming)."""
        if self.stream is not None:
            self.stream.close()
            self.stream = None
        if self.catalog is not None:
            with contextlib.suppress(psycopg2.Error):
                self.catalog.close()
            self.catalog = None

    # --- poll -----------------------------------------------------------------------------------------

    def poll(self) -> list[SourceRecord] | None:
        assert self.config is not None
        with self.lock:
            if self.stopping.is_set():
                return None
            try:
                if self.snapshot is not None:
                    return self._poll_snapshot()
                if self.streaming and self.stream is None:
                    self._reconnect()
                if not self.streaming or self.stream is None:
                    self.stopping.wait(self.config.poll_interval_ms / 1000)
                    return None
                records = self._poll_stream(self.stream)
                self.failures_in_a_row = 0
                return records
            except psycopg2.Error as exc:
                if self.stopping.is_set():
                    return None
                self.failures_in_a_row += 1
                if not self.streaming or self.failures_in_a_row > MAX_RECONNECTS:
                    raise ConnectException(f"PostgreSQL replication failed: {exc}") from exc
                self._connection_lost(exc)
                return None

    def _connection_lost(self, cause: BaseException) -> None:
        """The replication connection dropped (a server restart, or `wal_sender_timeout` while the task was
        paused and not polling): drop both connections; the next polls reconnect, waiting longer each time."""
        assert self.config is not None
        log.warning("postgres-cdc %s: replication connection lost (%s); reconnecting (attempt %d of %d)",
                    self.config.topic_prefix, str(cause).strip(), self.failures_in_a_row, MAX_RECONNECTS)
        self._close_connections()
        self.stopping.wait(RECONNECT_BACKOFF_S * (self.failures_in_a_row - 1))

    def _reconnect(self) -> None:
        """Stream again from the slot, skipping what this task already emitted (the slot resumes at the last
        confirmed position, which may be older)."""
        assert self.config is not None
        self.transaction = None
        self.relations.clear()
        if self.last_offset is not None and "lsn_commit" in self.last_offset:
            self.resume = ResumePoint.from_offset(self.last_offset)
        self.catalog = open_sql(self.config)
        self.stream = ReplicationStream(self.config)
        self._start_streaming()
        self.confirmed_lsn = 0  # a new connection: send the next confirmation even if it is not higher

    def _poll_snapshot(self) -> list[SourceRecord]:
        assert self.snapshot is not None and self.config is not None
        records = []
        for table, values, last in self.snapshot.next_batch():
            offset = {"lsn": self.snapshot_lsn, "txId": self.snapshot.tx_id, "ts_usec": self.snapshot_ts_us,
                      "snapshot": True, "last_snapshot_record": last}
            source = SourceInfo(self.config.topic_prefix, self.config.dbname, self.snapshot_ts_us // 1000,
                                "last" if last else "true", self.snapshot.tx_id, self.snapshot_lsn)
            records.append(read_record(table, values, ChangeContext(self.partition, offset, source,
                                                                    self._now_ms())))
        if not records:
            self.snapshot.close()
            self.snapshot = None
            log.info("postgres-cdc %s: snapshot done", self.config.topic_prefix)
            if self.stream is not None:
                self._start_streaming()
        return records

    def _poll_stream(self, stream: ReplicationStream) -> list[SourceRecord]:
        assert self.config is not None
        records: list[SourceRecord] = []
        while len(records) < self.config.max_batch_size:
            message = stream.read()
            if message is None:
                break
            records.extend(self._handle(message))
        if self.transaction is None and not records:
            self.idle_lsn = max(self.idle_lsn, stream.wal_end)
        records.extend(self._heartbeat())
        if not records:
            stream.wait(self.config.poll_interval_ms / 1000)
        return records

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- stream messages -----------------------------------------------------------------------------

    def _handle(self, message: Any) -> list[SourceRecord]:
        decoded = pgoutput.decode(message.payload)
        if isinstance(decoded, pgoutput.Begin):
            assert self.config is not None
            self.transaction = _Transaction(decoded, self.resume.skips_transaction(decoded.final_lsn),
                                            self.config.transaction_topic is not None)
        elif isinstance(decoded, pgoutput.Commit):
            return self._commit(decoded)
        elif isinstance(decoded, pgoutput.Relation):
            self._relation(decoded)
        elif isinstance(decoded, pgoutput.Insert | pgoutput.Update | pgoutput.Delete):
            return self._change(decoded, message.data_start)
        elif isinstance(decoded, pgoutput.Truncate):
            return self._truncate(decoded, message.data_start)
        return []

    def _commit(self, commit: pgoutput.Commit) -> list[SourceRecord]:
        transaction = self.transaction
        self.transaction = None
        records = []
        if transaction is not None and transaction.began and not transaction.skipped:
            records = self._register(transaction, [self._transaction_record(transaction, end=True)])
        if transaction is not None and transaction.emitted:
            self.tracker.safe_after(commit.end_lsn)
        self.last_commit_lsn = commit.commit_lsn
        self.idle_lsn = max(self.idle_lsn, commit.end_lsn)
        return records

    def _relation(self, relation: pgoutput.Relation) -> None:
        assert self.config is not None
        table = None
        if self.config.tables.accepts(relation.namespace, relation.name):
            columns = [(c.name, c.type_oid, c.type_modifier) for c in relation.columns]
            table = describe_table(self.catalog, self.config, relation.namespace, relation.name, columns)
        self.relations[relation.oid] = (relation, table)

    def _context(self, transaction: _Transaction, lsn: int) -> tuple[ChangeContext, dict[str, Any]]:
        assert self.config is not None
        offset = {"lsn": lsn, "lsn_commit": transaction.final_lsn, "txId": transaction.xid,
                  "ts_usec": transaction.ts_usec}
        source = SourceInfo(self.config.topic_prefix, self.config.dbname, transaction.ts_usec // 1000, "false",
                            transaction.xid, lsn, (self.last_commit_lsn, lsn))
        return ChangeContext(self.partition, offset, source, self._now_ms(), self.config.skipped_operations), offset

    def _change(self, change: pgoutput.Insert | pgoutput.Update | pgoutput.Delete, lsn: int) -> list[SourceRecord]:
        transaction = self.transaction
        if transaction is None or transaction.skipped:
            return []
        written = self.resume.skips_event(transaction.final_lsn, lsn)
        if written and transaction.events is None:
            return []
        relation, table = self.relations.get(change.relation_oid, (None, None))
        if relation is None or table is None:
            return []
        ctx, offset = self._context(transaction, lsn)
        records = change_records(table, relation, change, ctx)
        self._number(transaction, table, records, offset, written)
        return [] if written else self._emitted(transaction, records, offset)

    def _truncate(self, truncate: pgoutput.Truncate, lsn: int) -> list[SourceRecord]:
        transaction = self.transaction
        assert self.config is not None
        if transaction is None or transaction.skipped or "t" in self.config.skipped_operations:
            return []
        written = self.resume.skips_event(transaction.final_lsn, lsn)
        if written and transaction.events is None:
            return []
        ctx, offset = self._context(transaction, lsn)
        records = []
        for _, table in (self.relations.get(oid, (None, None)) for oid in truncate.relation_oids):
            if table is not None:
                record = truncate_record(table, ctx)
                self._number(transaction, table, [record], offset, written)
                records.append(record)
        return [] if written else self._emitted(transaction, records, offset)

    def _number(self, transaction: _Transaction, table: TableSchema, records: list[SourceRecord],
                offset: dict[str, Any], written: bool) -> None:
        """With transaction metadata, give each change event (not a tombstone) its place in the transaction. Also
        for events a restart skips (`written`): they were written with these numbers before it, and so was the
        transaction's BEGIN."""
        if transaction.events is None or not records:
            return
        for record in records:
            if isinstance(record.value, Struct):
                record.value.put("transaction", transaction.events.number(f"{table.namespace}.{table.table}"))
        transaction.last_offset = offset
        transaction.began = transaction.began or written

    def _emitted(self, transaction: _Transaction, records: list[SourceRecord],
                 offset: dict[str, Any]) -> list[SourceRecord]:
        """Number the records for the flush tracker. All but the last carry the previous event's offset, so
        a crash between them does not make a restart skip the rest of this event. The transaction's BEGIN
        record, with transaction metadata, goes before its first event."""
        if not records:
            return records
        if transaction.events is not None and not transaction.began:
            transaction.began = True
            records = [self._transaction_record(transaction, end=False), *records]
        if len(records) > 1:
            # Without an earlier event, lsn 0 makes a restart skip nothing (duplicates, never a loss).
            earlier = self.last_offset or {"lsn": 0, "txId": transaction.xid, "ts_usec": transaction.ts_usec}
            records = [r.new_record(source_offset=earlier) if i < len(records) - 1 else r
                       for i, r in enumerate(records)]
        self.last_offset = offset
        return self._register(transaction, records)

    def _register(self, transaction: _Transaction, records: list[SourceRecord]) -> list[SourceRecord]:
        for record in records:
            self.in_flight[id(record)] = (record, self.tracker.emitted())
        transaction.emitted += len(records)
        return records

    def _transaction_record(self, transaction: _Transaction, end: bool) -> SourceRecord:
        """The BEGIN or END record of the transaction topic. END carries the offset of the transaction's last
        event, so a restart after it skips no event that was not written."""
        assert self.config is not None and self.config.transaction_topic is not None
        assert transaction.events is not None and transaction.last_offset is not None  # set by `_number` first
        value = transaction.events.end() if end else transaction.events.begin()
        return SourceRecord(topic=self.config.transaction_topic, key_schema=TRANSACTION_KEY_SCHEMA,
                            key=transaction.events.key(), value_schema=TRANSACTION_VALUE_SCHEMA, value=value,
                            source_partition=self.partition, source_offset=transaction.last_offset)

    # --- heartbeats and acknowledgements -------------------------------------------------------------

    def _heartbeat(self) -> list[SourceRecord]:
        assert self.config is not None
        interval = self.config.heartbeat_interval_ms
        now = self.clock()
        if interval <= 0 or self.transaction is not None or (now - self.last_heartbeat) * 1000 < interval:
            return []
        self.last_heartbeat = now
        offset = {"lsn": self.idle_lsn, "txId": self.last_offset.get("txId") if self.last_offset else None,
                  "ts_usec": int(now * 1_000_000)}
        key = Struct(heartbeat_key_schema(), {"serverName": self.config.topic_prefix})
        value = Struct(heartbeat_value_schema(), {"ts_ms": int(now * 1000)})
        record = SourceRecord(topic=f"{self.config.heartbeat_prefix}.{self.config.topic_prefix}",
                              key_schema=key.schema, key=key, value_schema=value.schema, value=value,
                              source_partition=self.partition, source_offset=offset)
        self.in_flight[id(record)] = (record, self.tracker.emitted())
        self.tracker.safe_after(self.idle_lsn)  # once the heartbeat is acknowledged, so is everything before
        return [record]

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        entry = self.in_flight.pop(id(record), None)
        if entry is not None:
            self.tracker.acknowledged(entry[1])

    def commit(self) -> None:
        """The worker stored the offsets of every acknowledged record: confirm what they cover."""
        flushable = self.tracker.flushable()
        with self.lock:
            if flushable > self.confirmed_lsn and self.stream is not None and self.streaming:
                self.stream.confirm(flushable)
                self.confirmed_lsn = flushable
