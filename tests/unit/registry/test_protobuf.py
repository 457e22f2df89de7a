"""Protobuf: compiling with the bundled protoc, references, message indexes, canonical and normalized texts,
payload checks against real serialized messages, and Confluent's compatibility rules."""

from __future__ import annotations

import base64

import pytest

from moldau.registry.formats import InvalidPayload, InvalidSchema, parse_schema
from moldau.registry.formats.protobuf import ProtobufSchema

ADDRESS = 'syntax = "proto3";\npackage geo;\nmessage Address { string city = 1; }\n'

ORDER = """
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "geo/address.proto";

// An order.
message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int64> totals = 3;
  geo.Address ship_to = 4;
  google.protobuf.Timestamp placed = 5;
  oneof payment { string card = 6; string voucher = 7; }
  message Line { string sku = 1; int32 quantity = 2; }
  message Gift { string note = 1; }
}
message Refund { string order_id = 1; sint64 cents = 2; }
"""


def proto(text: str, references: dict[str, str] | None = None) -> ProtobufSchema:
    parsed = parse_schema("PROTOBUF", text, references or {})
    assert isinstance(parsed, ProtobufSchema)
    return parsed


def message(body: str, syntax: str = "proto3", package: str = "") -> ProtobufSchema:
    head = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    return proto(head + body)


def kinds(errors: list[str]) -> list[str]:
    return [error.split(" at ")[0] for error in errors]


@pytest.fixture(scope="module")
def order() -> ProtobufSchema:
    return proto(ORDER, {"geo/address.proto": ADDRESS})


def test_message_indexes_select_messages(order: ProtobufSchema) -> None:
    assert order.record_name() == order.record_name([0]) == "shop.v1.Order"
    assert order.record_name([1]) == "shop.v1.Refund"
    assert order.record_name([0, 0]) == "shop.v1.Order.Line"
    assert order.record_name([0, 1]) == "shop.v1.Order.Gift"  # the map entry of `totals` is not counted
    assert order.record_name([2]) is None and order.record_name([0, 5]) is None


def test_payloads_of_real_messages(order: ProtobufSchema) -> None:
    order_class = order.message_class([0])
    line_class = order.message_class([0, 0])
    built = order_class(id="o-1", lines=[line_class(sku="x", quantity=2)], totals={"eur": 5}, card="1234")
    built.ship_to.city = "Brno"
    built.placed.seconds = 1700000000
    order.check_payload(built.SerializeToString())
    order.check_payload(order.message_class([1])(order_id="o-1", cents=-5).SerializeToString(), [1])
    order.check_payload(line_class(sku="y").SerializeToString(), [0, 0])
    with pytest.raises(InvalidPayload):
        order.check_payload(b"\x0a\x05ab")  # a length-delimited field cut short
    with pytest.raises(InvalidPayload):
        order.check_payload(b"\xff\xff\xff")
    with pytest.raises(InvalidPayload, match="select no message"):
        order.check_payload(b"", [7])


def test_unknown_fields_are_accepted() -> None:
    # Protobuf keeps unknown fields: a payload of another message type with fresh field numbers still parses.
    schema = message("message A { string a = 1; }\nmessage B { int64 b = 9; }")
    schema.check_payload(schema.message_class([1])(b=5).SerializeToString(), [0])


def test_proto2_required_fields_are_enforced() -> None:
    schema = message("message R { required string name = 1; optional int32 n = 2; }", syntax="proto2")
    schema.check_payload(schema.message_class([0])(name="x").SerializeToString())
    lacking = schema.message_class([0])(n=3).SerializePartialToString()
    with pytest.raises(InvalidPayload, match="lacks required fields: name"):
        schema.check_payload(lacking)


@pytest.mark.parametrize("text", ['syntax = "proto3"; message A { strin x = 1; }', "not a proto",
                                  'syntax = "proto3"; import "missing.proto"; message A {}',
                                  'syntax = "proto3"; message A { int32 x = 1; int32 y = 1; }'])
def test_rejects_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema, match=r"invalid Protobuf schema: (missing|schema)\.proto:") as caught:
        parse_schema("PROTOBUF", text, {})
    assert "absl" not in str(caught.value) and "moldau-proto" not in str(caught.value)


def test_reference_names_must_be_relative_proto_paths() -> None:
    with pytest.raises(InvalidSchema, match="import path"):
        parse_schema("PROTOBUF", 'syntax = "proto3";', {"../etc/x.proto": ADDRESS})


def test_canonical_ignores_whitespace_and_comments() -> None:
    spaced = ('syntax = "proto3";\n\n// comment\nmessage A {\n    int32 x = 1;   /* old */\n'
              "  int64 y=2 [deprecated=true];\n}\n")
    tight = 'syntax="proto3"; message A{int32 x=1;int64 y = 2 [ deprecated = true ];}'
    assert proto(spaced).canonical() == proto(tight).canonical() == (
        'syntax = "proto3";\nmessage A {\n  int32 x = 1;\n  int64 y = 2 [deprecated = true];\n}\n')


def test_normalized_is_order_insensitive_and_compiles(order: ProtobufSchema) -> None:
    shuffled = message("message A {\n  int64 y = 2;\n  int32 x = 1;\n}", package="p")
    ordered = message("message A {\n  int32 x = 1;\n  int64 y = 2;\n}", package="p")
    assert shuffled.canonical() != ordered.canonical()
    assert shuffled.normalized() == ordered.normalized()
    again = proto(order.normalized(), {"geo/address.proto": ADDRESS})
    assert again.normalized() == order.normalized()
    assert again.read_errors(order) == [] and order.read_errors(again) == []


def test_identical_schema_is_compatible(order: ProtobufSchema) -> None:
    assert order.read_errors(order) == []


@pytest.mark.parametrize(("writer", "reader", "expected"), [
    ("message A { int32 x = 1; }", "message A { int32 x = 1; string y = 2; }", []),
    ("message A { int32 x = 1; string y = 2; }", "message A { int32 x = 1; }", []),
    ("message A { int32 x = 1; }", "message A { int32 renamed = 1; }", []),
    ("message A { int32 x = 1; }", "message A { int64 x = 1; }", []),
    ("message A { int32 x = 1; }", "message A { bool x = 1; }", []),
    ("message A { string x = 1; }", "message A { bytes x = 1; }", []),
    ("message A { fixed32 x = 1; }", "message A { sfixed32 x = 1; }", []),
    ("message A { sint32 x = 1; }", "message A { sint64 x = 1; }", []),
    ("message A { int32 x = 1; }", "message A { sint32 x = 1; }", ["FIELD_SCALAR_KIND_CHANGED"]),
    ("message A { int32 x = 1; }", "message A { string x = 1; }", ["FIELD_SCALAR_KIND_CHANGED"]),
    ("message A { float x = 1; }", "message A { double x = 1; }", ["FIELD_SCALAR_KIND_CHANGED"]),
    ("message A { int32 x = 1; }", "message A { repeated int32 x = 1; }", ["FIELD_NUMERIC_LABEL_CHANGED"]),
    ("message A { string x = 1; }", "message A { repeated string x = 1; }", []),
    ("message A { int32 x = 1; }", "message A { B x = 1; } message B {}", ["FIELD_KIND_CHANGED"]),
    ("message A { int32 x = 1; }", "message A { map<string, int32> x = 1; }", ["FIELD_KIND_CHANGED"]),
    ("message A { map<string, int32> x = 1; }", "message A { map<string, string> x = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"]),
    ("message A { E x = 1; } enum E { Z = 0; }", "message A { int32 x = 1; }", []),
    ("message A { B b = 1; } message B {}", "message A { C b = 1; } message C {} message B {}",
     ["FIELD_NAMED_TYPE_CHANGED"]),
    ("message A { B b = 1; } message B { int32 v = 1; }", "message A { B b = 1; } message B { string v = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED", "FIELD_NAMED_TYPE_CHANGED"]),
    ("message A {} message B {}", "message A {}", ["MESSAGE_REMOVED"]),
    ("message A {}", "message A {} message B {}", []),
    ("message A {} message B {}", "message B {} message A {}", []),
    ("message A { int32 x = 1; }", "message A { oneof o { int32 x = 1; } }", []),
    ("message A { oneof o { int32 x = 1; } }", "message A { int32 x = 1; }", []),
    ("message A { int32 x = 1; int32 y = 2; }", "message A { oneof o { int32 x = 1; int32 y = 2; } }",
     ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]),
    ("message A { int32 x = 1; oneof o { int32 y = 2; } }", "message A { oneof o { int32 x = 1; int32 y = 2; } }",
     ["FIELD_MOVED_TO_EXISTING_ONEOF"]),
    ("message A { oneof o { int32 x = 1; int32 y = 2; } }", "message A { oneof o { int32 x = 1; } }",
     ["ONEOF_FIELD_REMOVED"]),
    ("message A { oneof o { int32 x = 1; int32 y = 2; } }", "message A { }", []),
    ("message A { oneof o { int32 x = 1; } }", "message A { oneof o { int32 x = 1; int32 y = 2; } }", []),
    ("message A { enum E { Z = 0; Q = 1; } }", "message A { enum E { Z = 0; R = 2; } }", []),
    ("message Node { Node next = 1; int32 v = 2; }", "message Node { Node next = 1; int64 v = 2; }", []),
])
def test_compatibility(writer: str, reader: str, expected: list[str]) -> None:
    assert kinds(message(reader).read_errors(message(writer))) == expected


@pytest.mark.parametrize(("writer", "reader", "expected"), [
    ("message A { optional int32 x = 1; }", "message A { optional int32 x = 1; required int32 y = 2; }",
     ["REQUIRED_FIELD_ADDED"]),
    ("message A { optional int32 x = 1; required int32 y = 2; }", "message A { optional int32 x = 1; }",
     ["REQUIRED_FIELD_REMOVED"]),
    ("message A { required int32 x = 1; }", "message A { optional int32 x = 1; }", ["FIELD_NUMERIC_LABEL_CHANGED"]),
])
def test_proto2_compatibility(writer: str, reader: str, expected: list[str]) -> None:
    assert kinds(message(reader, "proto2").read_errors(message(writer, "proto2"))) == expected


def test_package_change_and_message_paths() -> None:
    old = message("message A { int32 x = 1; }", package="a")
    assert old.read_errors(message("message A { int32 x = 1; }", package="b")) == [
        "PACKAGE_CHANGED at '#/': the package differs"]
    new = message("message A { message In { string x = 1; } }", package="a")
    nested_old = message("message A { message In { int32 x = 1; } }", package="a")
    assert new.read_errors(nested_old) == [
        "FIELD_SCALAR_KIND_CHANGED at '#/A/In/1': the field's scalar type is not wire-compatible with the writer's"]


def test_syntax_change_alone_is_compatible() -> None:
    assert message("message A { optional int32 x = 1; }", "proto2").read_errors(
        message("message A { int32 x = 1; }", "proto3")) == []


def test_editions_files_compile_and_normalize_to_their_canonical_text() -> None:
    schema = proto('edition = "2023";\nmessage A { int32 x = 1; string y = 2 [features.field_presence = IMPLICIT]; }')
    assert schema.normalized() == schema.canonical()
    assert proto(schema.normalized()).read_errors(schema) == []
    schema.check_payload(schema.message_class([0])(x=1, y="z").SerializeToString())


def encoded(file_descriptor: object) -> str:
    """A file as Confluent's serializers send it: the base64 of its serialized FileDescriptorProto."""
    return base64.b64encode(file_descriptor.serialized_pb).decode("ascii")  # type: ignore[attr-defined]


def test_base64_descriptors_as_serializers_send_them(order: ProtobufSchema) -> None:
    # The descriptors of real message classes, the way a producer's generated code holds them.
    order_file = order.message_class([0]).DESCRIPTOR.file
    address_file = next(file for file in order_file.dependencies if file.name == "geo/address.proto")
    sent = proto(encoded(order_file), {"geo/address.proto": encoded(address_file)})
    assert sent.record_name([0, 0]) == "shop.v1.Order.Line"
    assert sent.normalized() == order.normalized()
    assert sent.read_errors(order) == [] and order.read_errors(sent) == []
    line = sent.message_class([0, 0])(sku="x", quantity=1)
    sent.check_payload(line.SerializeToString(), [0, 0])
    assert proto(encoded(order_file), {"geo/address.proto": encoded(address_file)}).canonical() == sent.canonical()


def test_compiled_descriptor_round_trips(order: ProtobufSchema) -> None:
    # What `format=serialized` answers: the compiled FileDescriptorProto, base64-encoded.
    serialized = base64.b64encode(order.file.SerializeToString()).decode("ascii")
    again = proto(serialized, {"geo/address.proto": ADDRESS})
    assert again.normalized() == order.normalized()


def test_known_imports_need_no_references() -> None:
    schema = proto('syntax = "proto3";\nimport "google/type/date.proto";\nimport "confluent/meta.proto";\n'
                   'import "confluent/type/decimal.proto";\n'
                   'message A { google.type.Date d = 1; string x = 2 [(confluent.field_meta).doc = "hi"];\n'
                   '  confluent.type.Decimal amount = 3; }')
    built = schema.message_class([0])()
    built.d.year = 2026
    built.amount.scale = 2
    schema.check_payload(built.SerializeToString())
