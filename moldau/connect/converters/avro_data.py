"""Connect schemas and values <-> Avro, mapped as Confluent's AvroConverter maps them.

Connect INT8/INT16 are Avro `int` with `"connect.type": "int8"/"int16"`, INT32 `int`, INT64 `long`, FLOAT32
`float`, FLOAT64 `double`; optional schemas are `["null", T]` unions (fields default to null); structs are
records named after the Connect schema (namespace = the part before the last dot) or `ConnectDefault` in
`io.confluent.connect.avro`; maps with string keys are Avro maps, other maps arrays of `MapEntry` records;
Decimal, Date, Time and Timestamp are the Avro logical types decimal, date, time-millis and timestamp-millis.
A schema's name, version, doc and parameters travel as `connect.name`, `connect.version`, `connect.doc` and
`connect.parameters`. Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from moldau.connect.converters.containers import rebuild_container
from moldau.connect.converters.logical import SCALE
from moldau.connect.data import DATE_NAME, DECIMAL_NAME, TIME_NAME, TIMESTAMP_NAME, Field, Schema, Type
from moldau.connect.errors import DataException

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
MAP_ENTRY = "MapEntry"
PRECISION = "connect.decimal.precision"
_PRIMITIVES = {Type.INT8: "int", Type.INT16: "int", Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float",
               Type.FLOAT64: "double", Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes"}
_LOGICAL = {DATE_NAME: "date", TIME_NAME: "time-millis", TIMESTAMP_NAME: "timestamp-millis"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class _Names:
    """Hands out ConnectDefault, ConnectDefault2, ... for unnamed structs and MapEntry, MapEntry2, ... for map
    entries: an Avro schema may define each name only once."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def next(self, base: str = DEFAULT_NAME) -> str:
        count = self.counts[base] = self.counts.get(base, 0) + 1
        return base if count == 1 else f"{base}{count}"


def to_avro_schema(schema: Schema) -> Any:
    """The Avro schema (JSON-ready) Confluent's converter derives from a Connect schema."""
    return _to_avro(schema, _Names(), top=True)


def _to_avro(schema: Schema, names: _Names, top: bool = False) -> Any:
    base = _to_avro_required(schema, names)
    return ["null", base] if schema.optional else base


def _connect_props(schema: Schema, out: dict[str, Any]) -> dict[str, Any]:
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.doc is not None:
        out["connect.doc"] = schema.doc
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    if schema.name is not None:
        out["connect.name"] = schema.name
    return out


def _to_avro_required(schema: Schema, names: _Names) -> Any:
    t = schema.type
    if schema.name == DECIMAL_NAME:
        params = schema.parameters or {}
        out: dict[str, Any] = {"type": "bytes", "scale": int(params.get(SCALE, "0")),
                               "precision": int(params.get(PRECISION, "64"))}
        return {**_connect_props(schema, out), "logicalType": "decimal"}
    if schema.name in _LOGICAL:
        return {**_connect_props(schema, {"type": _PRIMITIVES[t]}), "logicalType": _LOGICAL[schema.name]}
    if t.is_primitive:
        out = {"type": _PRIMITIVES[t]}
        if t in (Type.INT8, Type.INT16):
            out["connect.type"] = t.value
        _connect_props(schema, out)
        return out if len(out) > 1 else out["type"]
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return _connect_props(schema, {"type": "array", "items": _to_avro(schema.value_schema, names)})
    if t is Type.MAP:
        return _map_to_avro(schema, names)
    return _record(schema, names)


def _map_to_avro(schema: Schema, names: _Names) -> dict[str, Any]:
    assert schema.key_schema is not None and schema.value_schema is not None
    if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
        return _connect_props(schema, {"type": "map", "values": _to_avro(schema.value_schema, names)})
    entry = {"type": "record", "name": names.next(MAP_ENTRY), "namespace": NAMESPACE, "fields": [
        {"name": "key", "type": _to_avro(schema.key_schema, names)},
        {"name": "value", "type": _to_avro(schema.value_schema, names)}]}
    return _connect_props(schema, {"type": "array", "items": entry})


def _record(schema: Schema, names: _Names) -> dict[str, Any]:
    if schema.name:
        namespace, _, name = schema.name.rpartition(".")
    else:
        namespace, name = NAMESPACE, names.next()
    out: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        out["namespace"] = namespace
    if schema.doc is not None:
        out["doc"] = schema.doc
    out["fields"] = [_avro_field(f, names) for f in schema.fields]
    return _connect_props(schema, out)


def _avro_field(field: Field, names: _Names) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.name, "type": _to_avro(field.schema, names)}
    if field.schema.optional:
        out["default"] = None
    elif field.schema.default is not None and field.schema.type.is_primitive and field.schema.name is None:
        out["default"] = _default_json(field.schema.default)
    return out


def _default_json(value: Any) -> Any:
    return value.decode("latin-1") if isinstance(value, bytes) else value


# Connect values -> Avro (fastavro) values


def to_avro_value(schema: Schema | None, value: Any) -> Any:
    if value is None or schema is None:
        return value
    t = schema.type
    if t is Type.STRUCT:
        return {f.name: to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if t is Type.ARRAY:
        return [to_avro_value(schema.value_schema, v) for v in value]
    if t is Type.MAP:
        assert schema.key_schema is not None
        if schema.key_schema.type is Type.STRING and not schema.key_schema.optional:
            return {k: to_avro_value(schema.value_schema, v) for k, v in value.items()}
        return [{"key": to_avro_value(schema.key_schema, k), "value": to_avro_value(schema.value_schema, v)}
                for k, v in value.items()]
    if t is Type.BYTES and schema.name != DECIMAL_NAME:
        return bytes(value)
    return value


# Avro -> Connect


def to_connect_schema(avro: Any, optional: bool = False) -> Schema:
    """The Connect schema of an Avro schema (parsed JSON), as Confluent's converter reads it back."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise DataException(f"Avro unions other than [\"null\", T] are not supported: {avro}")
        return to_connect_schema(branches[0], optional=optional or len(branches) < len(avro))
    node = {"type": avro} if isinstance(avro, str) else dict(avro)
    props = _props_from(node, optional)
    kind = node["type"]
    if isinstance(kind, dict | list):
        return to_connect_schema(kind, optional)
    logical = node.get("logicalType")
    if logical == "decimal" and kind == "bytes":
        params = {SCALE: str(node.get("scale", 0)), **(props["parameters"] or {})}
        if node.get("precision", 64) != 64:
            params[PRECISION] = str(node["precision"])
        return Schema(Type.BYTES, **{**props, "name": DECIMAL_NAME, "version": props["version"] or 1,
                                     "parameters": params})
    for name, avro_logical in _LOGICAL.items():
        if logical == avro_logical:
            return Schema(Type.INT64 if kind == "long" else Type.INT32, **{**props, "name": name,
                                                                          "version": props["version"] or 1})
    return _plain_to_connect(node, kind, props)


def _props_from(node: dict[str, Any], optional: bool) -> dict[str, Any]:
    params = node.get("connect.parameters")
    return {"optional": optional, "name": node.get("connect.name"), "version": node.get("connect.version"),
            "doc": node.get("connect.doc"), "parameters": dict(params) if params else None}


def _plain_to_connect(node: dict[str, Any], kind: str, props: dict[str, Any]) -> Schema:
    simple = {"int": Type.INT32, "long": Type.INT64, "float": Type.FLOAT32, "double": Type.FLOAT64,
              "boolean": Type.BOOLEAN, "string": Type.STRING, "bytes": Type.BYTES, "enum": Type.STRING,
              "fixed": Type.BYTES}
    if kind == "int" and node.get("connect.type") in ("int8", "int16"):
        return Schema(Type(node["connect.type"]), **props)
    if kind in simple:
        return Schema(simple[kind], **props)
    if kind == "array":
        items = node["items"]
        item_node = items if isinstance(items, dict) else {}
        if item_node.get("namespace") == NAMESPACE and str(item_node.get("name", "")).startswith(MAP_ENTRY):
            fields = {f["name"]: f["type"] for f in item_node["fields"]}
            return Schema(Type.MAP, key_schema=to_connect_schema(fields["key"]),
                          value_schema=to_connect_schema(fields["value"]), **props)
        return Schema(Type.ARRAY, value_schema=to_connect_schema(items), **props)
    if kind == "map":
        return Schema(Type.MAP, key_schema=Schema(Type.STRING), value_schema=to_connect_schema(node["values"]),
                      **props)
    if kind == "record":
        if props["name"] is None and not str(node.get("name", "")).startswith(DEFAULT_NAME):
            namespace = node.get("namespace")
            props["name"] = f"{namespace}.{node['name']}" if namespace else node["name"]
        record_fields = tuple(Field(f["name"], i, to_connect_schema(f["type"]))
                              for i, f in enumerate(node["fields"]))
        return Schema(Type.STRUCT, fields=record_fields, **props)
    raise DataException(f"Avro type {kind} is not supported by the Connect converter")


def to_connect_value(schema: Schema, value: Any) -> Any:
    """The Connect value of a decoded Avro value (fastavro's logical-type objects back to Connect's ints)."""
    if value is None:
        return None
    container, rebuilt = rebuild_container(schema, value, to_connect_value)
    return rebuilt if container else _logical_to_connect(schema, value)


def _logical_to_connect(schema: Schema, value: Any) -> Any:
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if schema.name == DECIMAL_NAME and isinstance(value, decimal.Decimal):
        return value
    if schema.type in (Type.FLOAT32, Type.FLOAT64) and isinstance(value, int):
        return float(value)
    return value
