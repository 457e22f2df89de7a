"""MaskField: replace the listed fields' values with their type's empty value (0, false, "", empty bytes,
list or map), or with `replacement` parsed as the field's type (numbers and strings only)."""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import DECIMAL_NAME, Schema, Struct, Type
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.parts import KAFKA, Key, PartTransform, Value, require_map, require_struct

PURPOSE = "masking fields"


def _non_empty(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(name, value, "Empty list")


CONFIG_DEF = (
    ConfigDef()
    .define("fields", ConfigType.LIST, importance=Importance.HIGH, documentation="Names of fields to mask.",
            validator=_non_empty)
    .define("replacement", ConfigType.STRING, None, Importance.LOW,
            "Custom value replacement, applied to all 'fields' values (numeric or non-empty string values only).")
)

_EMPTY: dict[Type, Any] = {
    Type.INT8: 0, Type.INT16: 0, Type.INT32: 0, Type.INT64: 0, Type.FLOAT32: 0.0, Type.FLOAT64: 0.0,
    Type.BOOLEAN: False, Type.STRING: "", Type.BYTES: b"", Type.ARRAY: [], Type.MAP: {},
}


def _empty_for_value(value: Any) -> Any:
    if isinstance(value, bool):
        return False
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    for kind, empty in ((int, 0), (float, 0.0), (str, ""), (bytes, b""), (list, []), (dict, {})):
        if isinstance(value, kind):
            return empty
    raise DataException(f"Cannot mask value of type: {type(value).__name__}")


def _replacement_like(value: Any, replacement: str) -> Any:
    """`replacement` as the type of `value` (Kafka allows numbers and strings)."""
    try:
        if isinstance(value, bool):
            raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")
        if isinstance(value, str):
            return replacement
        if isinstance(value, int):
            return int(replacement)
        if isinstance(value, float):
            return float(replacement)
        if isinstance(value, decimal.Decimal):
            return decimal.Decimal(replacement)
    except (ValueError, decimal.InvalidOperation):
        raise DataException(f"Unable to convert {replacement} (str) to number") from None
    raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")


class MaskField(PartTransform):
    """Kafka's MaskField; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.fields = list(parsed["fields"])
        self.replacement: str | None = parsed["replacement"]

    def _mask(self, value: Any, schema: Schema | None) -> Any:
        if value is None:
            return None
        if self.replacement is not None:
            return _replacement_like(value, self.replacement)
        if schema is not None and schema.name == DECIMAL_NAME:
            return decimal.Decimal(0)
        if schema is not None and schema.type is not Type.STRUCT:
            return _EMPTY[schema.type]
        return _empty_for_value(value)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = require_map(value, PURPOSE)
            for name in self.fields:
                if name in updated:
                    updated[name] = self._mask(updated[name], None)
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        values = struct.to_dict()
        for name in self.fields:
            field = schema.field(name)
            if field is None:
                raise DataException(f"{name} is not a valid field name")
            values[name] = self._mask(values[name], field.schema)
        return self.new_record(record, schema, Struct(schema, values))


class MaskFieldKey(Key, MaskField):
    aliases = (KAFKA + "MaskField$Key", "MaskField$Key")


class MaskFieldValue(Value, MaskField):
    aliases = (KAFKA + "MaskField$Value", "MaskField$Value")
