"""A record's column values, as psycopg2 parameters: Connect values become the Python values psycopg2 sends
as the column's type (dates, times, timestamps in `db.timezone`, decimals, bytes, lists). Pure: no I/O."""

from __future__ import annotations

import datetime
import decimal
import zoneinfo
from typing import Any

from moldau.connect.api import SinkRecord
from moldau.connect.connectors.jdbc_sink.config import PkMode
from moldau.connect.connectors.jdbc_sink.fields import FieldsMetadata
from moldau.connect.converters.logical import decimal_from_bytes
from moldau.connect.data import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Schema, Struct, Type
from moldau.connect.errors import DataException

__all__ = ["RowConverter"]

EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MIDNIGHT = datetime.datetime(2000, 1, 1)
# Per schema name: the unit of the int and whether it is a date, a time of day or an instant.
_TEMPORAL: dict[str, tuple[str, int]] = {
    DATE_NAME: ("date", 1), "io.debezium.time.Date": ("date", 1),
    TIME_NAME: ("time", 1_000), "io.debezium.time.Time": ("time", 1_000),
    "io.debezium.time.MicroTime": ("time", 1_000_000), "io.debezium.time.NanoTime": ("time", 1_000_000_000),
    TIMESTAMP_NAME: ("timestamp", 1_000), "io.debezium.time.Timestamp": ("timestamp", 1_000),
    "io.debezium.time.MicroTimestamp": ("timestamp", 1_000_000),
    "io.debezium.time.NanoTimestamp": ("timestamp", 1_000_000_000),
}


class RowConverter:
    """Turns records into (key values, other values) tuples for their `FieldsMetadata`."""

    def __init__(self, pk_mode: PkMode, db_timezone: str = "UTC") -> None:
        self.pk_mode = pk_mode
        try:
            self.timezone = zoneinfo.ZoneInfo(db_timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise DataException(f"db.timezone {db_timezone!r} is not a known time zone") from None

    def key(self, record: SinkRecord, fields: FieldsMetadata) -> tuple[Any, ...]:
        if self.pk_mode is PkMode.KAFKA:
            return record.topic, record.kafka_partition, record.kafka_offset
        if self.pk_mode is PkMode.RECORD_KEY:
            if isinstance(record.key, Struct):
                return tuple(self.sql_value(c.schema, record.key.get(c.name)) for c in fields.keys)
            return tuple(self.sql_value(c.schema, record.key) for c in fields.keys)
        if self.pk_mode is PkMode.RECORD_VALUE:
            return tuple(self.sql_value(c.schema, _struct(record).get(c.name)) for c in fields.keys)
        return ()

    def values(self, record: SinkRecord, fields: FieldsMetadata) -> tuple[Any, ...]:
        value = _struct(record)
        return tuple(self.sql_value(c.schema, value.get(c.name)) for c in fields.values)

    def sql_value(self, schema: Schema, value: Any) -> Any:
        """`value` (of `schema`) as the parameter psycopg2 sends for its column."""
        if value is None:
            return None
        if schema.name in _TEMPORAL:
            kind, per_second = _TEMPORAL[schema.name]
            return self._temporal(kind, per_second, value)
        if schema.name == DECIMAL_NAME:
            return value if isinstance(value, decimal.Decimal) else decimal_from_bytes(schema, bytes(value))
        if schema.type is Type.BYTES:
            return bytes(value)
        if schema.type is Type.ARRAY:
            element = schema.value_schema
            return [self.sql_value(element, item) if element is not None else item for item in value]
        if schema.type in (Type.STRUCT, Type.MAP):
            raise DataException(f"a {schema.type.value} value has no column type; flatten it first "
                                "(the Flatten transform)")
        return value

    def _temporal(self, kind: str, per_second: int, value: Any) -> Any:
        if isinstance(value, (datetime.date, datetime.time)):
            return value
        if not isinstance(value, int):
            raise DataException(f"a {kind} needs an int, not {type(value).__name__}")
        if kind == "date":
            return EPOCH_DATE + datetime.timedelta(days=value)
        seconds, fraction = divmod(value, per_second)
        delta = datetime.timedelta(seconds=seconds, microseconds=fraction * 1_000_000 // per_second)
        if kind == "time":
            return (MIDNIGHT + delta).time()
        return (EPOCH + delta).astimezone(self.timezone).replace(tzinfo=None)


def _struct(record: SinkRecord) -> Struct:
    if not isinstance(record.value, Struct):
        raise DataException(f"the value at (topic='{record.topic}', partition={record.kafka_partition}, offset="
                            f"{record.kafka_offset}) is a {type(record.value).__name__}, not a Struct")
    return record.value
