"""JSON Schema: parsing per draft, references, canonical texts, payload checks and Confluent's compatibility rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from moldau.registry.formats import InvalidPayload, InvalidSchema, parse_schema
from moldau.registry.formats.json_schema import JsonSchema


def js(schema: Any, references: dict[str, Any] | None = None) -> JsonSchema:
    refs = {name: json.dumps(doc) for name, doc in (references or {}).items()}
    parsed = parse_schema("JSON", json.dumps(schema), refs)
    assert isinstance(parsed, JsonSchema)
    return parsed


def obj(props: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, **({"required": required} if required else {}), **extra}


def backward(old: Any, new: Any) -> list[str]:
    """A BACKWARD check: the new schema reads data written with the old one."""
    return js(new).read_errors(js(old))


def kinds(errors: list[str]) -> list[str]:
    return [error.split(" at ")[0] for error in errors]


PERSON = obj({"name": {"type": "string"}, "age": {"type": "integer"}}, ["name"], title="Person")


@pytest.mark.parametrize("text", ["{nope", "[1, 2]", '"string"', '{"type": 5}', '{"properties": {"a": 3}}',
                                  '{"$schema": "http://example.com/my-meta", "type": "string"}',
                                  '{"type": "object", "properties": {"a": {"$ref": "missing.json"}}}',
                                  '{"$ref": "#/definitions/none"}'])
def test_rejects_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", text, {})


@pytest.mark.parametrize("draft", ["http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
                                   "http://json-schema.org/draft-07/schema#",
                                   "https://json-schema.org/draft/2019-09/schema",
                                   "https://json-schema.org/draft/2020-12/schema"])
def test_drafts_by_dollar_schema(draft: str) -> None:
    schema = js({"$schema": draft, **PERSON})
    schema.check_payload(json.dumps({"name": "ada", "age": 36}).encode())
    with pytest.raises(InvalidPayload, match="age"):
        schema.check_payload(json.dumps({"name": "ada", "age": "old"}).encode())


def test_draft_specific_keywords() -> None:
    # Draft 4's exclusiveMaximum is a boolean; in draft 7 it must be a number.
    js({"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 5,
        "exclusiveMaximum": True}).check_payload(b"4")
    with pytest.raises(InvalidSchema):
        js({"type": "number", "maximum": 5, "exclusiveMaximum": True})
    schema = js({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "array",
                 "prefixItems": [{"type": "string"}], "items": False})
    schema.check_payload(b'["a"]')
    with pytest.raises(InvalidPayload):
        schema.check_payload(b'["a", 1]')


def test_boolean_schemas() -> None:
    js(True).check_payload(b'{"anything": 1}')
    with pytest.raises(InvalidPayload):
        js(False).check_payload(b"1")


def test_references_by_ref_url() -> None:
    address = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    country = {"type": "string", "enum": ["CZ", "DE"]}
    located = {"type": "object", "properties": {"address": {"$ref": "address.json"},
                                                "country": {"$ref": "https://acme.example/country.json"}}}
    schema = js(obj({"home": {"$ref": "located.json"}}),
                {"located.json": located, "address.json": address, "https://acme.example/country.json": country})
    schema.check_payload(json.dumps({"home": {"address": {"city": "Brno"}, "country": "CZ"}}).encode())
    with pytest.raises(InvalidPayload, match="city"):
        schema.check_payload(json.dumps({"home": {"address": {}}}).encode())
    with pytest.raises(InvalidPayload):
        schema.check_payload(json.dumps({"home": {"country": "FR"}}).encode())


def test_references_relative_to_id() -> None:
    schema = js({"$id": "https://acme.example/schemas/order.json", "type": "object",
                 "properties": {"item": {"$ref": "item.json"}}}, {"item.json": {"type": "string"}})
    schema.check_payload(b'{"item": "x"}')
    with pytest.raises(InvalidPayload):
        schema.check_payload(b'{"item": 1}')


def test_canonical_is_stable_and_normalized_sorts() -> None:
    spaced = '{\n  "type" : "object",\n  "required": ["b", "a"],\n  "properties": {"b": {"type": "string"}}\n}'
    tight = '{"type":"object","required":["b","a"],"properties":{"b":{"type":"string"}}}'
    assert parse_schema("JSON", spaced, {}).canonical() == tight
    reordered = '{"properties":{"b":{"type":"string"}},"required":["a","b"],"type":"object"}'
    assert parse_schema("JSON", reordered, {}).canonical() != tight
    assert parse_schema("JSON", reordered, {}).normalized() == parse_schema("JSON", spaced, {}).normalized()


def test_record_name_is_title() -> None:
    assert js(PERSON).record_name() == "Person"
    assert js({"type": "string"}).record_name() is None


def test_payload_must_be_utf8_json() -> None:
    schema = js(PERSON)
    schema.check_payload(json.dumps({"name": "ada"}).encode())
    for bad in (b"\xff\xfe", b"{", b'{"age": 3}', b"[]"):
        with pytest.raises(InvalidPayload):
            schema.check_payload(bad)


def test_identical_schemas_are_compatible() -> None:
    assert backward(PERSON, PERSON) == []


def test_property_added_to_open_content_model_is_incompatible() -> None:
    old = obj({"name": {"type": "string"}})
    new = obj({"name": {"type": "string"}, "email": {"type": "string"}})
    assert backward(old, new) == [
        "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at '#/properties/email': the writer's open content model may already "
        "carry this property with any value"]
    assert backward(new, old) == []  # removed from an open reader: PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL


def test_closed_content_model() -> None:
    old = obj({"name": {"type": "string"}}, additionalProperties=False)
    optional = obj({"name": {"type": "string"}, "email": {"type": "string"}}, additionalProperties=False)
    required = obj({"name": {"type": "string"}, "email": {"type": "string"}}, ["email"], additionalProperties=False)
    assert backward(old, optional) == []  # OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
    assert kinds(backward(old, required)) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    assert backward(optional, old) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at '#/properties/email': the reader's closed content model "
        "rejects a property the writer allows"]
    with_default = obj({"name": {"type": "string"}, "email": {"type": "string", "default": ""}}, ["email"],
                       additionalProperties=False)
    assert backward(old, with_default) == []


def test_partially_open_content_model() -> None:
    old = obj({"name": {"type": "string"}}, additionalProperties={"type": "string"})
    assert backward(old, obj({"name": {"type": "string"}, "nick": {"type": "string"}},
                             additionalProperties={"type": "string"})) == []
    assert kinds(backward(old, obj({"name": {"type": "string"}, "n": {"type": "integer"}},
                                   additionalProperties={"type": "string"}))) == [
        "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]
    assert kinds(backward(obj({"name": {"type": "string"}, "n": {"type": "integer"}}), old)) == [
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "ADDITIONAL_PROPERTIES_NARROWED"]


def test_additional_properties_changes() -> None:
    closed = {"type": "object", "additionalProperties": False}
    assert backward(closed, {"type": "object"}) == []
    assert kinds(backward({"type": "object"}, closed)) == ["ADDITIONAL_PROPERTIES_REMOVED"]


def test_required_changes() -> None:
    old = obj({"a": {"type": "string"}})
    assert kinds(backward(old, obj({"a": {"type": "string"}}, ["a"]))) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert backward(obj({"a": {"type": "string"}}, ["a"]), old) == []


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"type": "integer"}, {"type": "number"}, []),
    ({"type": "number"}, {"type": "integer"}, ["TYPE_NARROWED"]),
    ({"type": "string"}, {"type": ["string", "null"]}, []),
    ({"type": ["string", "null"]}, {"type": "string"}, ["TYPE_NARROWED"]),
    ({"type": "string"}, {"type": "boolean"}, ["TYPE_CHANGED"]),
    ({"type": "string"}, {}, []),
    ({"type": "string"}, False, ["TYPE_CHANGED"]),
])
def test_types(old: Any, new: Any, expected: list[str]) -> None:
    assert kinds(backward(old, new)) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 10}, []),
    ({"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_DECREASED"]),
    ({"type": "string"}, {"type": "string", "minLength": 1}, ["MIN_LENGTH_ADDED"]),
    ({"type": "string", "minLength": 1}, {"type": "string"}, []),
    ({"type": "string"}, {"type": "string", "pattern": "^a"}, ["PATTERN_ADDED"]),
    ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, ["PATTERN_CHANGED"]),
    ({"type": "integer", "maximum": 10}, {"type": "integer", "maximum": 5}, ["MAXIMUM_DECREASED"]),
    ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": -5}, []),
    ({"type": "integer", "minimum": 0}, {"type": "integer", "minimum": 5}, ["MINIMUM_INCREASED"]),
    ({"type": "number", "exclusiveMaximum": 3}, {"type": "number", "exclusiveMaximum": 4}, []),
    ({"type": "number", "multipleOf": 10}, {"type": "number", "multipleOf": 5}, []),
    ({"type": "number", "multipleOf": 5}, {"type": "number", "multipleOf": 10}, ["MULTIPLE_OF_EXPANDED"]),
    ({"type": "number", "multipleOf": 5}, {"type": "number", "multipleOf": 3}, ["MULTIPLE_OF_CHANGED"]),
    ({"type": "object", "maxProperties": 3}, {"type": "object", "maxProperties": 2}, ["MAX_PROPERTIES_DECREASED"]),
])
def test_bounds(old: Any, new: Any, expected: list[str]) -> None:
    assert kinds(backward(old, new)) == expected


def test_bound_messages_name_the_keyword_path() -> None:
    old = obj({"age": {"type": "integer", "maximum": 150}})
    new = obj({"age": {"type": "integer", "maximum": 120}})
    assert backward(old, new) == ["MAXIMUM_DECREASED at '#/properties/age/maximum': maximum 150 -> 120"]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, []),
    ({"enum": ["a", "b"]}, {"enum": ["a"]}, ["ENUM_ARRAY_NARROWED"]),
    ({"enum": ["a", "b"]}, {"enum": ["a", "c"]}, ["ENUM_ARRAY_CHANGED"]),
    ({"type": "string"}, {"type": "string", "enum": ["a"]}, ["ENUM_ARRAY_NARROWED"]),
    ({"const": 1}, {"enum": [1, 2]}, []),
    ({"enum": [1]}, {"enum": [True]}, ["ENUM_ARRAY_CHANGED"]),
])
def test_enums(old: Any, new: Any, expected: list[str]) -> None:
    assert kinds(backward(old, new)) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": {"type": "number"}}, []),
    ({"type": "array", "items": {"type": "number"}}, {"type": "array", "items": {"type": "string"}},
     ["TYPE_CHANGED"]),
    ({"type": "array"}, {"type": "array", "items": {"type": "string"}}, ["SCHEMA_ADDED"]),
    ({"type": "array", "minItems": 1}, {"type": "array"}, []),
    ({"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
    ({"type": "array", "items": [{"type": "string"}], "additionalItems": False},
     {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False}, []),
    ({"type": "array", "items": [{"type": "string"}]},
     {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}, ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]),
    ({"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": False},
     {"type": "array", "items": [{"type": "string"}], "additionalItems": False},
     ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
])
def test_arrays(old: Any, new: Any, expected: list[str]) -> None:
    assert kinds(backward(old, new)) == expected


@pytest.mark.parametrize(("old", "new", "expected"), [
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]},
     {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}, []),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"oneOf": [{"type": "string"}]}, ["SUM_TYPE_NARROWED"]),
    ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "boolean"}]},
     ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]),
    ({"type": "string"}, {"oneOf": [{"type": "string"}, {"type": "null"}]}, []),
    ({"type": "string"}, {"oneOf": [{"type": "integer"}, {"type": "null"}]}, ["TYPE_CHANGED"]),
    ({"oneOf": [{"type": "string"}, {"type": "null"}]}, {"type": "string"}, ["SUM_TYPE_NARROWED"]),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, {"allOf": [{"type": "string"}]}, []),
    ({"allOf": [{"type": "string"}]}, {"allOf": [{"type": "string"}, {"maxLength": 3}]},
     ["PRODUCT_TYPE_EXTENDED"]),
    ({"allOf": [{"type": "string"}, {"maxLength": 3}]}, {"allOf": [{"type": "string"}, {"maxLength": 2}]},
     ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]),
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, {"anyOf": [{"type": "string"}, {"type": "integer"}]}, []),
    ({"anyOf": [{"type": "string"}]}, {"oneOf": [{"type": "string"}]}, ["COMBINED_TYPE_CHANGED"]),
])
def test_combined_schemas(old: Any, new: Any, expected: list[str]) -> None:
    assert kinds(backward(old, new)) == expected


def test_refs_are_followed_and_recursion_ends() -> None:
    def tree(value_type: str) -> dict[str, Any]:
        return {"definitions": {"node": obj({"value": {"type": value_type},
                                             "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}})},
                "$ref": "#/definitions/node"}

    assert backward(tree("integer"), tree("number")) == []
    assert kinds(backward(tree("number"), tree("integer"))) == ["TYPE_NARROWED"]
    shared = {"type": "integer"}
    with_ref = js(obj({"n": {"$ref": "n.json"}}), {"n.json": shared})
    assert with_ref.read_errors(js(obj({"n": {"type": "integer"}}))) == []
    assert kinds(js(obj({"n": {"type": "string"}})).read_errors(with_ref)) == ["TYPE_CHANGED"]


def test_not() -> None:
    assert kinds(backward({"type": "string"}, {"type": "string", "not": {"enum": ["x"]}})) == ["NOT_TYPE_EXTENDED"]
    assert backward({"type": "string", "not": {"enum": ["x"]}}, {"type": "string"}) == []


def test_recursion_through_combined_schemas_ends() -> None:
    def linked(value_type: str) -> dict[str, Any]:
        node = {"oneOf": [{"type": "null"},
                          obj({"value": {"type": value_type}, "next": {"$ref": "#/definitions/node"}})]}
        return {"definitions": {"node": node}, "$ref": "#/definitions/node"}

    assert backward(linked("integer"), linked("number")) == []
    assert backward(linked("number"), linked("integer")) == [
        "COMBINED_TYPE_SUBSCHEMAS_CHANGED at '#/oneOf': the writer's oneOf members [1] are read by none of the "
        "reader's"]


def test_deep_nesting_is_invalid_not_an_error() -> None:
    deep = b"[" * 100000 + b"]" * 100000
    with pytest.raises(InvalidSchema):
        parse_schema("JSON", deep.decode(), {})
    schema = js({"type": "array", "items": {"$ref": "#"}})
    schema.check_payload(b"[[[]]]")
    with pytest.raises(InvalidPayload, match="nested too deeply"):
        schema.check_payload(b"[" * 5000 + b"]" * 5000)
