"""Connect <-> Avro mapping (Confluent's): schema shapes, and values that fastavro writes and reads back."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings

from moldau.connect.converters import avro_data
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.data import (
    DATE_NAME,
    INT16_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import DataException
from tests.unit.connect.strategies import schema_and_value


def test_schema_shapes() -> None:
    inner = SchemaBuilder.struct().field("n", INT16_SCHEMA).build()
    schema = (SchemaBuilder.struct().field("id", INT32_SCHEMA).field("maybe", OPTIONAL_INT64_SCHEMA)
              .field("inner", inner).field("byid", SchemaBuilder.map(INT32_SCHEMA, STRING_SCHEMA).build())
              .field("amount", decimal_schema(3)).field("day", Schema(Type.INT32, name=DATE_NAME, version=1))
              .build())
    avro = avro_data.to_avro_schema(schema)
    assert avro["name"] == "ConnectDefault" and avro["namespace"] == "io.confluent.connect.avro"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["id"]["type"] == "int"
    assert fields["maybe"] == {"name": "maybe", "type": ["null", "long"], "default": None}
    assert fields["inner"]["type"]["name"] == "ConnectDefault2"
    assert fields["inner"]["type"]["fields"][0]["type"] == {"type": "int", "connect.type": "int16"}
    assert fields["byid"]["type"]["type"] == "array"
    assert fields["byid"]["type"]["items"]["name"] == "MapEntry"
    assert fields["amount"]["type"] == {"type": "bytes", "scale": 3, "precision": 64, "connect.version": 1,
                                        "connect.parameters": {"scale": "3"},
                                        "connect.name": "org.apache.kafka.connect.data.Decimal",
                                        "logicalType": "decimal"}
    assert fields["day"]["type"]["logicalType"] == "date"
    assert avro_data.to_connect_schema(avro) == schema


def test_named_records_keep_their_names() -> None:
    schema = SchemaBuilder.struct().name("a.b.Thing").version(3).doc("d").field("x", STRING_SCHEMA).build()
    avro = avro_data.to_avro_schema(schema)
    assert (avro["name"], avro["namespace"], avro["doc"]) == ("Thing", "a.b", "d")
    assert avro["connect.name"] == "a.b.Thing" and avro["connect.version"] == 3
    assert avro_data.to_connect_schema(avro) == schema


def test_unsupported_unions_are_named() -> None:
    with pytest.raises(DataException, match="unions"):
        avro_data.to_connect_schema(["int", "string"])


def _through_fastavro(avro: Any, value: Any) -> Any:
    parsed = fastavro.parse_schema(avro)
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, parsed, value)
    buffer.seek(0)
    return fastavro.schemaless_reader(buffer, parsed, parsed)


@settings(max_examples=150)
@given(schema_and_value())
def test_values_round_trip_through_avro(pair: tuple[Schema, Any]) -> None:
    schema, value = pair
    avro = avro_data.to_avro_schema(schema)
    back_schema = avro_data.to_connect_schema(avro)
    assert back_schema == schema
    decoded = _through_fastavro(avro, avro_data.to_avro_value(schema, value))
    assert avro_data.to_connect_value(back_schema, decoded) == value


def test_struct_value_through_avro() -> None:
    schema = SchemaBuilder.struct().field("amount", decimal_schema(2)).field("n", INT32_SCHEMA).build()
    import decimal
    value = Struct(schema, {"amount": decimal.Decimal("3.10"), "n": 4})
    decoded = _through_fastavro(avro_data.to_avro_schema(schema), avro_data.to_avro_value(schema, value))
    assert avro_data.to_connect_value(schema, decoded) == value
