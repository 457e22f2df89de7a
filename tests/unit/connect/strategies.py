"""Hypothesis strategies for Connect schemas and values that fit them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from moldau.connect.converters.json import INTEGER_RANGES
from moldau.connect.data import Schema, SchemaBuilder, Struct, Type

NAMES = st.text("abcdefghij_", min_size=1, max_size=6)


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

def _primitiveschemas() -> st.SearchStrategy[Schema]:
    return st.builds(primitive, st.sampled_from([t for t in Type if t.is_primitive]), st.booleans())


def schemas() -> st.SearchStrategy[Schema]:
    def extend(inner: st.SearchStrategy[Schema]) -> st.SearchStrategy[Schema]:
        return st.one_of(
            st.builds(array, inner, st.booleans()),
            st.builds(map_of, _primitiveschemas().filter(lambda s: not s.optional), inner, st.booleans()),
            st.lists(st.tuples(NAMES, inner), max_size=4, unique_by=lambda p: p[0]).map(lambda fs: struct(fs)),
        )
    return st.recursive(_primitiveschemas(), extend, max_leaves=8)


def values(schema: Schema) -> st.SearchStrategy[Any]:
    base = _required_values(schema)
    return st.one_of(st.none(), base) if schema.optional else base


def _required_values(schema: Schema) -> st.SearchStrategy[Any]:
    t = schema.type
    if t in INTEGER_RANGES:
        low, high = INTEGER_RANGES[t]
        return st.integers(low, high)
    simple: dict[Type, st.SearchStrategy[Any]] = {
        Type.FLOAT32: st.floats(allow_nan=False, allow_infinity=False, width=32),
        Type.FLOAT64: st.floats(allow_nan=False, allow_infinity=False),
        Type.BOOLEAN: st.booleans(), Type.STRING: st.text(max_size=8), Type.BYTES: st.binary(max_size=8),
    }
    if t in simple:
        return simple[t]
    assert schema.value_schema is not None or t is Type.STRUCT
    if t is Type.ARRAY:
        assert schema.value_schema is not None
        return st.lists(values(schema.value_schema), max_size=3)
    if t is Type.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        return st.dictionaries(_required_values(schema.key_schema), values(schema.value_schema), max_size=3)
    return st.fixed_dictionaries({f.name: values(f.schema) for f in schema.fields}).map(
        lambda d: Struct(schema, d))


@st.composite
def schema_and_value(draw: st.DrawFn) -> tuple[Schema, Any]:
    schema = draw(schemas())
    return schema, draw(values(schema))


