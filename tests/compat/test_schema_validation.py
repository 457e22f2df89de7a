"""Broker-side schema validation against a real broker and its schema registry, with confluent-kafka.

Records are serialized by confluent-kafka's own serializers (Avro, JSON Schema, Protobuf) against the broker's
registry (REST); the broker refuses what its topic's schema validation does not accept with INVALID_RECORD, which
librdkafka reports in the delivery report. A raw Produce request shows the per-record errors. One broker serves
the whole file.
"""

from __future__ import annotations

import datetime
import importlib.util
import json
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.produce.v7 import request as produce_v7
from kio.schema.produce.v9 import request as produce_v9
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume_to_end, create_topic
from tests.support.raw_client import RawClient

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "com.example",
                    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
CUSTOMER = json.dumps({"type": "record", "name": "Customer", "namespace": "com.example",
                       "fields": [{"name": "name", "type": "string"}]})
VALIDATE_VALUES = {"confluent.value.schema.validation": "true"}


def encoded(value: bytes | None) -> bytes:
    """A serializer's output, which is None only for a None input (these tests serialize none)."""
    assert value is not None
    return value


class Registry:
    """The broker's schema registry through confluent-kafka's client and Avro serializers."""

    def __init__(self, url: str) -> None:
        self.client = SchemaRegistryClient({"url": url})

    def serializer(self, schema: str, **conf: Any) -> AvroSerializer:
        # Typed here: AvroSerializer's `__init__ = __init_impl` leaves mypy without its constructor.
        serializer: AvroSerializer = AvroSerializer(self.client, schema, conf=conf or None)
        return serializer

    def orders(self, topic: str, ids: range, **conf: Any) -> list[bytes]:
        serialize = self.serializer(ORDER, **conf)
        context = SerializationContext(topic, MessageField.VALUE)
        return [encoded(serialize({"id": i, "item": f"item {i}"}, context)) for i in ids]

    def decode(self, topic: str, values: list[bytes | None]) -> list[Any]:
        deserialize = AvroDeserializer(self.client)
        context = SerializationContext(topic, MessageField.VALUE)
        return [deserialize(value, context) for value in values]


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, Registry]]:
    proc = BrokerProcess(Path(tmp_path_factory.mktemp("schema-validation")))
    proc.start()
    try:
        registry = Registry(proc.registry_url)
        _wait_for_registry(registry)
        yield proc, registry
        proc.stop()
    finally:
        proc.cleanup()


def _wait_for_registry(registry: Registry, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            registry.client.get_subjects()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture
def broker(registry_broker: tuple[BrokerProcess, Registry]) -> BrokerProcess:
    return registry_broker[0]


@pytest.fixture
def registry(registry_broker: tuple[BrokerProcess, Registry]) -> Registry:
    return registry_broker[1]


def new_topic(broker: BrokerProcess, config: dict[str, str] | None = None, partitions: int = 1) -> str:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, name, partitions, config)
    return name


def produce_batches(broker: BrokerProcess, topic: str, batches: list[list[bytes]], keys: list[bytes] | None = None,
                    conf: Mapping[str, str] | None = None) -> list[list[int | None]]:
    """Each list of values as one batch (produced together, then flushed); the delivery error code of each
    record (None when it was written). `conf` adds to the producer's config."""
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000, "retries": 0, **(conf or {})})
    outcomes: list[list[int | None]] = []
    for values in batches:
        results: list[int | None] = [-1] * len(values)

        def report(i: int, results: list[int | None] = results) -> Any:
            return lambda err, _msg: results.__setitem__(i, None if err is None else err.code())

        for i, value in enumerate(values):
            producer.produce(topic, value, key=keys[i] if keys else None, partition=0, on_delivery=report(i))
        assert producer.flush(30) == 0
        outcomes.append(results)
    return outcomes


def stored_values(broker: BrokerProcess, topic: str) -> list[bytes | None]:
    return [r.value for r in ck_consume_to_end(broker.bootstrap, topic)]


# -- records the schema accepts ----------------------------------------------------------------------------------

def test_avro_records_land_and_are_consumed(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    values = registry.orders(topic, range(20))
    assert produce_batches(broker, topic, [values]) == [[None] * 20]
    assert registry.decode(topic, stored_values(broker, topic)) == [
        {"id": i, "item": f"item {i}"} for i in range(20)]


def test_record_name_strategy_needs_the_record_subject(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, {**VALIDATE_VALUES, "confluent.value.subject.name.strategy":
                               "io.confluent.kafka.serializers.subject.RecordNameStrategy"})
    by_record = registry.orders(topic, range(3), **{"subject.name.strategy": record_subject_name_strategy})
    # Registered under "<topic>-value" only, not under its record's name "com.example.Customer".
    by_topic = encoded(registry.serializer(CUSTOMER)({"name": "ann"}, SerializationContext(topic, MessageField.VALUE)))
    assert produce_batches(broker, topic, [by_record, [by_topic]]) == [[None] * 3, [KafkaError.INVALID_RECORD]]
    assert stored_values(broker, topic) == by_record


JSON_ORDER = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "com.example.JsonOrder",
                         "type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]})


def test_json_schema_records_land_and_invalid_documents_are_refused(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = JSONSerializer(JSON_ORDER, registry.client)
    good = [serialize({"id": i}, context) for i in range(3)]
    assert good[0] is not None
    schema_id = struct.unpack(">I", good[0][1:5])[0]
    # The serializer checks documents itself; a client that does not is refused by the broker.
    invalid = struct.pack(">bI", 0, schema_id) + json.dumps({"id": "one"}).encode()
    assert produce_batches(broker, topic, [good, [invalid]]) == [[None] * 3, [KafkaError.INVALID_RECORD]]
    deserialize = JSONDeserializer(JSON_ORDER)
    assert [deserialize(v, context) for v in stored_values(broker, topic)] == [{"id": i} for i in range(3)]


ORDERS_PROTO = """syntax = "proto3";
package moldau.validation;
message ProtoOrder { int64 id = 1; string item = 2; }
message Envelope { message Inner { string note = 1; } Inner inner = 1; }
"""


@pytest.fixture(scope="module")
def orders_module(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    """Python classes for ORDERS_PROTO, generated by the protoc that grpcio-tools bundles."""
    out = tmp_path_factory.mktemp("proto")
    (out / "orders_validation.proto").write_text(ORDERS_PROTO)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}",
                    "orders_validation.proto"], check=True, capture_output=True)
    spec = importlib.util.spec_from_file_location("orders_validation_pb2", out / "orders_validation_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_protobuf_records_are_checked_as_their_indexed_message(
        broker: BrokerProcess, registry: Registry, orders_module: ModuleType) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    context = SerializationContext(topic, MessageField.VALUE)
    serialize = ProtobufSerializer(orders_module.ProtoOrder, registry.client, {"use.deprecated.format": False})
    good = [serialize(orders_module.ProtoOrder(id=i, item="x"), context) for i in range(3)]
    inner = ProtobufSerializer(orders_module.Envelope.Inner, registry.client, {"use.deprecated.format": False})
    nested = inner(orders_module.Envelope.Inner(note="n"), context)  # message indexes [1, 0], same schema id
    assert good[0] is not None and nested is not None
    header = good[0][:5]
    undecodable = header + b"\x00\x08"  # indexes [0], then a varint cut short
    no_such_message = header + b"\x02\x0a" + good[0][6:]  # indexes [5]
    outcomes = produce_batches(broker, topic, [good, [nested], [undecodable], [no_such_message]])
    assert outcomes == [[None] * 3, [None], [KafkaError.INVALID_RECORD], [KafkaError.INVALID_RECORD]]
    deserialize = ProtobufDeserializer(orders_module.ProtoOrder, {"use.deprecated.format": False})
    assert [deserialize(v, context) for v in stored_values(broker, topic)[:3]] == [
        orders_module.ProtoOrder(id=i, item="x") for i in range(3)]


# -- records it refuses ------------------------------------------------------------------------------------------

def bad_value(kind: str, registry: Registry, topic: str) -> bytes:
    good = registry.orders(topic, range(1))[0]
    if kind == "unknown id":
        return struct.pack(">bI", 0, 987_654) + good[5:]
    if kind == "other subject":
        other = f"{topic}-other"  # registers the Customer schema under "<topic>-other-value" only
        return encoded(registry.serializer(CUSTOMER)({"name": "ann"}, SerializationContext(other, MessageField.VALUE)))
    if kind == "undecodable":
        return good[:5] + b"\xff\xff\xff\xff"
    assert kind == "not wire format"
    return b'{"id": 1, "item": "plain JSON"}'


@pytest.mark.parametrize("kind", ["unknown id", "other subject", "undecodable", "not wire format"])
def test_a_bad_record_is_refused_with_invalid_record_and_other_batches_land(
        broker: BrokerProcess, registry: Registry, kind: str) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    first, last = registry.orders(topic, range(0, 3)), registry.orders(topic, range(10, 13))
    mixed = [*registry.orders(topic, range(5, 7)), bad_value(kind, registry, topic)]
    outcomes = produce_batches(broker, topic, [first, mixed, last])
    assert outcomes[0] == outcomes[2] == [None] * 3
    assert outcomes[1] == [KafkaError.INVALID_RECORD] * 3  # the whole batch is refused
    assert stored_values(broker, topic) == first + last  # nothing of the refused batch is readable


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_compressed_batches_are_validated(broker: BrokerProcess, registry: Registry, codec: str) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    good = registry.orders(topic, range(200))
    bad = [*registry.orders(topic, range(200, 300)), b"not wire format"]
    outcomes = produce_batches(broker, topic, [good, bad], conf={"compression.type": codec})
    assert outcomes == [[None] * 200, [KafkaError.INVALID_RECORD] * 101]
    assert stored_values(broker, topic) == good


def test_keys_are_validated_when_the_topic_says_so(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, {"confluent.key.schema.validation": "true"})
    avro_key = encoded(registry.serializer('"string"')("order-1", SerializationContext(topic, MessageField.KEY)))
    plain_key = encoded(StringSerializer()("order-1"))
    value = b"values are not validated here"
    outcomes = [produce_batches(broker, topic, [[value]], keys=[key])[0] for key in (avro_key, plain_key)]
    assert outcomes == [[None], [KafkaError.INVALID_RECORD]]


def test_validation_turned_on_by_incremental_alter_configs(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker)
    assert produce_batches(broker, topic, [[b"anything"]]) == [[None]]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(
        "confluent.value.schema.validation", "true", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    deadline = time.monotonic() + 10
    while produce_batches(broker, topic, [[b"anything"]]) != [[KafkaError.INVALID_RECORD]]:
        assert time.monotonic() < deadline, "validation did not take effect"
        time.sleep(0.2)
    assert produce_batches(broker, topic, [registry.orders(topic, range(1))]) == [[None]]


def test_an_invalid_strategy_is_refused_at_create_time(broker: BrokerProcess) -> None:
    with pytest.raises(Exception, match=r"confluent\.value\.subject\.name\.strategy"):
        new_topic(broker, {"confluent.value.subject.name.strategy": "com.example.MyStrategy"})


def test_a_topic_without_validation_accepts_anything(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker)
    values = [b"plain", b"\x00\x00\x0f\x42\x40garbage", *registry.orders(topic, range(2))]
    assert produce_batches(broker, topic, [values]) == [[None] * 4]
    assert stored_values(broker, topic) == values


# -- the Produce answer ------------------------------------------------------------------------------------------

def raw_batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def test_produce_v8_and_later_name_each_failing_record(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, VALIDATE_VALUES, partitions=2)
    good = registry.orders(topic, range(3))
    bad = raw_batch([good[0], b"plain", good[1], struct.pack(">bI", 0, 987_654) + good[2][5:]])
    request = produce_v9.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(produce_v9.TopicProduceData(name=TopicName(topic), partition_data=(
            produce_v9.PartitionProduceData(index=i32(0), records=Records(bad)),
            produce_v9.PartitionProduceData(index=i32(1), records=Records(raw_batch(good))))),))
    with RawClient(broker.bootstrap) as client:
        refused, accepted = client.request(request).responses[0].partition_responses
    assert refused.error_code == ErrorCode.invalid_record
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [
        (1, "record 1: the value is not in the schema registry's wire format: magic byte 112, expected 0"),
        (3, "record 3: value schema id 987654 is not known to the schema registry"),
    ]
    assert refused.error_message == (f"schema validation failed on topic '{topic}': record 1: the value is not in "
                                     "the schema registry's wire format: magic byte 112, expected 0 (and 1 more)")
    assert accepted.error_code == ErrorCode.none and accepted.base_offset == 0
    assert [r.value for r in ck_consume_to_end(broker.bootstrap, topic)] == good


def test_produce_before_v8_gets_the_error_code_only(broker: BrokerProcess, registry: Registry) -> None:
    topic = new_topic(broker, VALIDATE_VALUES)
    request = produce_v7.ProduceRequest(
        transactional_id=None, acks=i16(1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(produce_v7.TopicProduceData(name=TopicName(topic), partition_data=(
            produce_v7.PartitionProduceData(index=i32(0), records=Records(raw_batch([b"plain"]))),)),))
    with RawClient(broker.bootstrap) as client:
        (answer,) = client.request(request).responses[0].partition_responses
    assert answer.error_code == ErrorCode.invalid_record
    assert stored_values(broker, topic) == []
