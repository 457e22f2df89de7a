"""Flatten: nested Structs (or maps, without a schema) become top-level fields named by joining the path with
`delimiter` (default "."). Arrays and maps inside a Struct are kept as they are; fields under an optional
struct become optional."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import Schema, Struct, Type
from moldau.connect.transforms.parts import KAFKA, Key, PartTransform, Value, require_map, require_struct, struct_like

CONFIG_DEF = ConfigDef().define(
    "delimiter", ConfigType.STRING, ".", Importance.MEDIUM,
    "Delimiter to insert between field names from the input record when generating field names for the output "
    "record")


class Flatten(PartTransform):
    """Kafka's Flatten; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.delimiter: str = parsed["delimiter"]

    def _name(self, prefix: str, name: str) -> str:
        return f"{prefix}{self.delimiter}{name}" if prefix else name

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            flat: dict[str, Any] = {}
            self._flatten_map("", require_map(value, "flattening"), flat)
            return self.new_record(record, None, flat)
        struct = require_struct(value, "flattening")
        fields: list[tuple[str, Schema]] = []
        values: dict[str, Any] = {}
        self._flatten_struct("", schema, struct, False, fields, values)
        new_schema = struct_like(schema, fields)
        return self.new_record(record, new_schema, Struct(new_schema, values))

    def _flatten_map(self, prefix: str, source: Mapping[str, Any], out: dict[str, Any]) -> None:
        for key, item in source.items():
            if isinstance(item, Mapping):
                self._flatten_map(self._name(prefix, str(key)), item, out)
            else:
                out[self._name(prefix, str(key))] = item

    def _flatten_struct(self, prefix: str, schema: Schema, struct: Struct | None, optional: bool,
                        fields: list[tuple[str, Schema]], values: dict[str, Any]) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            item = None if struct is None else struct.get(field.name)
            if field.schema.type is Type.STRUCT:
                self._flatten_struct(name, field.schema, item, optional or field.schema.optional, fields, values)
                continue
            field_schema = field.schema
            if optional and not field_schema.optional:
                field_schema = Schema(**{**field_schema.__dict__, "optional": True})
            fields.append((name, field_schema))
            values[name] = item


class FlattenKey(Key, Flatten):
    aliases = (KAFKA + "Flatten$Key", "Flatten$Key")


class FlattenValue(Value, Flatten):
    aliases = (KAFKA + "Flatten$Value", "Flatten$Value")
