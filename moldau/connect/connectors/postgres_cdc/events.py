"""Turns decoded pgoutput changes of one table into Debezium records (create, update, delete + tombstone,
truncate). Pure: the caller passes the source block and the processing time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.connect.api import SourceRecord
from moldau.connect.data import Struct

from .envelope import Row, SourceInfo, TableSchema
from .pgoutput import UNCHANGED_TOAST, Delete, Insert, Relation, TupleValue, Update

__all__ = ["ChangeContext", "change_records", "read_record", "truncate_record"]


@dataclass(frozen=True)
class ChangeContext:
    partition: Mapping[str, Any]
    offset: Mapping[str, Any]
    source: SourceInfo
    ts_ms: int
    skipped: frozenset[str] = frozenset()


def _record(table: TableSchema, ctx: ChangeContext, op: str, before: Row | None, after: Row | None,
            key: Struct | None) -> SourceRecord:
    return SourceRecord(topic=table.topic, key_schema=table.key_schema, key=key,
                        value_schema=table.envelope_schema,
                        value=table.envelope(op, before, after, ctx.source, ctx.ts_ms),
                        source_partition=ctx.partition, source_offset=ctx.offset)


def _tombstone(table: TableSchema, ctx: ChangeContext, key: Struct | None) -> SourceRecord:
    return SourceRecord(topic=table.topic, key_schema=table.key_schema, key=key,
                        source_partition=ctx.partition, source_offset=ctx.offset)


def read_record(table: TableSchema, values: tuple[str | None, ...], ctx: ChangeContext) -> SourceRecord:
    """A snapshot row: op `r`."""
    after = table.parse(values)
    return _record(table, ctx, "r", None, after, table.key(after))


def _key_mask(relation: Relation) -> list[bool]:
    return [column.is_key for column in relation.columns]


def _fill_unchanged(new: tuple[TupleValue, ...], old: tuple[TupleValue, ...] | None) -> tuple[TupleValue, ...]:
    """With REPLICA IDENTITY FULL the old tuple holds the values an update left TOASTed and unsent."""
    if old is None:
        return new
    return tuple(old[i] if value is UNCHANGED_TOAST and i < len(old) else value for i, value in enumerate(new))


def change_records(table: TableSchema, relation: Relation, change: Insert | Update | Delete,
                   ctx: ChangeContext) -> list[SourceRecord]:
    if isinstance(change, Insert):
        if "c" in ctx.skipped:
            return []
        after = table.parse(change.new)
        return [_record(table, ctx, "c", None, after, table.key(after))]
    if isinstance(change, Delete):
        return _delete(table, relation, change.old, change.old_is_key_only, ctx)
    return _update(table, relation, change, ctx)


def _delete(table: TableSchema, relation: Relation, old: tuple[TupleValue, ...], key_only: bool,
            ctx: ChangeContext) -> list[SourceRecord]:
    if "d" in ctx.skipped:
        return []
    before = table.parse(old, _key_mask(relation) if key_only else None)
    key = table.key(before)
    return [_record(table, ctx, "d", before, None, key), _tombstone(table, ctx, key)]


def _update(table: TableSchema, relation: Relation, change: Update, ctx: ChangeContext) -> list[SourceRecord]:
    full_old = change.old if change.old is not None and not change.old_is_key_only else None
    after = table.parse(_fill_unchanged(change.new, full_old))
    before = table.parse(full_old) if full_old is not None else None
    if change.old is not None and change.old_is_key_only:
        # The primary key changed: Debezium writes a delete (and tombstone) of the old key, then a create.
        old_key = table.key(table.parse(change.old, _key_mask(relation)))
        if old_key is not None and old_key != table.key(after):
            records = _delete(table, relation, change.old, True, ctx)
            if "c" not in ctx.skipped:
                records.append(_record(table, ctx, "c", None, after, table.key(after)))
            return records
    if "u" in ctx.skipped:
        return []
    return [_record(table, ctx, "u", before, after, table.key(after))]


def truncate_record(table: TableSchema, ctx: ChangeContext) -> SourceRecord:
    """op `t`: no key, no before or after."""
    return SourceRecord(topic=table.topic, value_schema=table.envelope_schema,
                        value=table.envelope("t", None, None, ctx.source, ctx.ts_ms),
                        source_partition=ctx.partition, source_offset=ctx.offset)
