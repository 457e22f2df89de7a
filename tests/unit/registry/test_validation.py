"""Broker-side schema validation: the wire format, the subject name strategies, and each reason to refuse."""

from __future__ import annotations

import struct

import pytest

from moldau.registry.validation import (
    FieldSettings,
    SchemaValidation,
    SubjectNameStrategy,
    WireFormatError,
    check_records,
    read_message_indexes,
    read_wire_header,
    subject_name,
)
from tests.unit.registry.schema_fixtures import CUSTOMER, ORDER, RegistryLookup, avro, json_record, orders

VALUE = SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.TOPIC))
KEY_AND_VALUE = SchemaValidation(key=FieldSettings(True, SubjectNameStrategy.TOPIC),
                                 value=FieldSettings(False, SubjectNameStrategy.TOPIC))


@pytest.fixture
def lookup() -> RegistryLookup:
    registry = RegistryLookup()
    registry.register("orders-value", 1, ORDER)
    registry.register("customers-value", 2, CUSTOMER)
    registry.register("orders-key", 3, "string")
    registry.register("com.example.Order", 1, ORDER)
    registry.register("orders-com.example.Order", 1, ORDER)
    return registry


# -- the wire format ---------------------------------------------------------------------------------------------

def test_the_header_is_magic_byte_zero_and_a_big_endian_schema_id() -> None:
    assert read_wire_header(b"\x00\x00\x00\x01\x02rest") == 258
    assert read_wire_header(memoryview(b"\x00\x7f\xff\xff\xff")) == 2**31 - 1
    with pytest.raises(WireFormatError, match="magic byte 1, expected 0"):
        read_wire_header(b"\x01\x00\x00\x00\x01")
    with pytest.raises(WireFormatError, match="4 bytes are too short"):
        read_wire_header(b"\x00\x00\x00\x01")
    with pytest.raises(WireFormatError, match="0 bytes"):
        read_wire_header(b"")


@pytest.mark.parametrize(("encoded", "indexes"), [
    (b"\x00", [0]),  # the single 0 byte: the file's first message
    (b"\x02\x00", [0]),  # the same, written out
    (b"\x04\x02\x06", [1, 3]),  # zigzag: count 2, then 1 and 3
    (b"\x02\x80\x01", [64]),  # a two-byte varint
])
def test_protobuf_message_indexes_are_zigzag_varints_after_a_count(encoded: bytes, indexes: list[int]) -> None:
    data = b"\x00\x00\x00\x00\x07" + encoded + b"payload"
    assert read_message_indexes(data, 5) == (indexes, 5 + len(encoded))


@pytest.mark.parametrize(("encoded", "reason"), [
    (b"", "run past the end"),
    (b"\x04\x02", "run past the end"),
    (b"\x01", "invalid Protobuf message index count -1"),
    (b"\x02\x01", "negative Protobuf message index -1"),
    (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
    (b"\xfe\xff\x03", "invalid Protobuf message index count 32767"),
])
def test_broken_message_indexes_are_refused(encoded: bytes, reason: str) -> None:
    with pytest.raises(WireFormatError, match=reason):
        read_message_indexes(b"\x00\x00\x00\x00\x07" + encoded, 5)


# -- subject name strategies -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["TopicRecordNameStrategy",
                                  "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"])
def test_a_strategy_is_named_by_its_short_or_full_class_name(name: str) -> None:
    assert SubjectNameStrategy.from_config(name) is SubjectNameStrategy.TOPIC_RECORD


def test_each_strategy_names_its_subject() -> None:
    assert subject_name(SubjectNameStrategy.TOPIC, "orders", False, None) == "orders-value"
    assert subject_name(SubjectNameStrategy.TOPIC, "orders", True, "com.example.Order") == "orders-key"
    assert subject_name(SubjectNameStrategy.RECORD, "orders", False, "com.example.Order") == "com.example.Order"
    assert subject_name(SubjectNameStrategy.TOPIC_RECORD, "orders", True, "com.example.Order") == \
        "orders-com.example.Order"
    assert subject_name(SubjectNameStrategy.RECORD, "orders", False, None) is None


def test_settings_come_from_the_topic_configs() -> None:
    settings = SchemaValidation.from_topic_config(
        False, "io.confluent.kafka.serializers.subject.TopicNameStrategy", True, "RecordNameStrategy")
    assert settings.key is None and settings.enabled
    assert settings.value == FieldSettings(False, SubjectNameStrategy.RECORD)
    assert not SchemaValidation.from_topic_config(False, "TopicNameStrategy", False, "TopicNameStrategy").enabled


@pytest.mark.parametrize(("strategy", "schema_id"), [
    (SubjectNameStrategy.RECORD, 1), (SubjectNameStrategy.TOPIC_RECORD, 1), (SubjectNameStrategy.TOPIC, 1)])
def test_the_record_is_accepted_under_the_subject_its_strategy_names(
        lookup: RegistryLookup, strategy: SubjectNameStrategy, schema_id: int) -> None:
    settings = SchemaValidation(value=FieldSettings(False, strategy))
    assert check_records("orders", settings, [(None, v) for v in orders(schema_id, range(3))], lookup) == []


def test_record_name_strategies_refuse_an_id_not_under_the_record_subject(lookup: RegistryLookup) -> None:
    lookup.register("other-value", 4, ORDER)  # the same schema, but not under "com.example.Order"
    settings = SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.RECORD))
    errors = check_records("orders", settings, [(None, orders(4, [1])[0])], lookup)
    assert errors == [(0, "record 0: value schema id 4 is not registered under subject 'com.example.Order'")]


def test_a_schema_naming_no_record_fails_a_record_name_strategy(lookup: RegistryLookup) -> None:
    settings = SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.TOPIC_RECORD))
    errors = check_records("orders", settings, [(None, avro(3, "string", "plain"))], lookup)
    assert errors == [(0, "record 0: value schema id 3 names no record, which TopicRecordNameStrategy needs "
                          "for the subject")]


# -- each reason to refuse ---------------------------------------------------------------------------------------

def test_valid_records_tombstones_and_null_keys_pass(lookup: RegistryLookup) -> None:
    key = avro(3, "string", "order-1")
    records = [(key, orders(1, [1])[0]), (None, orders(1, [2])[0]), (key, None), (None, None)]
    assert check_records("orders", KEY_AND_VALUE, records, lookup) == []


def test_each_failing_record_is_named_with_its_reason(lookup: RegistryLookup) -> None:
    good = orders(1, [1])[0]
    values = [
        good,
        avro(99, ORDER, {"id": 2, "item": "x"}),  # unknown id
        avro(2, CUSTOMER, {"name": "ann"}),  # registered, under another subject
        good[:5] + b"\xff\xff\xff",  # does not decode
        b'{"id": 5}',  # not the wire format
        good + b"\x00",  # bytes left over
        b"\x00\x00\x01",  # too short
    ]
    errors = check_records("orders", VALUE, [(None, v) for v in values], lookup)
    assert [i for i, _ in errors] == [1, 2, 3, 4, 5, 6]
    messages = dict(errors)
    assert messages[1] == "record 1: value schema id 99 is not known to the schema registry"
    assert messages[2] == "record 2: value schema id 2 is not registered under subject 'orders-value'"
    assert messages[3].startswith("record 3: the value does not decode with schema id 1: not Avro binary")
    assert messages[4] == ("record 4: the value is not in the schema registry's wire format: "
                           "magic byte 123, expected 0")
    assert messages[5] == ("record 5: the value does not decode with schema id 1: 1 bytes left over after the "
                           "Avro datum")
    assert messages[6].startswith("record 6: the value is not in the schema registry's wire format: 3 bytes")


def test_keys_are_checked_against_the_key_subject(lookup: RegistryLookup) -> None:
    value = orders(1, [1])[0]
    errors = check_records("orders", KEY_AND_VALUE, [(b"plain key", value), (value, value)], lookup)
    assert errors == [
        (0, "record 0: the key is not in the schema registry's wire format: magic byte 112, expected 0"),
        (1, "record 1: key schema id 1 is not registered under subject 'orders-key'"),
    ]


def test_without_key_validation_keys_are_not_read(lookup: RegistryLookup) -> None:
    assert check_records("orders", VALUE, [(b"anything", orders(1, [1])[0])], lookup) == []
    only_keys = SchemaValidation(key=FieldSettings(True, SubjectNameStrategy.TOPIC))
    assert check_records("orders", only_keys, [(None, b"anything")], lookup) == []


def test_a_batch_asks_the_lookup_once_per_schema_and_subject(lookup: RegistryLookup) -> None:
    check_records("orders", VALUE, [(None, v) for v in orders(1, range(500))], lookup)
    assert lookup.questions == 2


JSON_ORDER = {"$schema": "http://json-schema.org/draft-07/schema#", "title": "com.example.JsonOrder",
              "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


@pytest.mark.parametrize("strategy", list(SubjectNameStrategy))
def test_json_schema_records_are_checked_and_named_by_their_title(
        lookup: RegistryLookup, strategy: SubjectNameStrategy) -> None:
    subject = {SubjectNameStrategy.TOPIC: "orders-value", SubjectNameStrategy.RECORD: "com.example.JsonOrder",
               SubjectNameStrategy.TOPIC_RECORD: "orders-com.example.JsonOrder"}[strategy]
    lookup.register(subject, 5, JSON_ORDER, "JSON")
    settings = SchemaValidation(value=FieldSettings(False, strategy))
    values = [json_record(5, {"id": 1}), json_record(5, {"id": "one"}), json_record(5, {}),
              json_record(5, {"id": 2})[:-1]]
    errors = check_records("orders", settings, [(None, v) for v in values], lookup)
    assert [i for i, _ in errors] == [1, 2, 3]
    assert errors[0][1].startswith("record 1: the value does not decode with schema id 5: JSON document invalid at id")
    assert errors[2][1].startswith("record 3: the value does not decode with schema id 5: not a UTF-8 JSON document")


ORDERS_PROTO = """
syntax = "proto3";
package com.example;
message Order { int64 id = 1; string item = 2; }
message Envelope { message Inner { string note = 1; } Inner inner = 1; }
"""
ORDER_MESSAGE = b"\x08\x07\x12\x01x"  # Order {id: 7, item: "x"}
INNER_MESSAGE = b"\x0a\x01n"  # Envelope.Inner {note: "n"}


def protobuf(schema_id: int, indexes: bytes, message: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + indexes + message


def test_protobuf_records_are_checked_as_the_message_their_indexes_select(lookup: RegistryLookup) -> None:
    lookup.register("orders-value", 6, ORDERS_PROTO, "PROTOBUF")
    values = [
        protobuf(6, b"\x00", ORDER_MESSAGE),  # [0]: Order
        protobuf(6, b"\x04\x02\x00", INNER_MESSAGE),  # [1, 0]: Envelope.Inner
        protobuf(6, b"\x02\x0a", INNER_MESSAGE),  # [5]: no such message
        protobuf(6, b"\x00", b"\x08"),  # a truncated varint
        protobuf(6, b"\x03", ORDER_MESSAGE),  # a negative index count
    ]
    errors = dict(check_records("orders", VALUE, [(None, v) for v in values], lookup))
    assert sorted(errors) == [2, 3, 4]
    assert errors[2].startswith("record 2: the value does not decode with schema id 6: message indexes [5]")
    assert errors[3].startswith("record 3: the value does not decode with schema id 6: not a com.example.Order")
    assert errors[4] == ("record 4: the value is not in the schema registry's wire format: invalid Protobuf "
                         "message index count -2")


def test_protobuf_record_names_come_from_the_selected_message(lookup: RegistryLookup) -> None:
    lookup.register("com.example.Order", 6, ORDERS_PROTO, "PROTOBUF")
    settings = SchemaValidation(value=FieldSettings(False, SubjectNameStrategy.RECORD))
    values = [protobuf(6, b"\x00", ORDER_MESSAGE), protobuf(6, b"\x04\x02\x00", INNER_MESSAGE),
              protobuf(6, b"\x02\x0a", INNER_MESSAGE)]
    assert check_records("orders", settings, [(None, v) for v in values], lookup) == [
        (1, "record 1: value schema id 6 is not registered under subject 'com.example.Envelope.Inner'"),
        (2, "record 2: value schema id 6 names no record, which RecordNameStrategy needs for the subject"),
    ]
