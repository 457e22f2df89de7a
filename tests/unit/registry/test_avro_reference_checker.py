"""Avro compatibility agrees with the Apache Avro library's own checker on generated reader/writer pairs."""

from __future__ import annotations

import json
from typing import Any

import avro.compatibility
import avro.schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.registry.formats import parse_schema
from tests.unit.registry.strategies import PRIMITIVES, avro_records


@st.composite
def mutated(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """`schema` with random changes, compatible or not: fields dropped, added with or without defaults, retyped;
    enum symbols dropped or added; fixed sizes changed; records renamed with or without an alias."""
    if isinstance(schema, (str, list)):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            return draw(st.sampled_from(PRIMITIVES))
        if choice == 1:
            return draw(st.lists(st.sampled_from(PRIMITIVES), min_size=1, max_size=4, unique=True))
        return schema
    kind = schema["type"]
    if kind == "enum":
        symbols = draw(st.lists(st.sampled_from([*schema["symbols"], "NEW_A", "NEW_B"]), min_size=1, unique=True))
        extra = {"default": symbols[0]} if draw(st.booleans()) else {}
        return {**schema, "symbols": symbols, **extra}
    if kind == "fixed":
        return {**schema, "size": draw(st.sampled_from([schema["size"], schema["size"] + 1]))}
    if kind == "array":
        return {**schema, "items": draw(mutated(schema["items"], depth + 1))}
    if kind == "map":
        return {**schema, "values": draw(mutated(schema["values"], depth + 1))}
    fields = []
    for field in schema["fields"]:
        if draw(st.integers(0, 4)) == 0:
            continue
        fields.append({**field, "type": draw(mutated(field["type"], depth + 1))})
    if draw(st.booleans()):
        added: dict[str, Any] = {"name": f"new_{depth}", "type": "int"}
        if draw(st.booleans()):
            added["default"] = 0
        fields.append(added)
    out = {**schema, "fields": fields}
    if depth == 0 and draw(st.integers(0, 5)) == 0:
        out["name"] = f"{schema['name']}Renamed"
        if draw(st.booleans()):
            out["aliases"] = [f"{schema['namespace']}.{schema['name']}"]  # the library wants full-name aliases
    return out


@st.composite
def pairs(draw: st.DrawFn) -> tuple[Any, Any]:
    writer = draw(avro_records())
    return writer, draw(mutated(writer))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_verdicts_match_the_avro_library(pair: tuple[Any, Any]) -> None:
    writer, reader = pair
    ours = parse_schema("AVRO", json.dumps(reader), {}).read_errors(parse_schema("AVRO", json.dumps(writer), {}))
    # The avro library leaves its checker's constructor unannotated.
    checker = avro.compatibility.ReaderWriterCompatibilityChecker()  # type: ignore[no-untyped-call]
    result = checker.get_compatibility(
        avro.schema.parse(json.dumps(reader)), avro.schema.parse(json.dumps(writer)))
    theirs = {kind.name.upper() for kind in result.incompatibilities}
    assert {error.split(":")[0] for error in ours} == theirs, (ours, result.messages)
