"""Connect schemas as Kafka's JsonConverter writes them in its envelope's "schema" field, and back."""

from __future__ import annotations

from typing import Any

from moldau.connect.data import Field, Schema, Type
from moldau.connect.errors import DataException as DataError

# JsonConverter's names are Connect's type names except for the two floating-point types.
_NAMES = {**{t: t.value for t in Type}, Type.FLOAT32: "float", Type.FLOAT64: "double"}
_TYPES = {name: t for t, name in _NAMES.items()}


def schema_to_json(schema: Schema, default_to_json: Any) -> dict[str, Any]:
    """The envelope JSON of `schema`. `default_to_json(schema, value)` encodes default values."""
    out: dict[str, Any] = {"type": _NAMES[schema.type]}
    if schema.type is Type.STRUCT:
        out["fields"] = [{**schema_to_json(f.schema, default_to_json), "field": f.name} for f in schema.fields]
    elif schema.type is Type.ARRAY:
        assert schema.value_schema is not None
        out["items"] = schema_to_json(schema.value_schema, default_to_json)
    elif schema.type is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keys"] = schema_to_json(schema.key_schema, default_to_json)
        out["values"] = schema_to_json(schema.value_schema, default_to_json)
    out["optional"] = schema.optional
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters:
        out["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = default_to_json(schema, schema.default)
    return out


def schema_from_json(node: Any, default_from_json: Any) -> Schema:
    """The Connect schema an envelope's "schema" JSON describes (Kafka's messages on malformed input)."""
    if not isinstance(node, dict):
        raise DataError("Schema must be a JSON object")
    type_name = node.get("type")
    if not isinstance(type_name, str):
        raise DataError("Schema must contain 'type' field")
    if type_name not in _TYPES:
        raise DataError("Unknown schema type: " + type_name)
    type_ = _TYPES[type_name]
    kw: dict[str, Any] = {}
    if type_ is Type.STRUCT:
        kw["fields"] = _fields(node, default_from_json)
    elif type_ is Type.ARRAY:
        if "items" not in node:
            raise DataError("Array schema did not specify the items type")
        kw["value_schema"] = schema_from_json(node["items"], default_from_json)
    elif type_ is Type.MAP:
        if "keys" not in node or "values" not in node:
            raise DataError("Map schema did not specify the key type" if "keys" not in node
                            else "Map schema did not specify the value type")
        kw["key_schema"] = schema_from_json(node["keys"], default_from_json)
        kw["value_schema"] = schema_from_json(node["values"], default_from_json)
    params = node.get("parameters")
    if params is not None and not isinstance(params, dict):
        raise DataError("Schema parameters must be a JSON object")
    schema = Schema(type_, optional=node.get("optional") is True, name=node.get("name"),
                    version=node.get("version"), doc=node.get("doc"),
                    parameters={k: str(v) for k, v in params.items()} if params else None, **kw)
    if node.get("default") is not None:
        schema = Schema(**{**schema.__dict__, "default": default_from_json(schema, node["default"])})
    return schema


def _fields(node: dict[str, Any], default_from_json: Any) -> tuple[Field, ...]:
    fields = node.get("fields")
    if not isinstance(fields, list):
        raise DataError("Struct schema's \"fields\" argument is not an array.")
    out = []
    for i, f in enumerate(fields):
        if not isinstance(f, dict) or not isinstance(f.get("field"), str):
            raise DataError("Struct schema's field name not specified properly")
        out.append(Field(f["field"], i, schema_from_json(f, default_from_json)))
    return tuple(out)
