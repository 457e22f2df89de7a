"""Debezium's ExtractNewRecordState (`io.debezium.transforms.ExtractNewRecordState`): a change event's envelope
(`before`, `after`, `source`, `op`, `ts_ms`) replaced by the row after the change, so a sink that wants flat rows
(the JDBC sink, a file) takes change events. With Debezium's option names and defaults:

- `delete.handling.mode`: `drop` (default) drops delete events; `none` turns them into tombstones (null value,
  same key), which a sink with `delete.enabled` applies as deletes; `rewrite` gives the `before` row with
  `__deleted: "true"` (and `"false"` on other events).
- `drop.tombstones` (default true) drops the tombstones that follow deletes.
- `delete.tombstone.handling.mode` (Debezium's newer single option, which wins when set): `drop`, `tombstone`
  (deletes become tombstones, the original tombstones are dropped), `rewrite`, `rewrite-with-tombstone`.
- `add.fields` / `add.headers`: envelope fields copied into the row / headers, named with `add.fields.prefix` /
  `add.headers.prefix` (default `__`): `op`, `ts_ms` from the envelope, `source.<field>` (or a bare source field
  such as `table`, `lsn`, `db`) from `source`, e.g. `add.fields=op,table,source.ts_ms` adds `__op`, `__table`,
  `__source_ts_ms`.

Records that are not change events (heartbeats, schema changes) pass unchanged; an event with no `after` that is
not a delete (a truncate) is dropped. Struct values (JsonConverter
with schemas, Avro...) and schemaless maps are both handled.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.connect.api import ConnectRecord, Header, Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance, ValidString
from moldau.connect.data import OPTIONAL_STRING_SCHEMA, Schema, Struct
from moldau.connect.errors import ConfigException
from moldau.connect.transforms.parts import fields_of, struct_like

__all__ = ["ExtractNewRecordState"]

DELETED = "deleted"
LEGACY_MODES = ("drop", "rewrite", "none")
MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone")

CONFIG_DEF = (
    ConfigDef()
    .define("drop.tombstones", ConfigType.BOOLEAN, True, Importance.LOW,
            "Drop the tombstones that follow delete events")
    .define("delete.handling.mode", ConfigType.STRING, "drop", Importance.MEDIUM,
            "drop: drop delete events; none: pass them on as tombstones; rewrite: the before row with __deleted",
            validator=ValidString.in_(*LEGACY_MODES))
    .define("delete.tombstone.handling.mode", ConfigType.STRING, None, Importance.MEDIUM,
            "drop, tombstone, rewrite or rewrite-with-tombstone (wins over the two options above when set)",
            validator=ValidString.in_(*MODES))
    .define("add.fields", ConfigType.LIST, "", Importance.LOW, "Envelope fields to add to the row")
    .define("add.fields.prefix", ConfigType.STRING, "__", Importance.LOW, "Prefix of the added fields' names")
    .define("add.headers", ConfigType.LIST, "", Importance.LOW, "Envelope fields to add as headers")
    .define("add.headers.prefix", ConfigType.STRING, "__", Importance.LOW, "Prefix of the added headers' names")
)


@dataclass(frozen=True)
class _Envelope:
    op: str
    before: Any
    after: Any
    value: Any  # the whole envelope, Struct or map

    def part(self, name: str) -> Any:
        return self.value.get(name) if isinstance(self.value, (Struct, Mapping)) else None


def _has(value: Any, name: str) -> bool:
    if isinstance(value, Struct):
        return value.schema.field(name) is not None
    return isinstance(value, Mapping) and name in value


def _envelope(value: Any) -> _Envelope | None:
    if not all(_has(value, f) for f in ("op", "before", "after")):
        return None
    op = value.get("op")
    return _Envelope(op, value.get("before"), value.get("after"), value) if isinstance(op, str) else None


def _field_names(raw: list[str], option: str) -> list[str]:
    """`add.fields`/`add.headers` entries: an envelope field, or `source.<field>`."""
    names = [name.strip() for name in raw if name.strip()]
    for name in names:
        head, _, rest = name.partition(".")
        if rest and (head != "source" or "." in rest):
            raise ConfigException(option, name, "expected an envelope field (op, ts_ms) or source.<field>")
    return names


class ExtractNewRecordState(Transformation[ConnectRecord]):
    aliases = ("io.debezium.transforms.ExtractNewRecordState",)

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        parsed = CONFIG_DEF.parse(configs)
        mode = parsed["delete.tombstone.handling.mode"]
        if mode is None:  # the older pair of options
            legacy = parsed["delete.handling.mode"]
            self.deletes = {"drop": "drop", "none": "tombstone", "rewrite": "rewrite"}[legacy]
            self.drop_tombstones = bool(parsed["drop.tombstones"])
        else:
            self.deletes = "rewrite" if mode == "rewrite-with-tombstone" else mode
            self.drop_tombstones = mode != "rewrite-with-tombstone"
        self.fields = _field_names(parsed["add.fields"], "add.fields")
        self.headers = _field_names(parsed["add.headers"], "add.headers")
        # Derived row schemas by (row schema, added fields): every record of a table then carries the same schema
        # object, which is cheaper for the converters and sinks that key caches on it.
        self._schemas: dict[tuple[Schema, tuple[tuple[str, Schema], ...]], Schema] = {}
        self.fields_prefix: str = parsed["add.fields.prefix"]
        self.headers_prefix: str = parsed["add.headers.prefix"]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value is None:
            return None if self.drop_tombstones else record
        envelope = _envelope(record.value)
        if envelope is None:
            return record  # not a change event
        headers = tuple(record.headers) + tuple(self._headers(envelope))
        if envelope.op == "d":
            if self.deletes == "drop":
                return None
            if self.deletes == "tombstone":
                before = envelope.value.schema.field("before") if isinstance(envelope.value, Struct) else None
                return record.new_record(value=None, value_schema=before.schema if before else None, headers=headers)
            return self._row(record, envelope, envelope.before, "true", headers)
        if envelope.after is None:
            return None  # a truncate: no row to give
        return self._row(record, envelope, envelope.after, "false" if self.deletes == "rewrite" else None, headers)

    def _extra(self, envelope: _Envelope, names: list[str], prefix: str) -> list[tuple[str, Schema, Any]]:
        out = []
        for name in names:
            schema, value = self._lookup(envelope, name)
            out.append((prefix + name.replace(".", "_"), schema, value))
        return out

    @staticmethod
    def _lookup(envelope: _Envelope, name: str) -> tuple[Schema, Any]:
        """The schema (optional) and value of envelope field `name`: top level, or `source.<x>`/`<x>` in source."""
        container, field_name = envelope.value, name
        if name.startswith("source."):
            container, field_name = envelope.part("source"), name[len("source."):]
        elif not _has(envelope.value, name):
            container = envelope.part("source")
        value = container.get(field_name) if isinstance(container, (Struct, Mapping)) and _has(container, field_name) \
            else None
        if isinstance(container, Struct) and (found := container.schema.field(field_name)) is not None:
            schema = found.schema
            return Schema(schema.type, optional=True, name=schema.name, version=schema.version,
                          parameters=schema.parameters), value
        return OPTIONAL_STRING_SCHEMA, None if value is None else str(value)

    def _derived(self, row: Schema, added: tuple[tuple[str, Schema], ...]) -> Schema:
        schema = self._schemas.get((row, added))
        if schema is None:
            schema = self._schemas[(row, added)] = struct_like(row, fields_of(row) + list(added))
        return schema

    def _headers(self, envelope: _Envelope) -> list[Header]:
        return [Header(name, value, schema) for name, schema, value in
                self._extra(envelope, self.headers, self.headers_prefix)]

    def _row(self, record: ConnectRecord, envelope: _Envelope, row: Any, deleted: str | None,
             headers: tuple[Header, ...]) -> ConnectRecord:
        additions = self._extra(envelope, self.fields, self.fields_prefix)
        if deleted is not None:
            additions.append((self.fields_prefix + DELETED, OPTIONAL_STRING_SCHEMA, deleted))
        if isinstance(row, Struct):
            if not additions:
                return record.new_record(value=row, value_schema=row.schema, headers=headers)
            schema = self._derived(row.schema, tuple((n, s) for n, s, _ in additions))
            values = {**row.to_dict(), **{n: v for n, _, v in additions}}
            return record.new_record(value=Struct(schema, values), value_schema=schema, headers=headers)
        # Schemaless change events (maps) give schemaless rows.
        flat = dict(row) if isinstance(row, Mapping) else {}
        flat.update({n: v for n, _, v in additions})
        return record.new_record(value=flat, value_schema=None, headers=headers)
