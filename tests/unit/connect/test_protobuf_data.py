"""Connect <-> Protobuf mapping: the message a struct schema becomes, values through a dynamic message, the
message index array, and what Protobuf cannot hold."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pool, message_factory  # type: ignore[import-untyped]

from moldau.connect.converters import protobuf_data
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.converters.protobuf import message_indexes
from moldau.connect.data import (
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import DataException

INNER = SchemaBuilder.struct().field("x", FLOAT64_SCHEMA).build()
OUTER = (SchemaBuilder.struct().name("a.b.Outer").field("small", INT8_SCHEMA).field("maybe", OPTIONAL_INT64_SCHEMA)
         .field("inner", INNER).field("by_key", SchemaBuilder.map(INT64_SCHEMA, INNER).build())
         .field("names", SchemaBuilder.array(STRING_SCHEMA).build()).build())


def message_class(schema: Schema) -> Any:
    file, name = protobuf_data.to_file_descriptor(schema)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    return cls


def test_message_shape() -> None:
    file, name = protobuf_data.to_file_descriptor(OUTER)
    assert (file.syntax, file.package, name) == ("proto3", "a.b", "a.b.Outer")
    message = file.message_type[0]
    fields = {f.name: f for f in message.field}
    assert [f.number for f in message.field] == [1, 2, 3, 4, 5]
    assert fields["maybe"].proto3_optional
    assert fields["inner"].type_name == "ConnectDefault1"
    assert {n.name for n in message.nested_type} == {"ConnectDefault1", "ConnectDefault2", "ByKeyEntry"}


def test_values_through_a_message() -> None:
    value = Struct(OUTER, {"small": -2, "maybe": None, "inner": Struct(INNER, {"x": 1.5}),
                           "by_key": {7: Struct(INNER, {"x": 2.0})}, "names": ["n"]})
    cls = message_class(OUTER)
    message = cls.FromString(protobuf_data.fill_message(cls(), OUTER, value).SerializeToString())
    schema = protobuf_data.to_connect_schema(message.DESCRIPTOR)
    assert schema.name == "a.b.Outer" and all(f.schema.optional for f in schema.fields)
    small = schema.field("small")
    assert small is not None and small.schema.type is Type.INT32  # Protobuf has no 8-bit integers
    back = protobuf_data.to_connect_value(schema, message).to_dict()
    assert back["maybe"] is None and back["small"] == -2 and back["names"] == ["n"]
    assert back["inner"].to_dict() == {"x": 1.5} and back["by_key"][7].to_dict() == {"x": 2.0}


def test_what_protobuf_cannot_hold() -> None:
    with pytest.raises(DataException, match="struct schemas only"):
        protobuf_data.to_file_descriptor(STRING_SCHEMA)
    with pytest.raises(DataException, match="Decimal is not supported"):
        protobuf_data.to_file_descriptor(SchemaBuilder.struct().field("d", decimal_schema(2)).build())
    with pytest.raises(DataException, match="map keys cannot be float64"):
        protobuf_data.to_file_descriptor(
            SchemaBuilder.struct().field("m", SchemaBuilder.map(FLOAT64_SCHEMA, STRING_SCHEMA).build()).build())
    nullable_items = SchemaBuilder.struct().field(
        "l", SchemaBuilder.array(Schema(Type.STRING, optional=True)).build()).build()
    with pytest.raises(DataException, match="cannot hold null items"):
        protobuf_data.fill_message(message_class(nullable_items)(), nullable_items,
                                   Struct(nullable_items, {"l": [None]}))


def test_message_indexes() -> None:
    assert message_indexes(b"\x00rest") == (0,)
    assert message_indexes(b"\x04\x02\x06") == (1, 3)  # zig-zag: count 2, then 1 and 3
    with pytest.raises(DataException, match="run past the end"):
        message_indexes(b"\x04\x02")
