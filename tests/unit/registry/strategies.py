"""Hypothesis strategies for generated Avro and JSON schemas, shared by the registry's property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
FIELD_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
SYMBOLS = st.from_regex(r"[A-Z][A-Z0-9_]{0,5}", fullmatch=True)


@st.composite
def avro_types(draw: st.DrawFn, path: str, depth: int) -> Any:
    kinds = ["primitive", "enum", "fixed"] + (["record", "array", "map", "union"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "primitive":
        return draw(st.sampled_from(PRIMITIVES))
    if kind == "enum":
        return {"type": "enum", "name": f"E{path}", "symbols": draw(st.lists(SYMBOLS, min_size=1, max_size=4,
                                                                            unique=True))}
    if kind == "fixed":
        return {"type": "fixed", "name": f"F{path}", "size": draw(st.integers(1, 8))}
    if kind == "array":
        return {"type": "array", "items": draw(avro_types(f"{path}a", depth - 1))}
    if kind == "map":
        return {"type": "map", "values": draw(avro_types(f"{path}m", depth - 1))}
    if kind == "union":
        # Not both string and bytes: resolution may then read the writer's bytes branch as the reader's string
        # (the first branch that matches, counting promotions), which real data with non-UTF-8 bytes breaks.
        return draw(st.lists(st.sampled_from(PRIMITIVES), min_size=1, max_size=4, unique=True).filter(
            lambda branches: not {"string", "bytes"} <= set(branches)))
    return draw(avro_records(path, depth - 1))


@st.composite
def avro_records(draw: st.DrawFn, path: str = "", depth: int = 2) -> dict[str, Any]:
    names = draw(st.lists(FIELD_NAMES, max_size=4, unique=True))
    fields = [{"name": name, "type": draw(avro_types(f"{path}_{index}", depth))} for index, name in enumerate(names)]
    return {"type": "record", "name": f"R{path}", "namespace": "gen", "fields": fields}


JSON_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array", "enum", "union"]


@st.composite
def json_schemas(draw: st.DrawFn, depth: int = 2) -> Any:
    kind = draw(st.sampled_from(JSON_TYPES if depth > 0 else [*JSON_TYPES[:5], "enum"]))
    schema: dict[str, Any]
    if kind == "string":
        schema = {"type": "string", **draw(st.fixed_dictionaries({}, optional={
            "maxLength": st.integers(5, 50), "minLength": st.integers(0, 4), "pattern": st.just("^[a-z]*$")}))}
    elif kind in ("integer", "number"):
        schema = {"type": kind, **draw(st.fixed_dictionaries({}, optional={
            "minimum": st.integers(-100, 0), "maximum": st.integers(1, 100), "multipleOf": st.sampled_from([1, 2])}))}
    elif kind == "object":
        props = draw(st.dictionaries(FIELD_NAMES, json_schemas(depth - 1), max_size=3))
        schema = {"type": "object", "properties": props}
        if props:
            schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), unique=True))
        model = draw(st.sampled_from(["open", "closed", "partial"]))
        if model != "open":
            schema["additionalProperties"] = False if model == "closed" else {"type": "string"}
    elif kind == "array":
        schema = {"type": "array", "items": draw(json_schemas(depth - 1)),
                  **draw(st.fixed_dictionaries({}, optional={"maxItems": st.integers(1, 9)}))}
    elif kind == "enum":
        schema = {"enum": draw(st.lists(st.one_of(st.integers(-5, 5), SYMBOLS, st.booleans()), min_size=1,
                                        max_size=4, unique_by=lambda v: (type(v), v)))}
    elif kind == "union":
        schema = {"oneOf": draw(st.lists(json_schemas(depth - 1), min_size=1, max_size=3))}
    else:
        schema = {"type": kind}
    return schema
