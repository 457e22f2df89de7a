"""The fast Avro accept: it accepts what the Avro format's full decode accepts, and never anything it refuses."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest
from fastavro import parse_schema as fastavro_parse
from fastavro import schemaless_writer

from moldau.registry import avro_fast
from moldau.registry.avro_fast import compile_schema, payload_check
from moldau.registry.formats import InvalidPayload, ParsedSchema, parse_schema

pytestmark = pytest.mark.skipif(avro_fast._valid is None, reason="moldau._avrocheck is not built")

EVERY_KIND = {
    "type": "record", "name": "Everything", "namespace": "com.example", "fields": [
        {"name": "n", "type": "null"}, {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"},
        {"name": "l", "type": "long"}, {"name": "f", "type": "float"}, {"name": "d", "type": "double"},
        {"name": "raw", "type": "bytes"}, {"name": "s", "type": {"type": "string"}},
        {"name": "hash", "type": {"type": "fixed", "name": "Hash", "size": 4}},
        {"name": "colour", "type": {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "counts", "type": {"type": "map", "values": "long"}},
        {"name": "maybe", "type": ["null", "string", "Hash"]},
        {"name": "again", "type": "Colour"},
        {"name": "inner", "type": {"type": "record", "name": "Inner", "namespace": "com.other",
                                   "fields": [{"name": "x", "type": ["null", "Inner"]}]}},
    ]}
LIST = {"type": "record", "name": "Node", "fields": [
    {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"]}]}
ZERO_WIDTH_ITEMS = {"type": "record", "name": "Z", "fields": [  # the format checks these by its own walk
    {"name": "nulls", "type": {"type": "array", "items": "null"}},
    {"name": "empty", "type": {"type": "array", "items": {"type": "fixed", "name": "Empty", "size": 0}}},
    {"name": "s", "type": "string"}]}
SCHEMAS = [EVERY_KIND, LIST, "string", {"type": "array", "items": {"type": "map", "values": ["null", "double"]}},
           ZERO_WIDTH_ITEMS]


def datum(schema: Any, rng: random.Random, named: dict[str, Any], depth: int = 0) -> Any:
    """A random value of `schema` (fastavro's in-memory form)."""
    if isinstance(schema, str):
        kind = schema
        if kind in named:
            return datum(named[kind], rng, named, depth)
    elif isinstance(schema, list):
        choices = schema[:1] if depth > 4 else schema
        return datum(rng.choice(choices), rng, named, depth + 1)
    else:
        kind = schema["type"]
        if "name" in schema:
            named[schema["name"]] = schema
    text = "".join(rng.choice("abc€✓\U0001f600 ") for _ in range(rng.randint(0, 6)))
    simple: dict[str, Any] = {
        "null": None, "boolean": rng.random() < 0.5, "int": rng.randint(-(2**31), 2**31 - 1),
        "long": rng.randint(-(2**63), 2**63 - 1), "float": rng.random(), "double": rng.random() * 1e300,
        "bytes": rng.randbytes(rng.randint(0, 5)), "string": text,
    }
    if kind in simple:
        return simple[kind]
    if kind == "fixed":
        return rng.randbytes(schema["size"])
    if kind == "enum":
        return rng.choice(schema["symbols"])
    if kind == "array":
        return [datum(schema["items"], rng, named, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "map":
        return {f"k{i}": datum(schema["values"], rng, named, depth + 1) for i in range(rng.randint(0, 3))}
    if kind in ("record", "error"):
        return {f["name"]: datum(f["type"], rng, named, depth + 1) for f in schema["fields"]}
    return datum(kind, rng, named, depth)


def encode(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, fastavro_parse(schema), value)
    return out.getvalue()


def decodes(schema: ParsedSchema, payload: bytes) -> bool:
    try:
        schema.check_payload(payload)
        return True
    except InvalidPayload:
        return False


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_the_fast_accept_agrees_with_the_full_decode(index: int) -> None:
    rng = random.Random(20261125 + index)
    raw = SCHEMAS[index]
    parsed = parse_schema("AVRO", json.dumps(raw), {})
    program = compile_schema(parsed.canonical())
    assert program is not None
    assert avro_fast._valid is not None
    accepted = mutated = 0
    for _ in range(1500):
        payload = bytearray(encode(raw, datum(raw, rng, {})))
        assert avro_fast._valid(program, bytes(payload), 0), bytes(payload)  # every valid datum is accepted
        for _ in range(rng.randint(1, 3)):  # then broken: flipped bytes, cut short, bytes added
            choice = rng.random()
            if choice < 0.6 and payload:
                payload[rng.randrange(len(payload))] = rng.randrange(256)
            elif choice < 0.8:
                del payload[rng.randrange(len(payload) + 1):]
            else:
                payload += rng.randbytes(rng.randint(1, 3))
        mutated += 1
        if avro_fast._valid(program, bytes(payload), 0):
            accepted += 1
            assert decodes(parsed, bytes(payload)), bytes(payload)  # never accepts what the decode refuses
    assert mutated > accepted  # the mutations do break records, or the test proves nothing


def test_a_refusal_is_decided_and_worded_by_the_full_decode() -> None:
    parsed = parse_schema("AVRO", json.dumps(EVERY_KIND), {})
    check = payload_check(parsed)
    good = b"\x00\x00\x00\x00\x01" + encode(EVERY_KIND, datum(EVERY_KIND, random.Random(1), {}))
    check(good, 5)
    with pytest.raises(InvalidPayload, match="bytes left over"):
        check(good + b"\x00", 5)
    with pytest.raises(InvalidPayload, match="not Avro binary"):
        check(good[:-1], 5)


@pytest.mark.parametrize("schema", [
    {"type": "long", "logicalType": "timestamp-millis"},  # fastavro converts, and a conversion may fail
    {"type": "record", "name": "R", "fields": [{"name": "r", "type": "com.example.Defined.Elsewhere"}]},
    {"type": "record", "name": "R", "namespace": "a", "fields": [
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 1}},
        {"name": "y", "type": {"type": "fixed", "name": "F", "namespace": "", "size": 2}},
        {"name": "z", "type": "F"}]},  # "F" could mean a.F or the null namespace's F
])
def test_schemas_it_cannot_vouch_for_keep_the_full_decode(schema: Any) -> None:
    assert compile_schema(json.dumps(schema)) is None


def test_namespaces_resolve_short_names_in_the_enclosing_namespace() -> None:
    schema = {"type": "record", "name": "R", "namespace": "a", "fields": [
        {"name": "x", "type": {"type": "fixed", "name": "F", "size": 1}},
        {"name": "y", "type": {"type": "fixed", "name": "b.F", "size": 2}},
        {"name": "z", "type": "F"}, {"name": "w", "type": "b.F"}]}
    program = compile_schema(json.dumps(schema))
    assert program is not None and avro_fast._valid is not None
    parsed = parse_schema("AVRO", json.dumps(schema), {})
    good = b"\x01\x02\x02\x03\x04\x04"  # x, y, z as a.F (1 byte), w as b.F (2 bytes)
    assert avro_fast._valid(program, good, 0) and decodes(parsed, good)
    assert not avro_fast._valid(program, good + b"\x05", 0)
