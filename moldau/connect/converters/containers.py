"""Rebuilding Connect's container values (structs, arrays, maps) from a decoded document, member by member: what
the Avro and JSON Schema converters share when they read. Each converter brings its own conversion of members
and of leaf values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moldau.connect.data import Schema, Struct, Type

__all__ = ["rebuild_container"]


def rebuild_container(schema: Schema, value: Any, convert: Callable[[Schema, Any], Any]) -> tuple[bool, Any]:
    """(True, the Connect value) for a struct, array or map, with `convert` applied to each member; (False, None)
    for any other type. A map may come as a list of `{"key", "value"}` entries (maps with non-string keys)."""
    t = schema.type
    if t is Type.STRUCT:
        return True, Struct(schema, {f.name: convert(f.schema, value.get(f.name)) for f in schema.fields})
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return True, [convert(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if isinstance(value, list):
            return True, {convert(schema.key_schema, e["key"]): convert(schema.value_schema, e["value"])
                          for e in value}
        return True, {k: convert(schema.value_schema, v) for k, v in value.items()}
    return False, None
