"""Connect's registry converters against Moldau's built-in schema registry, checked with confluent-kafka's own
serializers: what AvroConverter / JsonSchemaConverter write (through a real topic) the AvroDeserializer /
JSONDeserializer read, and what the AvroSerializer / JSONSerializer write the converters read back."""

from __future__ import annotations

import decimal
import json

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from moldau.connect.converters.avro import AvroConverter
from moldau.connect.converters.json_schema import JsonSchemaConverter
from moldau.connect.converters.logical import decimal_schema
from moldau.connect.converters.registry_base import RegistryConverter
from moldau.connect.data import (
    BYTES_SCHEMA,
    FLOAT64_SCHEMA,
    INT8_SCHEMA,
    INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_NAME,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
)
from moldau.connect.errors import DataException
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic

ADDRESS = SchemaBuilder.struct().name("shop.Address").field("city", STRING_SCHEMA).build()
ORDER = (SchemaBuilder.struct().name("shop.Order").version(1)
         .field("id", INT32_SCHEMA)
         .field("priority", INT8_SCHEMA)
         .field("note", OPTIONAL_STRING_SCHEMA)
         .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
         .field("prices", SchemaBuilder.map(STRING_SCHEMA, FLOAT64_SCHEMA).build())
         .field("raw", BYTES_SCHEMA)
         .field("address", ADDRESS)
         .build())
TOTAL = decimal_schema(2)
PLACED = Schema(Type.INT64, name=TIMESTAMP_NAME, version=1)
ORDER_WITH_LOGICAL = (SchemaBuilder.struct().name("shop.Order")
                      .field("id", INT32_SCHEMA).field("total", TOTAL).field("placed", PLACED).build())


def order(id_: int = 7) -> Struct:
    return Struct(ORDER, {"id": id_, "priority": -3, "note": None, "tags": ["a", "b"], "prices": {"x": 1.5},
                          "raw": b"\x00\xff", "address": Struct(ADDRESS, {"city": "Prague"})})


def converter(cls: type[RegistryConverter], url: str, **extra: str) -> RegistryConverter:
    conv = cls()
    conv.configure({"schema.registry.url": url, **extra}, False)
    return conv


def through_topic(broker: BrokerProcess, topic: str, values: list[bytes | None]) -> list[bytes | None]:
    """Produce `values` to a new topic and consume them back, as a connector's records would travel."""
    create_topic(broker.bootstrap, topic)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic}-readers"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got: list[bytes | None] = []
        while len(got) < len(values):
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            got.append(msg.value())
        return got
    finally:
        consumer.close()


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def test_avro_converter_writes_what_the_avro_deserializer_reads(shared_broker: BrokerProcess) -> None:
    url, topic = shared_broker.registry_url, "connect-avro-out"
    conv = converter(AvroConverter, url)
    written = [conv.from_connect_data(topic, ORDER, order(i)) for i in (1, 2)] + [conv.from_connect_data(
        topic, ORDER, None)]
    assert written[2] is None  # a tombstone stays null
    received = through_topic(shared_broker, topic, written)
    client = SchemaRegistryClient({"url": url})
    decoded = [AvroDeserializer(client)(value, ctx(topic)) for value in received]
    assert decoded[0] == {"id": 1, "priority": -3, "note": None, "tags": ["a", "b"], "prices": {"x": 1.5},
                          "raw": b"\x00\xff", "address": {"city": "Prague"}}
    assert decoded[1]["id"] == 2 and decoded[2] is None
    registered = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str or "")
    assert registered["name"] == "Order" and registered["namespace"] == "shop"
    fields = {f["name"]: f for f in registered["fields"]}
    assert fields["priority"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["note"]["type"] == ["null", "string"] and fields["note"]["default"] is None
    assert conv.to_connect_data(topic, received[0]).value == order(1)
    assert conv.to_connect_data(topic, received[0]).schema == ORDER


def test_avro_converter_reads_what_the_avro_serializer_writes(shared_broker: BrokerProcess) -> None:
    url, topic = shared_broker.registry_url, "connect-avro-in"
    avro_schema = json.dumps({"type": "record", "name": "Reading", "namespace": "iot", "fields": [
        {"name": "sensor", "type": "string"}, {"name": "value", "type": ["null", "double"], "default": None},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "labels", "type": {"type": "map", "values": "long"}}]})
    serializer = AvroSerializer(SchemaRegistryClient({"url": url}), avro_schema)
    import datetime as dt
    at = dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC)
    data = serializer({"sensor": "t1", "value": None, "total": decimal.Decimal("12.34"), "at": at,
                       "labels": {"a": 1}}, ctx(topic))
    (received,) = through_topic(shared_broker, topic, [data])
    got = converter(AvroConverter, url).to_connect_data(topic, received)
    assert got.schema is not None and got.schema.name == "iot.Reading"
    assert got.value.to_dict() == {"sensor": "t1", "value": None, "total": decimal.Decimal("12.34"),
                                   "at": int(at.timestamp() * 1000), "labels": {"a": 1}}
    total = got.schema.field("total")
    assert total is not None and total.schema.parameters == {"scale": "2", "connect.decimal.precision": "10"}


def test_avro_logical_types_round_trip(shared_broker: BrokerProcess) -> None:
    conv = converter(AvroConverter, shared_broker.registry_url)
    value = Struct(ORDER_WITH_LOGICAL, {"id": 1, "total": decimal.Decimal("-0.05"), "placed": 1_700_000_000_123})
    data = conv.from_connect_data("connect-avro-logical", ORDER_WITH_LOGICAL, value)
    back = conv.to_connect_data("connect-avro-logical", data)
    assert back.value == value and back.schema == ORDER_WITH_LOGICAL


def test_json_schema_converter_writes_what_the_json_deserializer_reads(shared_broker: BrokerProcess) -> None:
    url, topic = shared_broker.registry_url, "connect-json-out"
    conv = converter(JsonSchemaConverter, url)
    (received,) = through_topic(shared_broker, topic, [conv.from_connect_data(topic, ORDER, order(3))])
    client = SchemaRegistryClient({"url": url})
    decoded = JSONDeserializer(None, schema_registry_client=client)(received, ctx(topic))
    assert decoded == {"id": 3, "priority": -3, "note": None, "tags": ["a", "b"], "prices": {"x": 1.5},
                       "raw": "AP8=", "address": {"city": "Prague"}}
    registered = json.loads(client.get_latest_version(f"{topic}-value").schema.schema_str or "")
    assert registered["title"] == "shop.Order"
    assert registered["properties"]["priority"] == {"type": "integer", "connect.type": "int8", "connect.index": 1}
    assert registered["properties"]["note"]["oneOf"] == [{"type": "null"}, {"type": "string"}]
    back = conv.to_connect_data(topic, received)
    assert back.schema == ORDER and back.value == order(3)


def test_json_schema_converter_reads_what_the_json_serializer_writes(shared_broker: BrokerProcess) -> None:
    url, topic = shared_broker.registry_url, "connect-json-in"
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
                         "properties": {"id": {"type": "integer"}, "item": {"type": "string"},
                                        "qty": {"type": ["integer", "null"]}}})
    data = JSONSerializer(schema, SchemaRegistryClient({"url": url}))({"id": 5, "item": "pen", "qty": None},
                                                                        ctx(topic))
    (received,) = through_topic(shared_broker, topic, [data])
    got = converter(JsonSchemaConverter, url).to_connect_data(topic, received)
    assert got.schema is not None and got.schema.name == "Order"
    assert got.value.to_dict() == {"id": 5, "item": "pen", "qty": None}
    qty = got.schema.field("qty")
    assert qty is not None and qty.schema.type is Type.INT64 and qty.schema.optional


def test_use_latest_version_writes_with_the_registered_schema(shared_broker: BrokerProcess) -> None:
    url, topic = shared_broker.registry_url, "connect-avro-latest"
    client = SchemaRegistryClient({"url": url})
    writer = json.dumps({"type": "record", "name": "Tiny", "fields": [{"name": "id", "type": "int"}]})
    schema_id = client.register_schema(f"{topic}-value", RegistrySchema(writer, "AVRO"))
    tiny = SchemaBuilder.struct().name("Tiny").field("id", INT32_SCHEMA).build()
    conv = converter(AvroConverter, url, **{"use.latest.version": "true"})
    data = conv.from_connect_data(topic, tiny, Struct(tiny, {"id": 9}))
    assert data is not None and int.from_bytes(data[1:5], "big") == schema_id
    assert AvroDeserializer(client)(data, ctx(topic)) == {"id": 9}


def test_no_auto_registration_fails_for_an_unknown_schema(shared_broker: BrokerProcess) -> None:
    conv = converter(JsonSchemaConverter, shared_broker.registry_url, **{"auto.register.schemas": "false"})
    with pytest.raises(DataException, match="Failed to serialize data of topic connect-json-unregistered"):
        conv.from_connect_data("connect-json-unregistered", ORDER, order())


def test_bytes_without_the_wire_format_are_rejected(shared_broker: BrokerProcess) -> None:
    with pytest.raises(DataException, match="Unknown magic byte"):
        converter(AvroConverter, shared_broker.registry_url).to_connect_data("t", b"\x01plain")




PB_ITEM = SchemaBuilder.struct().name("Item").field("sku", STRING_SCHEMA).field("qty", INT32_SCHEMA).build()
PB_ORDER = (SchemaBuilder.struct().name("shop.PbOrder")
            .field("id", Schema(Type.INT64))
            .field("note", OPTIONAL_STRING_SCHEMA)
            .field("tags", SchemaBuilder.array(STRING_SCHEMA).build())
            .field("counts", SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build())
            .field("first", PB_ITEM)
            .field("items", SchemaBuilder.array(PB_ITEM).build())
            .field("raw", BYTES_SCHEMA)
            .build())

READING_PROTO = """syntax = "proto3";
package iot;

message Reading {
  string sensor = 1;
  double value = 2;
  repeated string tags = 3;
  optional int64 at = 4;
}
"""


def pb_order() -> Struct:
    return Struct(PB_ORDER, {"id": 5, "note": None, "tags": ["x"], "counts": {"a": 2},
                             "first": Struct(PB_ITEM, {"sku": "s1", "qty": 1}),
                             "items": [Struct(PB_ITEM, {"sku": "s2", "qty": 2})], "raw": b"\x01"})


def test_protobuf_converter_writes_what_the_protobuf_deserializer_reads(shared_broker: BrokerProcess) -> None:
    from moldau.connect.converters.protobuf import ProtobufConverter

    url, topic = shared_broker.registry_url, "connect-proto-out"
    conv = converter(ProtobufConverter, url)
    (received,) = through_topic(shared_broker, topic, [conv.from_connect_data(topic, PB_ORDER, pb_order())])
    assert received is not None
    back = conv.to_connect_data(topic, received)
    assert back.schema is not None and back.schema.name == "shop.PbOrder"
    assert back.value.to_dict()["note"] is None
    assert back.value.get("items")[0].to_dict() == {"sku": "s2", "qty": 2}
    assert {k: v for k, v in back.value.to_dict().items() if k not in ("first", "items")} == {
        "id": 5, "note": None, "tags": ["x"], "counts": {"a": 2}, "raw": b"\x01"}
    # confluent-kafka's deserializer reads it with the message class of the registered schema
    message_class = type(conv.writer_value(PB_ORDER, pb_order()))
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    message = ProtobufDeserializer(message_class, {"use.deprecated.format": False})(received, ctx(topic))
    assert message.id == 5 and message.first.sku == "s1" and not message.HasField("note")
    registered = SchemaRegistryClient({"url": url}).get_latest_version(f"{topic}-value").schema
    assert registered.schema_type == "PROTOBUF"


def test_protobuf_converter_reads_what_the_protobuf_serializer_writes(shared_broker: BrokerProcess) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from moldau.connect.converters.protobuf import ProtobufConverter
    from moldau.registry.formats.protobuf import ProtobufFormat

    url, topic = shared_broker.registry_url, "connect-proto-in"
    reading = ProtobufFormat().parse(READING_PROTO, {}).message_class((0,))
    data = ProtobufSerializer(reading, SchemaRegistryClient({"url": url}), {"use.deprecated.format": False})(
        reading(sensor="t1", value=2.5, tags=["a", "b"]), ctx(topic))
    (received,) = through_topic(shared_broker, topic, [data])
    got = converter(ProtobufConverter, url).to_connect_data(topic, received)
    assert got.schema is not None and got.schema.name == "iot.Reading"
    assert got.value.to_dict() == {"sensor": "t1", "value": 2.5, "tags": ["a", "b"], "at": None}
    at = got.schema.field("at")
    assert at is not None and at.schema.type is Type.INT64 and at.schema.optional


@pytest.mark.parametrize("cls", [AvroConverter, JsonSchemaConverter])
def test_keys_with_primitive_and_optional_schemas(shared_broker: BrokerProcess, cls: type[RegistryConverter]) -> None:
    conv = cls()
    conv.configure({"schema.registry.url": shared_broker.registry_url}, True)
    cases = ((STRING_SCHEMA, "k1"), (Schema(Type.INT64), 12), (Schema(Type.STRING, optional=True), "o"),
             (SchemaBuilder.struct().name("K").field("id", INT32_SCHEMA).optional().build(), None))
    for i, (schema, value) in enumerate(cases):
        topic = f"connect-keys-{cls.__name__.lower()}-{i}"  # one subject per schema: they are not compatible
        data = conv.from_connect_data(topic, schema, value)
        back = conv.to_connect_data(topic, data)
        assert (back.schema, back.value) == ((schema, value) if data is not None else (None, None))
    subjects = SchemaRegistryClient({"url": shared_broker.registry_url}).get_subjects()
    assert f"connect-keys-{cls.__name__.lower()}-0-key" in subjects
