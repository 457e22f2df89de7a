"""PostgreSQL column types as Connect schemas with Debezium's semantic names, and column values (in
PostgreSQL's text format, as pgoutput and the snapshot's `::text` casts give them) as Connect values.

Values are parsed from text with the session settings `TimeZone=UTC` and `DateStyle=ISO`. Types without a
mapping here (enums, arrays, geometric types...) are written as their text form in a STRING.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from moldau.connect.data import DECIMAL_NAME, Schema, SchemaBuilder, Struct, Type

__all__ = ["UNAVAILABLE_VALUE", "ColumnType", "column_type"]

UNAVAILABLE_VALUE = "__debezium_unavailable_value"  # Debezium's placeholder for an unchanged TOASTed value

MICRO_TIMESTAMP = "io.debezium.time.MicroTimestamp"
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
MICRO_TIME = "io.debezium.time.MicroTime"
ZONED_TIME = "io.debezium.time.ZonedTime"
DATE = "io.debezium.time.Date"
JSON = "io.debezium.data.Json"
UUID = "io.debezium.data.Uuid"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ColumnType:
    """How one column is written: its schema (with optionality) and a parser of its text form."""

    schema: Schema
    parse: Callable[[str], Any]
    toastable: bool  # a value that may arrive as "unchanged TOAST" and then gets the placeholder

    def placeholder(self) -> Any:
        if self.schema.type is Type.STRING:
            return UNAVAILABLE_VALUE
        if self.schema.type is Type.BYTES and self.schema.name is None:
            return UNAVAILABLE_VALUE.encode()
        return None


def _schema(type_: Type, optional: bool, name: str | None = None, **params: str) -> Schema:
    builder = SchemaBuilder.of(type_)
    if name:
        builder.name(name).version(1)
    for key, value in params.items():
        builder.parameter(key, value)
    if optional:
        builder.optional()
    return builder.build()


def _parse_bool(text: str) -> bool:
    return text in ("t", "true")


def _parse_bytea(text: str) -> bytes:
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    raise ValueError("bytea values must use bytea_output=hex")


def _parse_micro_timestamp(text: str) -> int:
    if text in ("infinity", "-infinity"):
        return (1 << 63) - 1 if text == "infinity" else -(1 << 63)
    moment = datetime.fromisoformat(text).replace(tzinfo=UTC)
    return _micros(moment - _EPOCH)


def _parse_zoned_timestamp(text: str) -> str:
    if text in ("infinity", "-infinity"):
        return text
    moment = datetime.fromisoformat(text).astimezone(UTC)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z").replace(".000000Z", "Z")


def _parse_date(text: str) -> int:
    return (date.fromisoformat(text) - _EPOCH_DATE).days


def _parse_micro_time(text: str) -> int:
    if text.startswith("24:00"):
        return 24 * 3600 * 1_000_000
    moment = time.fromisoformat(text)
    return ((moment.hour * 60 + moment.minute) * 60 + moment.second) * 1_000_000 + moment.microsecond


def _micros(delta: Any) -> int:
    return int(delta.days * 86_400_000_000 + delta.seconds * 1_000_000 + delta.microseconds)


def _parse_json(text: str) -> str:
    json.loads(text)  # pgoutput gives valid JSON; a failure here means a decoding bug, not bad data
    return text


def _numeric_type(type_modifier: int, mode: str, optional: bool) -> ColumnType:
    if mode == "string":
        return ColumnType(_schema(Type.STRING, optional), str, True)
    if mode == "double":
        return ColumnType(_schema(Type.FLOAT64, optional), float, True)
    if type_modifier >= 4:  # numeric(p, s): typmod = ((p << 16) | s) + 4
        precision, scale = (type_modifier - 4) >> 16, (type_modifier - 4) & 0xFFFF
        schema = (SchemaBuilder.of(Type.BYTES).name(DECIMAL_NAME).version(1).parameter("scale", str(scale))
                  .parameter("connect.decimal.precision", str(precision)))
        if optional:
            schema.optional()
        quantum = decimal.Decimal(1).scaleb(-scale)
        return ColumnType(schema.build(), lambda t: decimal.Decimal(t).quantize(quantum), True)
    # An unconstrained numeric has no fixed scale: Debezium's VariableScaleDecimal {scale, value}.
    variable = (SchemaBuilder.struct().name(VARIABLE_SCALE_DECIMAL).version(1)
                .doc("Variable scaled decimal")
                .field("scale", _schema(Type.INT32, False)).field("value", _schema(Type.BYTES, False)))
    if optional:
        variable.optional()
    built = variable.build()
    return ColumnType(built, lambda t: _variable_scale(built, t), True)


def _variable_scale(schema: Schema, text: str) -> Any:
    if text == "NaN":
        raise ValueError("NaN has no decimal representation")
    number = decimal.Decimal(text)
    sign, digits, exponent = number.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    size = max(1, (unscaled.bit_length() + 8) // 8)
    return Struct(schema, {"scale": -exponent, "value": unscaled.to_bytes(size, "big", signed=True)})


_SIMPLE: dict[int, tuple[Type, str | None, Callable[[str], Any], bool]] = {
    16: (Type.BOOLEAN, None, _parse_bool, False),
    21: (Type.INT16, None, int, False),
    23: (Type.INT32, None, int, False),
    20: (Type.INT64, None, int, False),
    26: (Type.INT64, None, int, False),  # oid
    700: (Type.FLOAT32, None, float, False),
    701: (Type.FLOAT64, None, float, False),
    25: (Type.STRING, None, str, True),  # text
    1043: (Type.STRING, None, str, True),  # varchar
    1042: (Type.STRING, None, str, True),  # bpchar
    19: (Type.STRING, None, str, False),  # name
    17: (Type.BYTES, None, _parse_bytea, True),
    1114: (Type.INT64, MICRO_TIMESTAMP, _parse_micro_timestamp, False),
    1184: (Type.STRING, ZONED_TIMESTAMP, _parse_zoned_timestamp, False),
    1082: (Type.INT32, DATE, _parse_date, False),
    1083: (Type.INT64, MICRO_TIME, _parse_micro_time, False),
    114: (Type.STRING, JSON, _parse_json, True),
    3802: (Type.STRING, JSON, _parse_json, True),
    2950: (Type.STRING, UUID, str, False),
}


def column_type(type_oid: int, type_modifier: int, optional: bool, decimal_mode: str = "precise") -> ColumnType:
    """The Connect mapping of a column of type `type_oid` (with its `atttypmod`)."""
    if type_oid == 1700:
        return _numeric_type(type_modifier, decimal_mode, optional)
    simple = _SIMPLE.get(type_oid)
    if simple is None:
        return ColumnType(_schema(Type.STRING, optional), str, True)
    type_, name, parse, toastable = simple
    return ColumnType(_schema(type_, optional, name), parse, toastable)
