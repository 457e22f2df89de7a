"""Avro: parsing with references, canonical texts, schema-resolution compatibility and payload checks."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from fastavro import parse_schema as fastavro_parse
from fastavro import schemaless_writer

from moldau.registry.formats import InvalidPayload, InvalidSchema, parse_schema
from moldau.registry.formats.avro import AvroSchema


def avro(schema: Any, references: dict[str, Any] | None = None) -> AvroSchema:
    refs = {name: json.dumps(text) for name, text in (references or {}).items()}
    parsed = parse_schema("AVRO", json.dumps(schema), refs)
    assert isinstance(parsed, AvroSchema)
    return parsed


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


USER = record("User", {"name": "name", "type": "string"}, {"name": "id", "type": "int"}, namespace="com.acme")


def encode(schema: Any, datum: Any, named: dict[str, Any] | None = None) -> bytes:
    out = io.BytesIO()
    schemaless_writer(out, fastavro_parse(schema, named_schemas=named if named is not None else {}), datum)
    return out.getvalue()


def test_parses_primitive_and_record() -> None:
    assert avro("string").record_name() is None
    assert avro(USER).record_name() == "com.acme.User"
    assert avro(USER).schema_type == "AVRO"


@pytest.mark.parametrize("text", ["{not json", '{"type": "record", "name": "X"}', '"nosuchtype"',
                                  '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
                                  '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", '
                                  '"default": "x"}]}'])
def test_rejects_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("AVRO", text, {})


def test_unknown_schema_type_names_it() -> None:
    with pytest.raises(InvalidSchema, match="XML"):
        parse_schema("XML", "{}", {})


def test_references_resolve_named_types_in_any_order() -> None:
    address = record("Address", {"name": "city", "type": "string"}, namespace="com.acme")
    country = {"type": "enum", "name": "com.acme.Country", "symbols": ["CZ", "DE"]}
    located = record("Located", {"name": "address", "type": "com.acme.Address"},
                     {"name": "country", "type": "com.acme.Country"}, namespace="com.acme")
    person = record("Person", {"name": "home", "type": "com.acme.Located"}, namespace="com.acme")
    # "com.acme.Located" needs Address and Country: the references are given in an order that needs retrying.
    schema = avro(person, {"com.acme.Located": located, "com.acme.Address": address, "com.acme.Country": country})
    named: dict[str, Any] = {}
    for ref in (address, country, located):
        fastavro_parse(ref, named_schemas=named)
    schema.check_payload(encode(person, {"home": {"address": {"city": "Prague"}, "country": "CZ"}}, named))


def test_missing_reference_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match=r"unknown type 'com\.acme\.Address'"):
        avro(record("P", {"name": "a", "type": "com.acme.Address"}))


def test_canonical_is_stable_across_whitespace_and_key_order() -> None:
    spaced = '{ "name" : "User", "type" : "record",\n  "fields" : [ {"type": "int", "name": "id"} ] }'
    tight = '{"type":"record","name":"User","fields":[{"name":"id","type":"int"}]}'
    assert parse_schema("AVRO", spaced, {}).canonical() == parse_schema("AVRO", tight, {}).canonical() == tight


def test_canonical_keeps_doc_default_and_aliases_but_normalized_uses_full_names() -> None:
    schema = avro({"type": "record", "name": "User", "namespace": "com.acme", "doc": "a user", "aliases": ["Person"],
                   "fields": [{"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A"]},
                               "default": "A"},
                              {"name": "again", "type": "Kind"}, {"name": "n", "type": {"type": "int"}}]})
    canonical = json.loads(schema.canonical())
    assert canonical["doc"] == "a user" and canonical["fields"][0]["default"] == "A"
    normalized = json.loads(schema.normalized())
    assert normalized["name"] == "com.acme.User" and "namespace" not in normalized
    assert normalized["aliases"] == ["com.acme.Person"]
    assert normalized["fields"][0]["type"]["name"] == "com.acme.Kind"
    assert normalized["fields"][1]["type"] == "com.acme.Kind"
    assert normalized["fields"][2]["type"] == "int"
    same = avro({"namespace": "com.acme", "name": "User", "type": "record", "aliases": ["com.acme.Person"],
                 "doc": "a user",
                 "fields": [{"name": "kind", "default": "A",
                             "type": {"type": "enum", "name": "com.acme.Kind", "symbols": ["A"]}},
                            {"name": "again", "type": "com.acme.Kind"}, {"name": "n", "type": "int"}]})
    assert same.normalized() == schema.normalized()
    assert same.canonical() != schema.canonical()


def test_payload_ok_and_bad() -> None:
    schema = avro(USER)
    good = encode(USER, {"name": "ada", "id": 7})
    schema.check_payload(good)
    with pytest.raises(InvalidPayload, match="left over"):
        schema.check_payload(good + b"\x00")
    with pytest.raises(InvalidPayload):
        schema.check_payload(good[:-1])
    with pytest.raises(InvalidPayload):
        schema.check_payload(b"")


def test_field_added_without_default_is_not_backward_compatible() -> None:
    old = avro(USER)
    new = avro(record("User", *USER["fields"], {"name": "age", "type": "int"}, namespace="com.acme"))
    assert new.read_errors(old) == [
        "READER_FIELD_MISSING_DEFAULT_VALUE: field 'age' at /fields/2 of record 'com.acme.User' has no default "
        "and is missing from the writer's record"]
    assert old.read_errors(new) == []  # a removed field is fine for the reader


def test_field_added_with_default_is_compatible_both_ways() -> None:
    old = avro(USER)
    new = avro(record("User", *USER["fields"], {"name": "age", "type": ["null", "int"], "default": None},
                      namespace="com.acme"))
    assert new.read_errors(old) == [] and old.read_errors(new) == []


@pytest.mark.parametrize(("writer", "reader"), [("int", "long"), ("int", "float"), ("int", "double"),
                                                ("long", "float"), ("long", "double"), ("float", "double"),
                                                ("string", "bytes"), ("bytes", "string")])
def test_promotions(writer: str, reader: str) -> None:
    assert avro(reader).read_errors(avro(writer)) == []


@pytest.mark.parametrize(("writer", "reader"), [("long", "int"), ("double", "float"), ("string", "int"),
                                                ("boolean", "int"), ("null", "string")])
def test_type_mismatches(writer: str, reader: str) -> None:
    errors = avro(reader).read_errors(avro(writer))
    assert errors == [f"TYPE_MISMATCH: reader type {reader} at / cannot read writer type {writer}"]


def test_nested_field_type_change_names_the_path() -> None:
    old = avro(record("R", {"name": "a", "type": "string"},
                      {"name": "b", "type": {"type": "array", "items": "string"}}))
    new = avro(record("R", {"name": "a", "type": "string"},
                      {"name": "b", "type": {"type": "array", "items": "int"}}))
    assert new.read_errors(old) == ["TYPE_MISMATCH: reader type int at /fields/1/type/items cannot read writer type "
                                    "string"]


def test_unions() -> None:
    nullable = avro(["null", "string"])
    assert nullable.read_errors(avro("string")) == []  # reader union has a branch for the writer's type
    errors = avro("string").read_errors(nullable)  # the writer may have written null
    assert errors == ["TYPE_MISMATCH: reader type string at / cannot read writer type null"]
    assert avro(["null", "long"]).read_errors(avro(["null", "int"])) == []
    assert avro(["null", "int"]).read_errors(avro(["null", "string"])) == [
        "MISSING_UNION_BRANCH: reader union at / has no branch that can read the writer's string"]


def test_enums() -> None:
    writer = avro({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    assert avro({"type": "enum", "name": "E", "symbols": ["A", "B"]}).read_errors(writer) == [
        "MISSING_ENUM_SYMBOLS: enum 'E' at / lacks the writer's symbols ['C'] and has no default"]
    assert avro({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"}).read_errors(writer) == []
    assert writer.read_errors(avro({"type": "enum", "name": "E", "symbols": ["A"]})) == []


def test_records_match_by_name_or_alias() -> None:
    writer = avro(record("Old", {"name": "a", "type": "int"}, namespace="ns"))
    renamed = avro(record("New", {"name": "a", "type": "int"}, namespace="ns"))
    assert renamed.read_errors(writer) == [
        "NAME_MISMATCH: reader record 'ns.New' at / does not match the writer's 'ns.Old' (by name or alias)"]
    aliased = avro(record("New", {"name": "b", "aliases": ["a"], "type": "int"}, namespace="ns", aliases=["Old"]))
    assert aliased.read_errors(writer) == []
    # As in Avro's own checker, names compare unqualified: moving a record to another namespace keeps it readable.
    assert avro(record("Old", {"name": "a", "type": "int"}, namespace="other")).read_errors(writer) == []


def test_fixed_size_and_maps() -> None:
    assert avro({"type": "fixed", "name": "F", "size": 4}).read_errors(avro({"type": "fixed", "name": "F",
                                                                             "size": 8})) == [
        "FIXED_SIZE_MISMATCH: fixed 'F' at / has size 4 but the writer's has size 8"]
    assert avro({"type": "map", "values": "long"}).read_errors(avro({"type": "map", "values": "int"})) == []
    assert avro({"type": "map", "values": "int"}).read_errors(avro({"type": "map", "values": "long"})) != []


def test_recursive_types_terminate() -> None:
    def linked(value_type: str) -> dict[str, Any]:
        return record("Node", {"name": "value", "type": value_type}, {"name": "next", "type": ["null", "Node"]})

    assert avro(linked("long")).read_errors(avro(linked("int"))) == []
    assert avro(linked("int")).read_errors(avro(linked("long"))) == [
        "TYPE_MISMATCH: reader type int at /fields/0/type cannot read writer type long"]


def test_schema_types_do_not_mix() -> None:
    class Other:
        schema_type = "JSON"

    assert avro("string").read_errors(Other()) != []  # type: ignore[arg-type]


def zigzag(value: int) -> bytes:
    encoded, out = (value << 1) ^ (value >> 63), bytearray()
    while encoded > 0x7F:
        out.append(encoded & 0x7F | 0x80)
        encoded >>= 7
    out.append(encoded)
    return bytes(out)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("items", ["null", record("Empty"), {"type": "fixed", "name": "Z", "size": 0},
                                   record("Nulls", {"name": "n", "type": "null"})])
def test_huge_counts_of_zero_width_items_do_not_hang(items: Any) -> None:
    schema = avro(record("R", {"name": "xs", "type": {"type": "array", "items": items}},
                         {"name": "s", "type": "string"}))
    schema.check_payload(zigzag(2**40) + zigzag(0) + zigzag(2) + b"ok")
    schema.check_payload(zigzag(-3) + zigzag(0) + zigzag(0) + zigzag(0))  # a block with its byte size
    for bad in (zigzag(2**40) + zigzag(0), zigzag(1) + zigzag(0) + zigzag(3) + b"ok", b"\xff" * 11,
                zigzag(0) + zigzag(1) + b"\xff", zigzag(0) + zigzag(0) + b"x"):
        with pytest.raises(InvalidPayload):
            schema.check_payload(bad)
