"""Hypothesis strategies for generated Avro schemas, shared by the registry's property tests."""

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
