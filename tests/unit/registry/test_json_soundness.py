"""JSON Schema compatibility is sound on generated cases: when a reader schema is judged able to read a writer
schema, every document valid under the writer's schema is valid under the reader's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from jsonschema import Draft7Validator  # type: ignore[import-untyped]

from moldau.registry.formats import parse_schema
from tests.unit.registry.strategies import json_schemas

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-9, 9) | st.text("xyz", max_size=3),
                           lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text("xyz", max_size=2),
                                                                                     inner, max_size=2),
                           max_leaves=4)


@st.composite
def instances(draw: st.DrawFn, schema: Any) -> Any:
    """A document meant to be valid under `schema` (one of `json_schemas`); the caller checks it is."""
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    if "oneOf" in schema:
        return draw(instances(draw(st.sampled_from(schema["oneOf"]))))
    kind = schema["type"]
    if kind == "string":
        low = schema.get("minLength", 0)
        return draw(st.text("abc", min_size=low, max_size=min(schema.get("maxLength", low + 4), low + 4)))
    if kind in ("integer", "number"):
        step = schema.get("multipleOf", 1)
        value = step * draw(st.integers(schema.get("minimum", -100) // step, schema.get("maximum", 100) // step))
        return value if kind == "integer" or draw(st.booleans()) else float(value)
    if kind == "boolean":
        return draw(st.booleans())
    if kind == "null":
        return None
    if kind == "array":
        return draw(st.lists(instances(schema["items"]), max_size=min(schema.get("maxItems", 3), 3)))
    out = {}
    for name, sub in schema.get("properties", {}).items():
        if name in schema.get("required", []) or draw(st.booleans()):
            out[name] = draw(instances(sub))
    extra = schema.get("additionalProperties", True)
    if extra is not False and draw(st.booleans()):
        key = draw(st.text("pqr", min_size=1, max_size=3))
        out.setdefault(key, draw(instances(extra)) if isinstance(extra, dict) else draw(JSON_VALUES))
    return out


@st.composite
def mutations(draw: st.DrawFn, schema: Any, depth: int = 0) -> Any:
    """`schema` with random changes, compatible or not."""
    if draw(st.integers(0, 6)) == 0:
        return draw(json_schemas(1))  # replaced outright
    out = dict(schema)
    if "oneOf" in out:
        branches = [draw(mutations(b, depth + 1)) for b in out["oneOf"] if draw(st.integers(0, 3))]
        out["oneOf"] = branches + draw(st.lists(json_schemas(0), max_size=1)) or [{"type": "null"}]
    if "enum" in out:
        values = [v for v in out["enum"] if draw(st.integers(0, 3))] + draw(st.lists(st.integers(-5, 5), max_size=1))
        out["enum"] = list({(type(v), v): v for v in values}.values()) or [0]
    for keyword in ("maxLength", "minLength", "maximum", "minimum", "maxItems", "multipleOf"):
        if keyword in out and draw(st.booleans()):
            out[keyword] = max(out[keyword] + draw(st.sampled_from([-1, 1])), 1)
    if "items" in out:
        out["items"] = draw(mutations(out["items"], depth + 1))
    if "properties" in out:
        props = {name: draw(mutations(sub, depth + 1)) for name, sub in out["properties"].items()
                 if draw(st.integers(0, 4))}
        if draw(st.booleans()):
            props[draw(st.sampled_from(["aa", "bb", "pq"]))] = draw(json_schemas(0))
        out["properties"] = props
        newly_required = draw(st.lists(st.sampled_from(sorted(props)), max_size=1)) if props else []
        out["required"] = sorted({*out.get("required", []), *newly_required} & set(props))
        if not out["required"]:
            del out["required"]
        if draw(st.integers(0, 3)) == 0:
            out["additionalProperties"] = draw(st.sampled_from([False, True, {"type": "string"}]))
    return out


def any_of(schema: Any) -> Any:
    """`schema` with `oneOf` read as `anyOf`: the checker, like Confluent's, does not judge oneOf's exclusivity
    (a reader oneOf whose branches overlap rejects documents matching two of them)."""
    if isinstance(schema, list):
        return [any_of(item) for item in schema]
    if isinstance(schema, dict):
        return {("anyOf" if key == "oneOf" else key): any_of(value) for key, value in schema.items()}
    return schema


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(json_schemas(), st.data())
def test_compatible_readers_accept_every_writer_document(writer: Any, data: st.DataObject) -> None:
    reader = data.draw(mutations(writer))
    errors = parse_schema("JSON", json.dumps(reader), {}).read_errors(parse_schema("JSON", json.dumps(writer), {}))
    assume(not errors)
    for _ in range(3):
        document = data.draw(instances(writer))
        if not Draft7Validator(writer).is_valid(document):
            continue  # e.g. a document matching two oneOf branches
        assert Draft7Validator(any_of(reader)).is_valid(document), (document, reader)
