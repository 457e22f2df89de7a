"""TimestampConverter: convert a timestamp (the whole key/value, or its `field`) between `string` (a
SimpleDateFormat `format`, UTC), `unix` (a number in `unix.precision`), and Connect's `Date`, `Time` and
`Timestamp` logical types (ints: days, ms since midnight, ms since the epoch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moldau.connect.api import ConnectRecord
from moldau.connect.config import ConfigDef, ConfigType, Importance, ValidString
from moldau.connect.data import DATE_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Struct, Type
from moldau.connect.errors import ConfigException, DataException
from moldau.connect.transforms import java_time_format as jtf
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

TYPES = ("string", "unix", "Date", "Time", "Timestamp")
DAY_MS = 86_400_000
PRECISION_PER_MS = {"seconds": (1, 1000), "milliseconds": (1, 1), "microseconds": (1000, 1),
                    "nanoseconds": (1_000_000, 1)}  # (units per ms, ms per unit)


def _target(name: str, value: Any) -> None:
    if value not in TYPES:
        raise ConfigException(name, value, f"Unknown timestamp type in TimestampConverter: {value}. Valid values "
                                           f"are {', '.join(TYPES)}.")


CONFIG_DEF = (
    ConfigDef()
    .define("field", ConfigType.STRING, "", Importance.HIGH,
            "The field containing the timestamp, or empty if the entire value is a timestamp")
    .define("target.type", ConfigType.STRING, importance=Importance.HIGH,
            documentation="The desired timestamp representation: string, unix, Date, Time, or Timestamp",
            validator=_target)
    .define("format", ConfigType.STRING, "", Importance.MEDIUM,
            "A SimpleDateFormat-compatible format for the timestamp. Used to generate the output when "
            "type=string or used to parse the input if the input is a string.")
    .define("unix.precision", ConfigType.STRING, "milliseconds", Importance.LOW,
            "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds.",
            validator=ValidString(tuple(PRECISION_PER_MS)))
)

_SCHEMAS = {
    "string": (Type.STRING, None), "unix": (Type.INT64, None), "Date": (Type.INT32, DATE_NAME),
    "Time": (Type.INT32, TIME_NAME), "Timestamp": (Type.INT64, TIMESTAMP_NAME),
}


def schema_for(target: str, optional: bool) -> Schema:
    type_, name = _SCHEMAS[target]
    return Schema(type_, optional=optional, name=name, version=1 if name else None)


def type_of_schema(schema: Schema) -> str:
    by_name = {TIMESTAMP_NAME: "Timestamp", DATE_NAME: "Date", TIME_NAME: "Time"}
    if schema.name in by_name:
        return by_name[schema.name]
    if schema.type is Type.STRING:
        return "string"
    if schema.type is Type.INT64:
        return "unix"
    raise DataException(f"Schema {schema.type.value} does not correspond to a known timestamp type format")


def type_of_value(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, int) and not isinstance(value, bool):
        return "unix"
    raise DataException(f"TimestampConverter does not support {type(value).__name__} objects as timestamps")


class TimestampConverter(PartTransform):
    """Kafka's TimestampConverter; use the `$Key`/`$Value` classes."""

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def setup(self, parsed: Mapping[str, Any]) -> None:
        self.field: str = parsed["field"]
        self.target: str = parsed["target.type"]
        self.units_per_ms, self.ms_per_unit = PRECISION_PER_MS[parsed["unix.precision"]]
        self.pattern: tuple[jtf.Token, ...] | None = None
        if parsed["format"]:
            try:
                self.pattern = jtf.compile_pattern(parsed["format"])
            except jtf.PatternError as e:
                raise ConfigException("format", parsed["format"], "TimestampConverter requires a "
                                      f"SimpleDateFormat-compatible pattern for string timestamps: {e}") from None
        elif self.target == "string":
            raise ConfigException("format", "", "TimestampConverter requires format option to be specified when "
                                                "using string timestamps")

    def to_millis(self, value: Any, source: str) -> int:
        if source == "string":
            if self.pattern is None:
                raise DataException("TimestampConverter requires format option to be specified when using string "
                                    "timestamps")
            try:
                return jtf.parse_millis(self.pattern, value)
            except ValueError as e:
                raise DataException(f"Could not parse timestamp: value ({value}) does not match pattern: {e}") \
                    from None
        if source == "unix":
            return int(value) * self.ms_per_unit // self.units_per_ms
        if source == "Date":
            return int(value) * DAY_MS
        return int(value)

    def from_millis(self, millis: int) -> Any:
        if self.target == "string":
            assert self.pattern is not None
            return jtf.format_millis(self.pattern, millis)
        if self.target == "unix":
            return millis * self.units_per_ms // self.ms_per_unit
        if self.target == "Date":
            return millis // DAY_MS
        if self.target == "Time":
            return millis % DAY_MS
        return millis

    def convert(self, value: Any, source: str) -> Any:
        return None if value is None else self.from_millis(self.to_millis(value, source))

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if not self.field:
            if schema is None:
                return self.new_record(record, None, None if value is None else
                                       self.convert(value, type_of_value(value)))
            return self.new_record(record, schema_for(self.target, schema.optional),
                                   self.convert(value, type_of_schema(schema)))
        if value is None:
            return record
        if schema is None:
            updated = require_map(value, "converting timestamp formats")
            if updated.get(self.field) is not None:
                updated[self.field] = self.convert(updated[self.field], type_of_value(updated[self.field]))
            return self.new_record(record, None, updated)
        return self._apply_struct(record, schema, require_struct(value, "converting timestamp formats"))

    def _apply_struct(self, record: ConnectRecord, schema: Schema, struct: Struct) -> ConnectRecord:
        field = schema.field(self.field)
        if field is None:
            raise DataException(f"{self.field} is not a valid field name")
        source = type_of_schema(field.schema)
        new_fields = [(name, schema_for(self.target, s.optional) if name == self.field else s)
                      for name, s in fields_of(schema)]
        new_schema = struct_like(schema, new_fields)
        values = struct.to_dict()
        values[self.field] = self.convert(values[self.field], source)
        return self.new_record(record, new_schema, Struct(new_schema, values))


class TimestampConverterKey(Key, TimestampConverter):
    aliases = (KAFKA + "TimestampConverter$Key", "TimestampConverter$Key")


class TimestampConverterValue(Value, TimestampConverter):
    aliases = (KAFKA + "TimestampConverter$Value", "TimestampConverter$Value")
