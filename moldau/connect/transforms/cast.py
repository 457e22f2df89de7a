"""Cast: change the type of the whole key/value (`spec=int64`) or of fields (`spec=a:int32,b:string`) among
Connect's primitive types: int8..int64, float32, float64, boolean, string."""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import DECIMAL_NAME, Schema, Struct, Type
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms.parts import (
    KAFKA,
    Key,
    PartTransform,
    Value,
    fields_of,
    require_map,
    require_struct,
    struct_like,
)

WHOLE = ""  # the spec's key for casting the whole value
TARGETS = {name: t for name, t in (
    ("int8", Type.INT8), ("int16", Type.INT16), ("int32", Type.INT32), ("int64", Type.INT64),
    ("float32", Type.FLOAT32), ("float64", Type.FLOAT64), ("boolean", Type.BOOLEAN), ("string", Type.STRING))}
_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


def parse_spec(name: str, value: Any) -> dict[str, Type]:
    """`int64` (the whole value) or `field:type,...` as {field (or "" for the whole value): type}."""
    items = value or []
    if not items:
        raise ConfigException(name, value, "Must specify at least one field to cast.")
    spec: dict[str, Type] = {}
    for item in items:
        parts = item.split(":")
        if len(parts) == 1 and len(items) == 1:
            field, type_name = WHOLE, parts[0]
        elif len(parts) == 2:
            field, type_name = parts
        else:
            raise ConfigException(name, value, "Invalid cast mapping: " + item)
        if type_name.strip().lower() not in TARGETS:
            raise ConfigException(name, value, "Invalid type found in casting: " + type_name)
        spec[field.strip()] = TARGETS[type_name.strip().lower()]
    return spec


def _valid_spec(name: str, value: Any) -> None:
    parse_spec(name, value)


CONFIG_DEF = ConfigDef().define(
    "spec", ConfigType.LIST, importance=Importance.HIGH,
    documentation="List of fields and the type to cast them to of the form field1:type,field2:type to cast "
                  "fields of Maps or Structs. A single type to cast the entire value.",
    validator=_valid_spec)


def _wrap_int(number: int, target: Type) -> int:
    # Java's narrowing conversions keep the low bits; Kafka's Cast inherits that.
    bits = _BITS[target]
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >= 1 << (bits - 1) else number


def cast_value(value: Any, target: Type) -> Any:
    """`value` (a number, boolean, string or Decimal) as `target`, as Kafka's Cast converts it."""
    if value is None:
        return None
    if target is Type.STRING:
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    if isinstance(value, str):
        return _parse(value, target)
    if not isinstance(value, bool | int | float | decimal.Decimal):
        raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")
    if target is Type.BOOLEAN:
        return value != 0
    number = int(value) if isinstance(value, bool) else value
    if target in _BITS:
        if isinstance(number, float) and not math.isfinite(number):
            raise DataException(f"Cannot cast {number} to {target.value}")
        return _wrap_int(int(number), target)
    return float(number)


def _parse(text: str, target: Type) -> Any:
    try:
        if target is Type.BOOLEAN:
            return text.strip().lower() == "true"
        if target in _BITS:
            number = int(text.strip())
            if _wrap_int(number, target) != number:
                raise ValueError("out of range")
            return number
        return float(text.strip())
    except ValueError:
        raise DataException(f"Value ({text}) was out of range for requested data type or not a number") from None


def _check_castable(schema: Schema, field: str) -> None:
    if schema.type not in TARGETS.values() and schema.name != DECIMAL_NAME:
        where = f" for field {field}" if field else ""
        raise DataException(f"Cast transformation does not support casting from {schema.type.name}{where}")


class Cast(PartTransform):
    """Kafka's Cast; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.spec = parse_spec("spec", parsed["spec"])

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if WHOLE in self.spec:
            target = self.spec[WHOLE]
            if schema is not None:
                _check_castable(schema, "")
                schema = Schema(target, optional=schema.optional)
            return self.new_record(record, schema, cast_value(value, target))
        if value is None:
            return record
        if schema is None:
            updated = require_map(value, "cast types")
            for name, target in self.spec.items():
                if name in updated:
                    updated[name] = cast_value(updated[name], target)
            return self.new_record(record, None, updated)
        struct = require_struct(value, "cast types")
        new_fields = []
        for name, field_schema in fields_of(schema):
            if name in self.spec:
                _check_castable(field_schema, name)
                field_schema = Schema(self.spec[name], optional=field_schema.optional)
            new_fields.append((name, field_schema))
        new_schema = struct_like(schema, new_fields)
        values = {name: cast_value(struct.get(name), self.spec[name]) if name in self.spec else struct.get(name)
                  for name, _ in new_fields}
        return self.new_record(record, new_schema, Struct(new_schema, values))


class CastKey(Key, Cast):
    aliases = (KAFKA + "Cast$Key", "Cast$Key")


class CastValue(Value, Cast):
    aliases = (KAFKA + "Cast$Value", "Cast$Value")
