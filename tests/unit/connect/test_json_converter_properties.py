"""Property tests: JsonConverter round-trips Connect values, with schemas and without."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from moldau.connect.converters.json import JsonConverter
from moldau.connect.data import Schema, SchemaAndValue
from tests.unit.connect.strategies import schema_and_value


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
