"""Kafka's JsonConverter (`org.apache.kafka.connect.json.JsonConverter`).

With `schemas.enable=true` (the default) every message is an envelope `{"schema": ..., "payload": ...}`;
without it the bytes are plain JSON and values come back schemaless (objects as dicts, integers as int64,
other numbers as double). Bytes are base64 text; Decimal is base64 of its unscaled value or, with
`decimal.format=NUMERIC`, a JSON number. A null record stays null both ways (a tombstone).
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
from collections.abc import Mapping, Sequence
from typing import Any

from moldau.connect.api import Converter, Header
from moldau.connect.config import ConfigDef, ConfigType, Importance, ValidString
from moldau.connect.converters import logical
from moldau.connect.converters.json_schema_text import schema_from_json, schema_to_json
from moldau.connect.data import Schema, SchemaAndValue, Struct, Type
from moldau.connect.data import validate_value as validate
from moldau.connect.errors import DataException as DataError

INTEGER_RANGES = {t: (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
                  for t, bits in ((Type.INT8, 8), (Type.INT16, 16), (Type.INT32, 32), (Type.INT64, 64))}

ENVELOPE_ERROR = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)


CONFIG_DEF = (
    ConfigDef()
    .define("schemas.enable", ConfigType.BOOLEAN, True, Importance.HIGH,
            "Include schemas within each of the serialized values and keys.")
    .define("decimal.format", ConfigType.STRING, "BASE64", Importance.LOW,
            "How Decimal values are written: BASE64 (their unscaled bytes) or NUMERIC (a JSON number).",
            validator=ValidString(("BASE64", "NUMERIC"), case_sensitive=False))
    .define("replace.null.with.default", ConfigType.BOOLEAN, True, Importance.LOW,
            "Whether a null field with a default value is written and read as that default.")
    .define("schemas.cache.size", ConfigType.INT, 1000, Importance.HIGH,
            "Accepted for compatibility with Kafka's configs; schemas are not cached.")
)


class JsonConverter(Converter):
    """Connect data <-> JSON bytes, with or without the schema envelope."""

    aliases = ("org.apache.kafka.connect.json.JsonConverter",)

    def __init__(self) -> None:
        self.schemas_enable = True
        self.decimal_numeric = False
        self.replace_null_with_default = True

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        parsed = CONFIG_DEF.parse(configs)
        self.schemas_enable = parsed["schemas.enable"]
        self.decimal_numeric = str(parsed["decimal.format"]).upper() == "NUMERIC"
        self.replace_null_with_default = parsed["replace.null.with.default"]

    # Connect -> bytes

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any,
                          headers: Sequence[Header] = ()) -> bytes | None:
        if schema is None and value is None:
            return None
        try:
            payload = self.value_to_json(schema, value)
            if self.schemas_enable:
                envelope = {"schema": None if schema is None else self.schema_to_json(schema), "payload": payload}
                return _dump(envelope)
            return _dump(payload)
        except (DataError, TypeError, ValueError, AttributeError) as e:
            raise DataError(f"Converting Kafka Connect data to byte[] failed due to serialization error of topic "
                            f"{topic}: {e}") from e

    def schema_to_json(self, schema: Schema) -> dict[str, Any]:
        return schema_to_json(schema, self.value_to_json)

    def value_to_json(self, schema: Schema | None, value: Any) -> Any:
        """The JSON tree for `value` (inferring its type when `schema` is None)."""
        if value is None:
            if schema is None:
                return None
            if schema.default is not None and self.replace_null_with_default:
                return self.value_to_json(schema, schema.default)
            validate(schema, None)
            return None
        if schema is None:
            return _schemaless_to_json(self, value)
        validate(schema, value)
        if logical.is_decimal(schema) and self.decimal_numeric:
            return value
        physical = logical.decimal_to_bytes(schema, value) if logical.is_decimal(schema) else value
        return self._physical_to_json(schema, physical)

    def _physical_to_json(self, schema: Schema, value: Any) -> Any:
        if schema.type is Type.BYTES:
            return base64.b64encode(bytes(value)).decode("ascii")
        if schema.type is Type.ARRAY:
            assert schema.value_schema is not None
            return [self.value_to_json(schema.value_schema, v) for v in value]
        if schema.type is Type.MAP:
            assert schema.key_schema is not None and schema.value_schema is not None
            if schema.key_schema.type is Type.STRING:
                return {k: self.value_to_json(schema.value_schema, v) for k, v in value.items()}
            return [[self.value_to_json(schema.key_schema, k), self.value_to_json(schema.value_schema, v)]
                    for k, v in value.items()]
        if schema.type is Type.STRUCT:
            return {f.name: self.value_to_json(f.schema, value.get(f.name)) for f in schema.fields}
        if schema.type in (Type.FLOAT32, Type.FLOAT64):
            return float(value)
        return value

    # bytes -> Connect

    def to_connect_data(self, topic: str, data: bytes | None, headers: Sequence[Header] = ()) -> SchemaAndValue:
        if data is None:
            return SchemaAndValue(None, None)
        try:
            tree = json.loads(data, parse_float=decimal.Decimal)
        except (ValueError, UnicodeDecodeError) as e:
            raise DataError(f"Converting byte[] to Kafka Connect data failed due to serialization error: {e}") from e
        if not self.schemas_enable:
            return SchemaAndValue(None, self.value_from_json(None, tree))
        if not isinstance(tree, dict) or set(tree) != {"schema", "payload"}:
            raise DataError(ENVELOPE_ERROR)
        if tree["schema"] is None:
            return SchemaAndValue(None, self.value_from_json(None, tree["payload"]))
        schema = self.schema_from_json(tree["schema"])
        return SchemaAndValue(schema, self.value_from_json(schema, tree["payload"]))

    def schema_from_json(self, node: Any) -> Schema:
        return schema_from_json(node, self.value_from_json)

    def value_from_json(self, schema: Schema | None, node: Any) -> Any:
        """The Connect value of JSON `node` under `schema` (schemaless values when it is None)."""
        if schema is None:
            return _schemaless_from_json(node)
        if node is None:
            if schema.default is not None and self.replace_null_with_default:
                return schema.default
            if schema.optional:
                return None
            raise DataError(f"Invalid null value for required {schema.type.name} field")
        if logical.is_decimal(schema) and not isinstance(node, str):
            if not isinstance(node, int | decimal.Decimal):
                raise DataError("Invalid type for Decimal, underlying representation should be numeric or bytes")
            return decimal.Decimal(node).quantize(decimal.Decimal(1).scaleb(-logical.scale_of(schema)))
        physical = self._physical_from_json(schema, node)
        return logical.decimal_from_bytes(schema, physical) if logical.is_decimal(schema) else physical

    def _physical_from_json(self, schema: Schema, node: Any) -> Any:
        t = schema.type
        if t in INTEGER_RANGES:
            return _expect_int(t, node)
        if t in (Type.FLOAT32, Type.FLOAT64):
            if isinstance(node, bool) or not isinstance(node, int | decimal.Decimal):
                raise DataError(f"Expected a number for {t.name}, found {type(node).__name__}")
            return float(node)
        if t is Type.BOOLEAN or t is Type.STRING:
            if not isinstance(node, bool if t is Type.BOOLEAN else str):
                raise DataError(f"Expected {t.name}, found {type(node).__name__}")
            return node
        if t is Type.BYTES:
            return _base64(node)
        if t is Type.ARRAY:
            if not isinstance(node, list):
                raise DataError("Arrays should be encoded as JSON arrays")
            assert schema.value_schema is not None
            return [self.value_from_json(schema.value_schema, v) for v in node]
        if t is Type.MAP:
            return self._map_from_json(schema, node)
        if not isinstance(node, dict):
            raise DataError(f"Structs should be encoded as JSON objects, but found {type(node).__name__}")
        return Struct(schema, {f.name: self.value_from_json(f.schema, node.get(f.name)) for f in schema.fields})

    def _map_from_json(self, schema: Schema, node: Any) -> dict[Any, Any]:
        assert schema.key_schema is not None and schema.value_schema is not None
        if schema.key_schema.type is Type.STRING:
            if not isinstance(node, dict):
                raise DataError("Maps with string fields should be encoded as JSON objects")
            return {k: self.value_from_json(schema.value_schema, v) for k, v in node.items()}
        if not isinstance(node, list) or any(not isinstance(e, list) or len(e) != 2 for e in node):
            raise DataError("Maps with non-string fields should be encoded as JSON array of tuples")
        return {self.value_from_json(schema.key_schema, k): self.value_from_json(schema.value_schema, v)
                for k, v in node}


def _dump(tree: Any) -> bytes:
    try:
        return json.dumps(tree, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except TypeError:
        # NUMERIC decimals are in the tree: write them as JSON numbers with their exact digits, as Jackson
        # writes a BigDecimal (a float would round them).
        return _encode_exact(tree).encode()


def _encode_exact(tree: Any) -> str:
    if isinstance(tree, decimal.Decimal):
        if not tree.is_finite():
            raise DataError(f"Decimal {tree} has no JSON representation")
        return str(tree)
    if isinstance(tree, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_encode_exact(v)}" for k, v in tree.items()) + "}"
    if isinstance(tree, list):
        return "[" + ",".join(_encode_exact(v) for v in tree) + "]"
    return json.dumps(tree, ensure_ascii=False, allow_nan=False)


def _expect_int(t: Type, node: Any) -> int:
    if isinstance(node, bool) or not isinstance(node, int):
        raise DataError(f"Expected an integer for {t.name}, found {type(node).__name__}")
    low, high = INTEGER_RANGES[t]
    if not low <= node <= high:
        raise DataError(f"Value {node} is out of range for {t.name}")
    return node


def _base64(node: Any) -> bytes:
    if not isinstance(node, str):
        raise DataError("Invalid bytes field: expected base64 text")
    try:
        return base64.b64decode(node, validate=True)
    except binascii.Error as e:
        raise DataError(f"Invalid bytes field: {e}") from e


def _schemaless_to_json(conv: JsonConverter, value: Any) -> Any:
    if isinstance(value, Struct):
        return conv.value_to_json(value.schema, value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(conv, v) for k, v in value.items()}
        return [[_schemaless_to_json(conv, k), _schemaless_to_json(conv, v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_schemaless_to_json(conv, v) for v in value]
    if value is None or isinstance(value, bool | int | float | str | decimal.Decimal):
        return value
    raise DataError(f"Java class {type(value).__name__} does not have corresponding schema type.")


def _schemaless_from_json(node: Any) -> Any:
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    return node
