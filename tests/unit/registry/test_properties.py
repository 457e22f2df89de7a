"""Property tests: generated schemas of every format are compatible with themselves at every level; Avro's checker
agrees with fastavro's own schema resolution on real data; typical evolutions get the expected verdicts; the
levels' transitive semantics match the pairwise checks."""

from __future__ import annotations

import io
import json
from typing import Any

from fastavro import parse_schema as fastavro_parse
from fastavro import schemaless_reader, schemaless_writer
from fastavro.utils import generate_many
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.registry.compatibility import CompatibilityLevel, compatibility_errors
from moldau.registry.formats import InvalidPayload, ParsedSchema, parse_schema
from moldau.registry.formats.avro import AvroSchema
from moldau.registry.formats.avro_binary import check_binary
from moldau.registry.formats.protobuf import ProtobufSchema
from tests.unit.registry.strategies import FIELD_NAMES, PRIMITIVES, avro_records, avro_types, json_schemas

PROMOTIONS = {"int": ["long", "float", "double"], "long": ["float", "double"], "float": ["double"]}
LEVELS = list(CompatibilityLevel)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def avro(schema: Any) -> ParsedSchema:
    return parse_schema("AVRO", json.dumps(schema), {})


@SETTINGS
@given(avro_records())
def test_avro_schema_is_compatible_with_itself_at_every_level(schema: dict[str, Any]) -> None:
    parsed = avro(schema)
    again = avro(json.loads(json.dumps(schema, indent=2)))  # the same schema written differently
    assert parsed.canonical() == again.canonical()
    for level in LEVELS:
        assert compatibility_errors(level, again, [parsed, parsed]) == []


@st.composite
def avro_evolutions(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A writer record and a reader record that Avro's resolution rules say can read it: fields dropped,
    numbers promoted, union branches and enum symbols added, fields with defaults added."""
    writer = draw(avro_records())
    fields = []
    for field in writer["fields"]:
        if draw(st.booleans()) and draw(st.booleans()):
            continue  # dropped by the reader
        field_type = field["type"]
        if isinstance(field_type, str) and field_type in PROMOTIONS and draw(st.booleans()):
            field_type = draw(st.sampled_from(PROMOTIONS[field_type]))
        elif isinstance(field_type, list):
            # Not string or bytes: a reader union holding both may resolve the writer's bytes as a string.
            more = [p for p in PRIMITIVES if p not in field_type and p not in ("string", "bytes")]
            field_type = [*field_type, *more[:draw(st.integers(0, 2))]]
        elif isinstance(field_type, dict) and field_type["type"] == "enum":
            field_type = {**field_type, "symbols": [*field_type["symbols"], "ZZ_ADDED"]}
        fields.append({**field, "type": field_type})
    for index in range(draw(st.integers(0, 2))):
        fields.append({"name": f"added_{index}", "type": ["null", "string"], "default": None})
    return writer, {**writer, "fields": fields}


@SETTINGS
@given(avro_evolutions())
def test_avro_checker_agrees_with_fastavro_resolution(evolution: tuple[dict[str, Any], dict[str, Any]]) -> None:
    writer, reader = evolution
    assert avro(reader).read_errors(avro(writer)) == []
    writer_parsed, reader_parsed = fastavro_parse(writer), fastavro_parse(reader)
    for datum in generate_many(writer, 3):
        out = io.BytesIO()
        schemaless_writer(out, writer_parsed, datum)
        avro(writer).check_payload(out.getvalue())
        out.seek(0)
        decoded = schemaless_reader(out, writer_parsed, reader_parsed)
        assert isinstance(decoded, dict), decoded
        assert set(decoded) == {field["name"] for field in reader["fields"]}


@SETTINGS
@given(avro_records(), st.data())
def test_avro_field_without_default(schema: dict[str, Any], data: st.DataObject) -> None:
    fields = schema["fields"]
    if not fields:
        fields = schema["fields"] = [{"name": "only", "type": "int"}]
    index = data.draw(st.integers(0, len(fields) - 1))
    smaller = {**schema, "fields": fields[:index] + fields[index + 1:]}
    old, new = avro(schema), avro(smaller)
    # Removing a field without a default: the old reader misses it in new data (FORWARD), the new one is fine.
    assert compatibility_errors("BACKWARD", new, [old]) == []
    forward = compatibility_errors("FORWARD", new, [old])
    assert len(forward) == 1 and f"field '{fields[index]['name']}'" in forward[0]
    # The other way round: adding that field without a default is not BACKWARD compatible.
    assert compatibility_errors("BACKWARD", old, [new]) != []
    assert compatibility_errors("FORWARD", old, [new]) == []


@SETTINGS
@given(avro_records(), avro_types("_new", 1))
def test_avro_optional_field_with_default_is_fully_compatible(schema: dict[str, Any], new_type: Any) -> None:
    if isinstance(new_type, list) or new_type == "null":
        new_type = "string"  # a union cannot hold a union, nor null twice
    added = {"name": "zz_added", "type": ["null", new_type], "default": None}
    old, new = avro(schema), avro({**schema, "fields": [*schema["fields"], added]})
    assert compatibility_errors("FULL_TRANSITIVE", new, [old]) == []


def versions() -> list[ParsedSchema]:
    """Records over fields a, b, c with and without defaults: a small pool with every kind of verdict."""
    out = []
    for mask in range(1, 8):
        for defaults in (False, True):
            fields = [{"name": name, "type": "int", **({"default": 0} if defaults else {})}
                      for bit, name in enumerate("abc") if mask >> bit & 1]
            out.append(avro({"type": "record", "name": "V", "fields": fields}))
    return out


VERSIONS = versions()


@SETTINGS
@given(st.lists(st.sampled_from(VERSIONS), min_size=1, max_size=4), st.sampled_from(VERSIONS),
       st.sampled_from(LEVELS))
def test_levels_match_pairwise_checks(previous: list[ParsedSchema], new: ParsedSchema,
                                      level: CompatibilityLevel) -> None:
    checked = previous if level.transitive else previous[-1:]
    backward_ok = all(not new.read_errors(old) for old in checked)
    forward_ok = all(not old.read_errors(new) for old in checked)
    expected = {"NONE": True, "BACKWARD": backward_ok, "FORWARD": forward_ok,
                "FULL": backward_ok and forward_ok}[level.value.removesuffix("_TRANSITIVE")]
    assert (compatibility_errors(level, new, previous) == []) == expected


@SETTINGS
@given(json_schemas(), st.sampled_from([None, "Thing"]))
def test_json_schema_is_compatible_with_itself_at_every_level(schema: dict[str, Any], title: str | None) -> None:
    if title:
        schema = {"title": title, **schema}
    parsed = parse_schema("JSON", json.dumps(schema), {})
    again = parse_schema("JSON", json.dumps(schema, indent=3), {})
    assert parsed.canonical() == again.canonical() and parsed.record_name() == title
    for level in LEVELS:
        assert compatibility_errors(level, again, [parsed, parsed]) == []


@SETTINGS
@given(st.dictionaries(FIELD_NAMES, json_schemas(1), max_size=3), FIELD_NAMES, json_schemas(1))
def test_json_closed_model_optional_property(props: dict[str, Any], name: str, extra: Any) -> None:
    props.pop(name, None)
    old = parse_schema("JSON", json.dumps({"type": "object", "properties": props, "additionalProperties": False}), {})
    with_extra = {"type": "object", "properties": {**props, name: extra}, "additionalProperties": False}
    new = parse_schema("JSON", json.dumps(with_extra), {})
    # A closed writer never wrote the new property: an optional addition reads old data; the old closed reader
    # cannot read data carrying it.
    assert compatibility_errors("BACKWARD", new, [old]) == []
    forward = compatibility_errors("FORWARD", new, [old])
    assert len(forward) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in forward[0]
    required = parse_schema("JSON", json.dumps({**with_extra, "required": [name]}), {})
    assert any("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" in e
               for e in compatibility_errors("BACKWARD", required, [old]))


@SETTINGS
@given(json_schemas())
def test_json_allowing_null_as_well_is_backward_compatible(schema: dict[str, Any]) -> None:
    if schema.get("type") in (None, "null") or not isinstance(schema.get("type"), str):
        schema = {"type": "string"}
    old = parse_schema("JSON", json.dumps(schema), {})
    new = parse_schema("JSON", json.dumps({**schema, "type": [schema["type"], "null"]}), {})
    assert compatibility_errors("BACKWARD", new, [old]) == []
    assert any("TYPE_NARROWED" in error for error in compatibility_errors("FORWARD", new, [old]))


PROTO_SCALARS = ["int32", "int64", "uint32", "uint64", "bool", "sint32", "sint64", "fixed32", "sfixed32", "fixed64",
                 "sfixed64", "float", "double", "string", "bytes"]
WIRE_GROUPS = [["int32", "int64", "uint32", "uint64", "bool"], ["sint32", "sint64"], ["fixed32", "sfixed32"],
               ["fixed64", "sfixed64"], ["string", "bytes"]]


Field = tuple[str, str, int, str]  # name, scalar type, number, label ("", "optional " or "repeated ")


def proto_json_name(name: str) -> str:
    """protoc's default JSON name of a field: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
            continue
        out.append(char.upper() if upper else char)
        upper = False
    return "".join(out)


@st.composite
def proto_messages(draw: st.DrawFn) -> list[Field]:
    # protoc refuses two fields whose JSON names clash (`a` and `a_` are both "a").
    names = draw(st.lists(FIELD_NAMES, min_size=1, max_size=5, unique_by=proto_json_name))
    numbers = draw(st.lists(st.integers(1, 40), min_size=len(names), max_size=len(names), unique=True))
    return [(name, draw(st.sampled_from(PROTO_SCALARS)), number, draw(st.sampled_from(["", "optional ", "repeated "])))
            for name, number in zip(names, numbers, strict=True)]


def proto_text(fields: list[Field], oneof: int) -> str:
    """Message M with `fields`, the last `oneof` of the unlabelled ones inside a oneof."""
    plain = [f for f in fields if not f[3]]
    grouped = plain[len(plain) - oneof:] if oneof else []
    body = " ".join(f"{label}{kind} {name} = {number};" for name, kind, number, label in fields if
                    (name, kind, number, label) not in grouped)
    if grouped:
        body += " oneof choice { " + " ".join(f"{kind} {name} = {number};" for name, kind, number, _ in grouped) + " }"
    return (f'syntax = "proto3";\npackage gen;\nmessage M {{ {body} map<string, M> children = 99; }}\n'
            "message Other { string note = 1; }\n")


@settings(max_examples=8, deadline=None)
@given(proto_messages(), st.integers(0, 2), st.data())
def test_protobuf_same_wire_group_changes(fields: list[Field], oneof: int, data: st.DataObject) -> None:
    writer = parse_schema("PROTOBUF", proto_text(fields, oneof), {})
    for level in LEVELS:
        assert compatibility_errors(level, writer, [writer]) == []
    regenerated = parse_schema("PROTOBUF", writer.normalized(), {})
    assert regenerated.normalized() == writer.normalized()
    assert compatibility_errors("FULL", regenerated, [writer]) == []
    changed = []
    for name, kind, number, label in fields:
        group = next((g for g in WIRE_GROUPS if kind in g), [kind])
        changed.append((f"{name}_renamed", data.draw(st.sampled_from(group)), number, label))
    reader = parse_schema("PROTOBUF", proto_text(changed, oneof), {})
    assert compatibility_errors("FULL", reader, [writer]) == []
    assert writer.record_name() == "gen.M" and writer.record_name([1]) == "gen.Other"
    # Data written with the writer's message class parses as the reader's message.
    assert isinstance(writer, ProtobufSchema)
    values = {"bool": True, "string": "text", "bytes": b"ascii", "float": 1.5, "double": 2.5}
    built = writer.message_class([0])()
    for name, kind, _, label in fields:
        value = values.get(kind, 7)
        if label == "repeated ":
            getattr(built, name).extend([value, value])
        else:
            setattr(built, name, value)
    built.children["x"].CopyFrom(writer.message_class([0])())
    reader.check_payload(built.SerializeToString())


@SETTINGS
@given(avro_records(), st.data())
def test_avro_binary_walk_agrees_with_fastavro(schema: dict[str, Any], data: st.DataObject) -> None:
    """The walk used for schemas with zero-width array items accepts real data, rejects truncated or extended
    data, and never accepts bytes fastavro rejects (it is stricter in one way: fastavro takes a negative union
    or enum index as counting from the end)."""
    parsed = avro(schema)
    assert isinstance(parsed, AvroSchema)
    writer = fastavro_parse(schema)
    for datum in generate_many(schema, 2):
        out = io.BytesIO()
        schemaless_writer(out, writer, datum)
        payload = out.getvalue()
        assert walk_accepts(parsed, payload)
        assert not walk_accepts(parsed, payload + b"\x00")
        if payload:
            assert not walk_accepts(parsed, payload[:-1])
            index = data.draw(st.integers(0, len(payload) - 1))
            changed = payload[:index] + bytes([data.draw(st.integers(0, 255))]) + payload[index + 1:]
            if walk_accepts(parsed, changed) and not parsed.walk_payloads:
                parsed.check_payload(changed)  # fastavro accepts it too


def walk_accepts(parsed: AvroSchema, payload: bytes) -> bool:
    try:
        check_binary(payload, parsed.expanded, parsed.named)
    except InvalidPayload:
        return False
    return True
