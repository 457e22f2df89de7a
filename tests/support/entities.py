"""Random but schema-valid kio entities, for tests that need every request and response shape.

`random_entity(cls, rng)` fills each field of a kio dataclass by its `kafka_type`: small random numbers,
short strings, short arrays, and None now and then where the schema allows null. `schemas()` lists every
(api key, version) that kio knows, with its request and response classes.
"""

from __future__ import annotations

import datetime
import random
import uuid
from collections.abc import Iterator
from dataclasses import Field, fields
from typing import Any

from kio.index import UnknownEntity
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from moldau.protocol import codec
from moldau.protocol.body_check import nullable_array

_INT_RANGES = {
    "int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 255), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def schemas() -> Iterator[codec.ApiSchema]:
    """Every (api key, version) kio has classes for."""
    from kio.schema.index import api_key_map

    for api_key in sorted(api_key_map):
        for version in range(0, 30):
            try:
                yield codec.api_schema(api_key, version)
            except (KeyError, ModuleNotFoundError, ImportError, UnknownEntity):
                continue


def random_entity(entity_type: Any, rng: random.Random, depth: int = 0) -> Any:
    values: dict[str, Any] = {}
    for field in fields(entity_type):
        values[field.name] = _value(field, rng, depth, is_tag=get_field_tag(field) is not None)
    return entity_type(**values)


def _value(field: Field[Any], rng: random.Random, depth: int, is_tag: bool) -> Any:
    kind = classify_field(field)
    nullable = nullable_array(field) if kind.is_array else is_optional(field) and not is_tag
    if nullable and rng.random() < 0.2:
        return None
    count = rng.randint(0, 3 if depth < 2 else 1)
    match kind:
        case PrimitiveField():
            return _primitive(get_schema_field_type(field), rng)
        case PrimitiveTupleField():
            return tuple(_primitive(get_schema_field_type(field), rng) for _ in range(count))
        case EntityField(nested):
            return random_entity(nested, rng, depth + 1)
        case EntityTupleField(nested):
            return tuple(random_entity(nested, rng, depth + 1) for _ in range(count))
    raise TypeError(field)


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    if kafka_type in _INT_RANGES:
        low, high = _INT_RANGES[kafka_type]
        return rng.choice([0, 1, -1 if low < 0 else 2, low, high, rng.randint(low, high)])
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "string":
            return "".join(rng.choice("abcxyz-._é") for _ in range(rng.randint(0, 12)))
        case "bytes" | "records":
            return rng.randbytes(rng.randint(0, 24))
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        case "float64":
            return rng.random()
        case "timedelta_i32" | "timedelta_i64":
            # Short: timeouts and long-poll waits of random requests must not hold a test up.
            return datetime.timedelta(milliseconds=rng.choice([0, 1, 50, 200]))
        case "datetime_i64":
            return datetime.datetime.fromtimestamp(rng.randint(0, 2**31), datetime.UTC)
        case "error_code":
            from kio.schema.errors import ErrorCode

            return rng.choice(list(ErrorCode))
    raise TypeError(kafka_type)
