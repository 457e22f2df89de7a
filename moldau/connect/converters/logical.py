"""Connect's Decimal logical type on the wire: the unscaled value as big-endian two's-complement bytes (as
Java's BigInteger writes it), with the scale in the schema's `scale` parameter. Date, Time and Timestamp
values are their physical ints in Moldau's data model (days, ms since midnight, ms since the epoch), so they
need no conversion."""

from __future__ import annotations

import decimal

from moldau.connect.data import DECIMAL_NAME, Schema, Type
from moldau.connect.errors import DataException

SCALE = "scale"


def scale_of(schema: Schema) -> int:
    params = schema.parameters or {}
    if SCALE not in params:
        raise DataException("Invalid Decimal schema: scale parameter not found.")
    return int(params[SCALE])


def is_decimal(schema: Schema | None) -> bool:
    return schema is not None and schema.name == DECIMAL_NAME


def decimal_to_bytes(schema: Schema, value: decimal.Decimal) -> bytes:
    unscaled = int(value.scaleb(scale_of(schema)).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_bytes(schema: Schema, data: bytes) -> decimal.Decimal:
    return decimal.Decimal(int.from_bytes(data, "big", signed=True)).scaleb(-scale_of(schema))


def decimal_schema(scale: int, optional: bool = False) -> Schema:
    """Kafka's `Decimal.schema(scale)`."""
    return Schema(type=Type.BYTES, optional=optional, name=DECIMAL_NAME, version=1,
                  parameters={SCALE: str(scale)})

