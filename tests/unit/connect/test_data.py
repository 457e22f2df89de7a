"""The Connect data model: schemas, structs and value validation."""

from __future__ import annotations

import pytest

from moldau.connect.data import (
    INT8_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    Struct,
    Type,
    validate_value,
)
from moldau.connect.errors import DataException


def _row_schema() -> SchemaBuilder:
    return SchemaBuilder.struct().name("db.public.users.Value").field("id", INT32_SCHEMA) \
        .field("email", OPTIONAL_STRING_SCHEMA)


def test_struct_schema_fields_and_names() -> None:
    schema = _row_schema().optional().build()
    assert schema.type is Type.STRUCT and schema.optional and schema.name == "db.public.users.Value"
    assert schema.field_names() == ["id", "email"]
    assert schema.field("email") is not None and schema.field("email").index == 1  # type: ignore[union-attr]
    assert schema.field("missing") is None
    assert Type.INT32.value == "int32"  # JsonConverter's envelope spelling


def test_debezium_style_envelope_validates_nested_structs() -> None:
    row = _row_schema().optional().build()
    envelope = SchemaBuilder.struct().name("db.public.users.Envelope").field("before", row) \
        .field("after", row).field("op", STRING_SCHEMA).build()
    after = Struct(row).put("id", 7).put("email", "a@example.com")
    event = Struct(envelope, {"after": after, "op": "c"})
    event.validate()
    assert event.get("before") is None and event["after"]["id"] == 7
    assert event == Struct(envelope, {"after": Struct(row, {"id": 7, "email": "a@example.com"}), "op": "c"})


def test_struct_rejects_wrong_values() -> None:
    struct = Struct(_row_schema().build())
    with pytest.raises(DataException):
        struct.put("id", "seven")
    with pytest.raises(DataException):
        struct.put("nope", 1)
    with pytest.raises(DataException):
        struct.validate()  # id is required and unset


@pytest.mark.parametrize(("schema", "value", "ok"), [
    (INT8_SCHEMA, 127, True), (INT8_SCHEMA, 128, False), (INT8_SCHEMA, True, False),
    (STRING_SCHEMA, None, False), (OPTIONAL_STRING_SCHEMA, None, True),
    (SchemaBuilder.array(INT32_SCHEMA).build(), [1, 2], True),
    (SchemaBuilder.array(INT32_SCHEMA).build(), [1, "x"], False),
    (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), {"a": 1}, True),
    (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), {1: 1}, False),
    (SchemaBuilder.of(Type.BYTES).build(), b"x", True),
    (SchemaBuilder.of(Type.FLOAT64).build(), 1, True),
])
def test_validate_value(schema: object, value: object, ok: bool) -> None:
    if ok:
        validate_value(schema, value)  # type: ignore[arg-type]
    else:
        with pytest.raises(DataException):
            validate_value(schema, value)  # type: ignore[arg-type]


def test_defaults_are_checked_and_used() -> None:
    schema = SchemaBuilder.of(Type.INT32).default_value(5).build()
    struct = Struct(SchemaBuilder.struct().field("n", schema).build())
    assert struct.get("n") == 5
    with pytest.raises(DataException):
        SchemaBuilder.of(Type.INT32).default_value("x").build()


def test_schemas_are_hashable_cache_keys() -> None:
    decimal = SchemaBuilder.of(Type.BYTES).name("org.apache.kafka.connect.data.Decimal").parameter("scale", "2")
    first = _row_schema().field("price", decimal.build()).build()
    second = _row_schema().field("price", decimal.build()).build()
    cache = {first: "converted"}
    assert first == second and cache[second] == "converted"
    with_list_default = SchemaBuilder.array(INT32_SCHEMA).default_value([1]).build()
    assert {with_list_default: 1}[with_list_default] == 1
