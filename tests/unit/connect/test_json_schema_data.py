"""Connect <-> JSON Schema mapping (Confluent's): schema shapes, and values that validate and read back."""

from __future__ import annotations

import decimal
import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]  # the library ships no type information
import pytest
from hypothesis import given, settings

from moldau.connect.converters import json_schema_data
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.data import (
    BYTES_SCHEMA,
    FLOAT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import DataException
from tests.unit.connect.strategies import schema_and_value


def test_schema_shapes() -> None:
    schema = (SchemaBuilder.struct().name("Thing").field("id", INT64_SCHEMA).field("note", OPTIONAL_STRING_SCHEMA)
              .field("ratio", FLOAT32_SCHEMA).field("raw", BYTES_SCHEMA)
              .field("byname", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
              .field("amount", decimal_schema(2)).build())
    out = json_schema_data.to_json_schema(schema)
    assert out["type"] == "object" and out["title"] == "Thing"
    props = out["properties"]
    assert props["id"] == {"type": "integer", "connect.type": "int64", "connect.index": 0}
    assert props["note"] == {"oneOf": [{"type": "null"}, {"type": "string"}], "connect.index": 1}
    assert props["ratio"] == {"type": "number", "connect.type": "float32", "connect.index": 2}
    assert props["raw"] == {"type": "string", "connect.type": "bytes", "connect.index": 3}
    assert props["byname"]["connect.type"] == "map" and props["byname"]["type"] == "object"
    assert props["amount"]["title"] == "org.apache.kafka.connect.data.Decimal"
    assert json_schema_data.to_connect_schema(out) == schema
    value = Struct(schema, {"id": 1, "note": None, "ratio": 0.5, "raw": b"\x01", "byname": {"a": 1},
                            "amount": decimal.Decimal("1.25")})
    encoded = json_schema_data.to_json_value(schema, value)
    assert encoded == {"id": 1, "note": None, "ratio": 0.5, "raw": "AQ==", "byname": {"a": 1}, "amount": 1.25}
    assert json_schema_data.to_connect_value(schema, encoded) == value


def test_plain_json_schemas_map_by_type() -> None:
    schema = json_schema_data.to_connect_schema({"type": "object", "properties": {
        "a": {"type": "integer"}, "b": {"type": ["string", "null"]},
        "c": {"type": "array", "items": {"type": "number"}}}})
    assert [(f.name, f.schema) for f in schema.fields] == [
        ("a", INT64_SCHEMA), ("b", OPTIONAL_STRING_SCHEMA), ("c", SchemaBuilder.array(Schema(Type.FLOAT64)).build())]


def test_unsupported_schemas_are_named() -> None:
    with pytest.raises(DataException, match="unions"):
        json_schema_data.to_connect_schema({"oneOf": [{"type": "string"}, {"type": "integer"}]})
    with pytest.raises(DataException, match="any value"):
        json_schema_data.to_connect_schema({})


@settings(max_examples=150)
@given(schema_and_value())
def test_values_validate_and_round_trip(pair: tuple[Schema, Any]) -> None:
    schema, value = pair
    document = json_schema_data.to_json_schema(schema)
    assert json_schema_data.to_connect_schema(document) == schema
    encoded = json.loads(json.dumps(json_schema_data.to_json_value(schema, value)))
    jsonschema.validate(encoded, document)
    assert json_schema_data.to_connect_value(schema, encoded) == value
