"""Debezium's ExtractNewRecordState (`io.debezium.transforms.ExtractNewRecordState`): turns a Debezium change
event envelope (`before`, `after`, `source`, `op`, `ts_ms`) into the row it leaves, so sinks that expect plain
rows (such as the JDBC sink) can consume change events.

With Debezium's option names and defaults:
- `drop.tombstones` (default true): drop the tombstones that follow deletes; false passes them on (the JDBC
  sink with `delete.enabled=true` deletes rows on them).
- `delete.handling.mode` (default `drop`): what a delete event becomes: `drop` (nothing), `none` (a record with
  a null value, the `after` schema), or `rewrite` (the `before` row with `__deleted` = "true"; other rows then
  carry `__deleted` = "false").
- `add.fields` / `add.fields.prefix` (default `__`) and `add.headers` / `add.headers.prefix`: copy envelope
  fields (`op`, `ts_ms`) or source fields (`table`, `lsn`, ..., or `source.x` explicitly) into the row or the
  headers, as `<prefix><name>` with dots turned into underscores.

Records that are not envelopes (schema name not ending in `.Envelope`) pass unchanged; so do records without a
schema. A change event without an `after` that is not a delete (a truncate) is dropped: it has no row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.connect.api import ConnectRecord, Header, Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance, ValidString
from moldau.connect.data import OPTIONAL_STRING_SCHEMA, Schema, Struct, Type
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.parts import fields_of, struct_like

__all__ = ["ExtractNewRecordState"]

DELETED_FIELD = "__deleted"
ENVELOPE_SUFFIX = ".Envelope"
DELETE_MODES = ("drop", "rewrite", "none")

CONFIG_DEF = (
    ConfigDef()
    .define("drop.tombstones", ConfigType.BOOLEAN, True, Importance.LOW,
            "Drop tombstone records (true) or pass them on (false).")
    .define("delete.handling.mode", ConfigType.STRING, "drop", Importance.MEDIUM,
            "What a delete event becomes: drop, none (a null value) or rewrite (the old row with __deleted).",
            validator=ValidString(DELETE_MODES, case_sensitive=False))
    .define("add.fields", ConfigType.LIST, "", Importance.LOW,
            "Envelope or source fields to add to the row (op, ts_ms, table, lsn, source.ts_ms, ...).")
    .define("add.fields.prefix", ConfigType.STRING, "__", Importance.LOW, "Prefix of the added fields' names.")
    .define("add.headers", ConfigType.LIST, "", Importance.LOW,
            "Envelope or source fields to add as headers.")
    .define("add.headers.prefix", ConfigType.STRING, "__", Importance.LOW, "Prefix of the added headers' names.")
)


@dataclass(frozen=True)
class FieldRef:
    """An envelope field (`op`) or a field of a struct in it (`source.lsn`), and the name it is added as."""

    struct: str | None
    field: str
    added_as: str

    @classmethod
    def parse(cls, spec: str, prefix: str) -> FieldRef:
        parts = spec.split(".")
        if len(parts) > 2 or not all(parts):
            raise ConfigException("add.fields", spec, "expected a field name or struct.field")
        struct, field = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
        return cls(struct, field, prefix + spec.replace(".", "_"))

    def locate(self, envelope_schema: Schema) -> tuple[str | None, Schema]:
        """(the struct field holding the value, or None for a top-level one; the value's schema)."""
        if self.struct is None and envelope_schema.field(self.field) is not None:
            found = envelope_schema.field(self.field)
            assert found is not None
            return None, found.schema
        holder = envelope_schema.field(self.struct or "source")
        inner = holder.schema.field(self.field) if holder and holder.schema.type is Type.STRUCT else None
        if holder is None or inner is None:
            raise DataException(f"ExtractNewRecordState: the envelope has no field {self.struct or 'source'}."
                                f"{self.field}")
        return holder.name, inner.schema

    def value(self, envelope: Struct) -> tuple[Schema, Any]:
        holder, schema = self.locate(envelope.schema)
        if holder is None:
            return schema, envelope.get(self.field)
        outer = envelope.get(holder)
        return schema, outer.get(self.field) if isinstance(outer, Struct) else None


class ExtractNewRecordState(Transformation[ConnectRecord]):
    aliases = ("io.debezium.transforms.ExtractNewRecordState",)

    def __init__(self) -> None:
        self.drop_tombstones = True
        self.delete_mode = "drop"
        self.add_fields: list[FieldRef] = []
        self.add_headers: list[FieldRef] = []
        self._schemas: dict[tuple[Schema, Schema], Schema] = {}

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any]) -> None:
        parsed = CONFIG_DEF.parse(configs)
        self.drop_tombstones = parsed["drop.tombstones"]
        self.delete_mode = parsed["delete.handling.mode"].lower()
        self.add_fields = [FieldRef.parse(s, parsed["add.fields.prefix"]) for s in parsed["add.fields"]]
        self.add_headers = [FieldRef.parse(s, parsed["add.headers.prefix"]) for s in parsed["add.headers"]]

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value is None:
            return None if self.drop_tombstones else record
        schema = record.value_schema
        if schema is None or schema.type is not Type.STRUCT or not (schema.name or "").endswith(ENVELOPE_SUFFIX) \
                or not isinstance(record.value, Struct):
            return record
        envelope = record.value
        headers = (*record.headers, *self._headers(envelope))
        after = envelope.get("after")
        if after is None:
            return self._without_after(record, envelope, headers)
        return self._row(record, envelope, after, "false", headers)

    def _without_after(self, record: ConnectRecord, envelope: Struct,
                       headers: tuple[Header, ...]) -> ConnectRecord | None:
        if envelope.get("op") != "d" or self.delete_mode == "drop":
            return None
        if self.delete_mode == "none":
            after_field = envelope.schema.field("after")
            return record.new_record(value_schema=after_field.schema if after_field else None, value=None,
                                     headers=headers)
        before = envelope.get("before")
        if not isinstance(before, Struct):
            return None  # a delete without the old row (REPLICA IDENTITY without it) has nothing to rewrite
        return self._row(record, envelope, before, "true", headers)

    def _row(self, record: ConnectRecord, envelope: Struct, row: Struct, deleted: str,
             headers: tuple[Header, ...]) -> ConnectRecord:
        additions = [(ref.added_as, *ref.value(envelope)) for ref in self.add_fields]
        if self.delete_mode == "rewrite":
            additions.append((DELETED_FIELD, OPTIONAL_STRING_SCHEMA, deleted))
        if not additions:
            return record.new_record(value_schema=row.schema, value=row, headers=headers)
        schema = self._extended_schema(row.schema, envelope.schema, additions)
        values = {**{name: row.get(name) for name in row.schema.field_names()},
                  **{name: value for name, _, value in additions}}
        return record.new_record(value_schema=schema, value=Struct(schema, values), headers=headers)

    def _extended_schema(self, row_schema: Schema, envelope_schema: Schema,
                         additions: list[tuple[str, Schema, Any]]) -> Schema:
        cached = self._schemas.get((row_schema, envelope_schema))
        if cached is None:
            extra = [(name, _optional(schema)) for name, schema, _ in additions]
            cached = struct_like(row_schema, fields_of(row_schema) + extra)
            self._schemas[(row_schema, envelope_schema)] = cached
        return cached

    def _headers(self, envelope: Struct) -> list[Header]:
        headers = []
        for ref in self.add_headers:
            schema, value = ref.value(envelope)
            headers.append(Header(ref.added_as, value, _optional(schema)))
        return headers


def _optional(schema: Schema) -> Schema:
    """`schema`, optional: added fields are null where the envelope has no value for them."""
    if schema.optional:
        return schema
    return Schema(schema.type, True, schema.default, schema.name, schema.version, schema.doc, schema.parameters,
                  schema.fields, schema.key_schema, schema.value_schema)
