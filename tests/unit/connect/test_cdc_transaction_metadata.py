"""Debezium's transaction metadata in the PostgreSQL CDC source (`provide.transaction.metadata`): the BEGIN and
END records and the envelope's `transaction` block, from pgoutput messages built byte by byte and fed to the
task's stream handling, fresh and after a restart in the middle of a transaction."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

from moldau.connect.api import SourceRecord
from moldau.connect.connectors.postgres_cdc import pgoutput
from moldau.connect.connectors.postgres_cdc.config import PostgresCdcConfig
from moldau.connect.connectors.postgres_cdc.envelope import ColumnInfo, TableSchema
from moldau.connect.connectors.postgres_cdc.offsets import ResumePoint
from moldau.connect.connectors.postgres_cdc.task import PostgresCdcSourceTask

XID, FINAL_LSN = 731, 0x100
TABLES = {1: "a", 2: "b"}


def task(metadata: bool = True, resume: ResumePoint | None = None) -> PostgresCdcSourceTask:
    source = PostgresCdcSourceTask(clock=lambda: 1_700_000_000.0)
    source.config = PostgresCdcConfig.from_props({
        "database.hostname": "h", "database.user": "u", "database.dbname": "d", "topic.prefix": "srv",
        "provide.transaction.metadata": str(metadata).lower()})
    source.partition = {"server": "srv"}
    source.resume = resume or ResumePoint()
    for oid, name in TABLES.items():
        relation = pgoutput.Relation(oid, "public", name, "d", (pgoutput.Column("id", 23, -1, True),))
        source.relations[oid] = (relation, TableSchema("srv", "public", name, [ColumnInfo("id", 23, -1, False)],
                                                       ["id"]))
    return source


def message(payload: bytes, lsn: int = 0) -> Any:
    return SimpleNamespace(payload=payload, data_start=lsn)


def row(value: str) -> bytes:
    return struct.pack("!h", 1) + b"t" + struct.pack("!i", len(value)) + value.encode()


def feed(source: PostgresCdcSourceTask) -> list[SourceRecord]:
    """One transaction: two inserts into a, one into b, a delete from a; then its commit."""
    changes = [message(b"B" + struct.pack("!QqI", FINAL_LSN, 0, XID))]
    changes += [message(b"I" + struct.pack("!I", 1) + b"N" + row("1"), 0x10),
                message(b"I" + struct.pack("!I", 1) + b"N" + row("2"), 0x20),
                message(b"I" + struct.pack("!I", 2) + b"N" + row("1"), 0x30),
                message(b"D" + struct.pack("!I", 1) + b"K" + row("1"), 0x40),
                message(b"C" + struct.pack("!bQQq", 0, FINAL_LSN, FINAL_LSN + 8, 0))]
    return [record for change in changes for record in source._handle(change)]


def blocks(records: list[SourceRecord]) -> list[tuple[str, int, int]]:
    return [(r.topic, r.value.get("transaction").get("total_order"),
             r.value.get("transaction").get("data_collection_order"))
            for r in records if r.topic != "srv.transaction" and r.value is not None]


def test_begin_events_numbered_and_end_with_counts_per_table() -> None:
    records = feed(task())
    assert [r.topic for r in records] == ["srv.transaction", "srv.public.a", "srv.public.a", "srv.public.b",
                                          "srv.public.a", "srv.public.a", "srv.transaction"]
    begin, end = records[0], records[-1]
    assert begin.key.get("id") == end.key.get("id") == str(XID)
    assert begin.value.get("status") == "BEGIN" and begin.value.get("event_count") is None
    assert end.value.get("status") == "END" and end.value.get("event_count") == 4  # the tombstone is no event
    assert [(c.get("data_collection"), c.get("event_count")) for c in end.value.get("data_collections")] == [
        ("public.a", 3), ("public.b", 1)]
    assert blocks(records) == [("srv.public.a", 1, 1), ("srv.public.a", 2, 2), ("srv.public.b", 3, 1),
                               ("srv.public.a", 4, 3)]
    assert records[1].value.get("transaction").get("id") == str(XID)
    # BEGIN carries no offset past an event; END the transaction's last event's, so a restart skips only those.
    assert begin.source_offset["lsn"] == 0 and end.source_offset["lsn"] == 0x40


def test_a_restart_inside_the_transaction_numbers_on_and_writes_no_second_begin() -> None:
    records = feed(task(resume=ResumePoint(0x20, FINAL_LSN)))  # the events up to 0x20 were written
    assert [r.topic for r in records] == ["srv.public.b", "srv.public.a", "srv.public.a", "srv.transaction"]
    assert blocks(records) == [("srv.public.b", 3, 1), ("srv.public.a", 4, 3)]
    assert records[-1].value.get("event_count") == 4


def test_without_metadata_the_block_is_null_and_no_transaction_records() -> None:
    records = feed(task(metadata=False))
    assert "srv.transaction" not in {r.topic for r in records}
    assert all(r.value.get("transaction") is None for r in records if r.value is not None)
