"""Connect schemas and values <-> JSON Schema, mapped as Confluent's JsonSchemaConverter maps them.

Structs are `object`s whose `properties` carry `connect.index` (the field's position) and whose `title` is the
Connect schema name; integers are `integer` with `connect.type` int8/int16/int32/int64, FLOAT32/FLOAT64
`number` with `connect.type` float32/float64, bytes a base64 `string` with `connect.type: bytes`; optional
schemas are `oneOf: [{"type": "null"}, T]`; maps with string keys are objects with `additionalProperties`,
other maps arrays of {key, value} objects, both marked `connect.type: map`. Logical types keep their Connect
name as `title` (Decimal as a JSON number). Pure: no I/O.
"""

from __future__ import annotations

import base64
import decimal
from typing import Any

from moldau.connect.converters.containers import rebuild_container
from moldau.connect.converters.logical import SCALE
from moldau.connect.data import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Field, Schema, Type
from moldau.connect.errors import DataException

_INTEGERS = (Type.INT8, Type.INT16, Type.INT32, Type.INT64)
_LOGICAL_NAMES = (DECIMAL_NAME, DATE_NAME, TIME_NAME, TIMESTAMP_NAME)


def to_json_schema(schema: Schema) -> dict[str, Any]:
    """The JSON Schema (a dict) Confluent's converter derives from a Connect schema."""
    inner = _required(schema)
    return {"oneOf": [{"type": "null"}, inner]} if schema.optional else inner


def _props(schema: Schema, out: dict[str, Any]) -> dict[str, Any]:
    if schema.name is not None:
        out["title"] = schema.name
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.doc is not None:
        out["description"] = schema.doc
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    return out


def _required(schema: Schema) -> dict[str, Any]:
    t = schema.type
    if schema.name == DECIMAL_NAME:
        return _props(schema, {"type": "number"})
    if t in _INTEGERS:
        return _props(schema, {"type": "integer", "connect.type": t.value})
    if t in (Type.FLOAT32, Type.FLOAT64):
        return _props(schema, {"type": "number", "connect.type": t.value})
    if t is Type.BYTES:
        return _props(schema, {"type": "string", "connect.type": "bytes"})
    if t in (Type.BOOLEAN, Type.STRING):
        return _props(schema, {"type": t.value})
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return _props(schema, {"type": "array", "items": to_json_schema(schema.value_schema)})
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
            return _props(schema, {"type": "object", "additionalProperties": to_json_schema(schema.value_schema),
                                   "connect.type": "map"})
        entry = {"type": "object", "properties": {
            "key": {**to_json_schema(schema.key_schema), "connect.index": 0},
            "value": {**to_json_schema(schema.value_schema), "connect.index": 1}}}
        return _props(schema, {"type": "array", "items": entry, "connect.type": "map"})
    properties = {f.name: {**to_json_schema(f.schema), "connect.index": f.index} for f in schema.fields}
    return _props(schema, {"type": "object", "properties": properties})


def to_json_value(schema: Schema | None, value: Any) -> Any:
    """The JSON value (for the serializer) of a Connect value."""
    if value is None or schema is None:
        return value
    t = schema.type
    if schema.name == DECIMAL_NAME:
        return float(value)  # the Python JSON encoder has no exact decimal numbers
    if t is Type.BYTES:
        return base64.b64encode(bytes(value)).decode("ascii")
    if t is Type.STRUCT:
        return {f.name: to_json_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t is Type.ARRAY:
        return [to_json_value(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        assert schema.key_schema is not None
        if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
            return {k: to_json_value(schema.value_schema, v) for k, v in value.items()}
        return [{"key": to_json_value(schema.key_schema, k), "value": to_json_value(schema.value_schema, v)}
                for k, v in value.items()]
    return value


def to_connect_schema(node: Any, optional: bool = False) -> Schema:
    """The Connect schema of a JSON Schema (as the converter writes them; plain JSON Schemas map by `type`)."""
    if node is True or node == {}:
        raise DataException("JSON Schemas accepting any value have no Connect schema")
    if not isinstance(node, dict):
        raise DataException(f"Unsupported JSON Schema: {node!r}")
    for union in ("oneOf", "anyOf"):
        if union in node:
            branches = [b for b in node[union] if b != {"type": "null"}]
            if len(branches) != 1:
                raise DataException(f"JSON Schema unions other than null-or-T are not supported: {node}")
            return to_connect_schema(branches[0], optional=True)
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise DataException(f"JSON Schema type lists other than null-or-T are not supported: {kind}")
        return to_connect_schema({**node, "type": others[0]}, optional=optional or "null" in kind)
    params = node.get("connect.parameters")
    props: dict[str, Any] = {"optional": optional, "name": node.get("title"), "version": node.get("connect.version"),
                             "doc": node.get("description"), "parameters": dict(params) if params else None}
    return _typed(node, kind, props)


def _typed(node: dict[str, Any], kind: Any, props: dict[str, Any]) -> Schema:
    connect_type = node.get("connect.type")
    if props["name"] == DECIMAL_NAME:
        props["parameters"] = props["parameters"] or {SCALE: "0"}
        return Schema(Type.BYTES, **props)
    if kind == "integer":
        return Schema(Type(connect_type) if connect_type in ("int8", "int16", "int32") else Type.INT64, **props)
    if kind == "number":
        return Schema(Type.FLOAT32 if connect_type == "float32" else Type.FLOAT64, **props)
    if kind == "string":
        return Schema(Type.BYTES if connect_type == "bytes" else Type.STRING, **props)
    if kind == "boolean":
        return Schema(Type.BOOLEAN, **props)
    if kind == "array" and connect_type == "map":
        entry = node["items"]["properties"]
        return Schema(Type.MAP, key_schema=to_connect_schema(entry["key"]),
                      value_schema=to_connect_schema(entry["value"]), **props)
    if kind == "array":
        return Schema(Type.ARRAY, value_schema=to_connect_schema(node.get("items", {})), **props)
    if kind == "object" and connect_type == "map":
        return Schema(Type.MAP, key_schema=Schema(Type.STRING),
                      value_schema=to_connect_schema(node["additionalProperties"]), **props)
    if kind == "object":
        ordered = sorted(node.get("properties", {}).items(), key=lambda p: p[1].get("connect.index", 1 << 30))
        fields = tuple(Field(name, i, to_connect_schema(s)) for i, (name, s) in enumerate(ordered))
        return Schema(Type.STRUCT, fields=fields, **props)
    raise DataException(f"Unsupported JSON Schema type: {kind!r}")


def to_connect_value(schema: Schema, value: Any) -> Any:
    """The Connect value of a decoded JSON value."""
    if value is None:
        return None
    container, rebuilt = rebuild_container(schema, value, to_connect_value)
    if container:
        return rebuilt
    if schema.name == DECIMAL_NAME:
        return decimal.Decimal(str(value)).quantize(decimal.Decimal(1).scaleb(-int((schema.parameters or {})
                                                                                  .get(SCALE, "0"))))
    if schema.type is Type.BYTES:
        return base64.b64decode(value)
    if schema.type in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return value
