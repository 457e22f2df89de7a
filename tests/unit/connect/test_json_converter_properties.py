"""Property tests: JsonConverter round-trips Connect values, with schemas and without."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from moldau.connect.converters.json import INTEGER_RANGES, JsonConverter
from moldau.connect.data import Schema, SchemaAndValue, SchemaBuilder, Struct, Type


def primitive(t: Type, optional: bool) -> Schema:
    return Schema(t, optional=optional)


def array(items: Schema, optional: bool) -> Schema:
    return Schema(Type.ARRAY, optional=optional, value_schema=items)


def map_of(keys: Schema, values: Schema, optional: bool) -> Schema:
    return Schema(Type.MAP, optional=optional, key_schema=keys, value_schema=values)


def struct(fields: list[tuple[str, Schema]]) -> Schema:
    builder = SchemaBuilder.struct()
    for name, schema in fields:
        builder.field(name, schema)
    return builder.build()

NAMES = st.text("abcdefghij_", min_size=1, max_size=6)


def _primitive_schemas() -> st.SearchStrategy[Schema]:
    return st.builds(primitive, st.sampled_from([t for t in Type if t.is_primitive]), st.booleans())


def _schemas() -> st.SearchStrategy[Schema]:
    def extend(inner: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        return st.one_of(
            st.builds(array, inner, st.booleans()),
            st.builds(map_of, _primitive_schemas().filter(lambda s: not s.optional), inner, st.booleans()),
            st.lists(st.tuples(NAMES, inner), max_size=4, unique_by=lambda p: p[0]).map(lambda fs: struct(fs)),
        )
    return st.recursive(_primitive_schemas(), extend, max_leaves=8)


def _values(schema: Schema) -> st.SearchStrategy[Any]:
    base = _required_values(schema)
    return st.one_of(st.none(), base) if schema.optional else base


def _required_values(schema: Schema) -> st.SearchStrategy[Any]:
    t = schema.type
    if t in INTEGER_RANGES:
        low, high = INTEGER_RANGES[t]
        return st.integers(low, high)
    simple: dict[Type, st.SearchStrategy[Any]] = {
        Type.FLOAT32: st.floats(allow_nan=False, allow_infinity=False),
        Type.FLOAT64: st.floats(allow_nan=False, allow_infinity=False),
        Type.BOOLEAN: st.booleans(), Type.STRING: st.text(max_size=8), Type.BYTES: st.binary(max_size=8),
    }
    if t in simple:
        return simple[t]
    assert schema.value_schema is not None or t is Type.STRUCT
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return st.lists(_values(schema.value_schema), max_size=3)
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return st.dictionaries(_required_values(schema.key_schema), _values(schema.value_schema), max_size=3)
    return st.fixed_dictionaries({f.name: _values(f.schema) for f in schema.fields}).map(
        lambda d: Struct(schema, d))


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[Schema, Any]:
    schema = draw(_schemas())
    return schema, draw(_values(schema))


@given(schema_and_value())
def test_round_trip_with_schema(pair: tuple[Schema, Any]) -> None:
    schema, value = pair
    conv = JsonConverter()
    conv.configure({}, False)
    data = conv.from_connect_data("t", schema, value)
    assert conv.to_connect_data("t", data) == SchemaAndValue(schema, value)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=10,
)


@given(JSON_VALUES)
def test_round_trip_schemaless(value: Any) -> None:
    for enabled in ("true", "false"):
        conv = JsonConverter()
        conv.configure({"schemas.enable": enabled}, False)
        data = conv.from_connect_data("t", None, value)
        assert conv.to_connect_data("t", data) == SchemaAndValue(None, value)
