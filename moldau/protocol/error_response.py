"""A response that carries only an error code, for requests whose body could not be read.

When a request's header is sound but its body breaks the schema (`codec.MalformedBody`), the client can
still be told why, if the response has a top-level `error_code` field: every other field gets its zero value
(empty arrays, empty strings, zeros), so the response says nothing beyond the error. Responses without a
top-level error code (Produce, Metadata, CreateTopics, ...) report errors per item; an empty list there would
read as a real, empty answer, so such requests are answered by closing the connection, as Kafka does for any
request it cannot parse.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import MISSING, Field, fields
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

__all__ = ["error_response"]

_ZERO_BY_TYPE: dict[str, Any] = {
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": b"",
    "uuid": uuid.UUID(int=0),
    "float64": 0.0,
    "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, datetime.UTC),
    "error_code": KioErrorCode.none,
}


def error_response(response_type: Any, error_code: KioErrorCode) -> Any | None:
    """`response_type` with its top-level error code set and every other field zero; None if it has none."""
    if not has_top_level_error_code(response_type):
        return None
    return _zero_entity(response_type, error_code=error_code)


@cache
def has_top_level_error_code(response_type: Any) -> bool:
    return any(field.name == "error_code" for field in fields(response_type))


def _zero_entity(entity_type: Any, **values: Any) -> Any:
    for field in fields(entity_type):
        if field.name not in values and field.default is MISSING and field.default_factory is MISSING:
            values[field.name] = _zero(field)
    return entity_type(**values)


def _zero(field: Field[Any]) -> Any:
    match classify_field(field):
        case PrimitiveTupleField() | EntityTupleField():
            return ()
        case EntityField(nested):
            return None if is_optional(field) else _zero_entity(nested)
        case PrimitiveField():
            kafka_type = get_schema_field_type(field)
            return _ZERO_BY_TYPE.get(kafka_type, 0)
    raise TypeError(f"no zero value for {field.name}")
