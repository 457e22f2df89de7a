"""The built-in schema registry against confluent-kafka's SchemaRegistryClient and its Avro serializers, on a
real `moldau server` process: registry calls, records produced and consumed through the same broker, schema
evolution, references, errors for bad input, and a restart that keeps every schema and id."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume_to_end, create_topic
from tests.support.messages import value_of
from tests.support.registry_http import http
from tests.support.registry_schemas import schema_text

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "moldau.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "moldau.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"},
    {"name": "email", "type": ["null", "string"], "default": None}]})
USER_BREAKS = json.dumps({"type": "record", "name": "User", "namespace": "moldau.test", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}, {"name": "phone", "type": "string"}]})
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "moldau.test", "fields": [
    {"name": "id", "type": "long"}]})


@pytest.fixture(scope="module")
def registry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("registry-broker"))
    proc.start()
    try:
        yield proc
        assert proc.stop() == 0, proc.log_tail()
    finally:
        proc.cleanup()


@pytest.fixture(scope="module")
def client(registry_broker: BrokerProcess) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_broker.registry_url})


def test_register_and_read_back(client: SchemaRegistryClient) -> None:
    schema_id = client.register_schema("users-value", Schema(USER_V1, "AVRO"))
    assert client.register_schema("users-value", Schema(USER_V1, "AVRO")) == schema_id
    assert json.loads(schema_text(client.get_schema(schema_id)))["name"] == "User"
    latest = client.get_latest_version("users-value")
    assert (latest.subject, latest.version, latest.schema_id) == ("users-value", 1, schema_id)
    assert latest.schema.schema_type == "AVRO" and latest.schema.references == []
    assert client.get_version("users-value", 1).schema_id == schema_id
    assert client.lookup_schema("users-value", Schema(USER_V1, "AVRO")).version == 1
    assert client.get_versions("users-value") == [1]
    assert "users-value" in client.get_subjects()
    assert "AVRO" in client.get_schema_types()
    # The same schema under another subject shares the id.
    assert client.register_schema("copy-value", Schema(USER_V1, "AVRO")) == schema_id
    assert set(client.get_subjects_by_schema_id(schema_id)) == {"users-value", "copy-value"}
    assert {(v.subject, v.version) for v in client.get_schema_versions(schema_id)} == {
        ("users-value", 1), ("copy-value", 1)}


def test_evolution_passes_and_incompatible_change_is_refused(client: SchemaRegistryClient,
                                                             registry_broker: BrokerProcess) -> None:
    client.register_schema("evolve-value", Schema(USER_V1, "AVRO"))
    assert client.test_compatibility("evolve-value", Schema(USER_V2, "AVRO"))
    v2 = client.register_schema("evolve-value", Schema(USER_V2, "AVRO"))
    assert client.get_latest_version("evolve-value").schema_id == v2
    assert not client.test_compatibility("evolve-value", Schema(USER_BREAKS, "AVRO"), verbose=True)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("evolve-value", Schema(USER_BREAKS, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 40901)
    assert "incompatible with an earlier schema" in refused.value.error_message
    status, verdict = http(f"{registry_broker.registry_url}/compatibility/subjects/evolve-value/versions/latest"
                           "?verbose=true", "POST", {"schema": USER_BREAKS})
    assert status == 200 and verdict["is_compatible"] is False and any("phone" in m for m in verdict["messages"])


def test_config_and_mode(client: SchemaRegistryClient) -> None:
    assert client.get_compatibility() == "BACKWARD"
    # The stubs say set_compatibility returns a str; it returns the registry's JSON answer.
    assert client.set_compatibility("cfg-value", "FULL_TRANSITIVE") == {  # type: ignore[comparison-overlap]
        "compatibility": "FULL_TRANSITIVE"}
    assert client.get_compatibility("cfg-value") == "FULL_TRANSITIVE"
    level = client.get_config("cfg-value").compatibility_level
    assert level is not None and level.value == "FULL_TRANSITIVE"
    client.delete_config("cfg-value")
    with pytest.raises(SchemaRegistryError) as unset:
        client.get_compatibility("cfg-value")
    assert unset.value.error_code == 40408
    assert client.get_global_mode() == "READWRITE"
    assert client.update_mode("frozen-value", "READONLY") == "READONLY"
    assert client.get_mode("frozen-value") == "READONLY"
    with pytest.raises(SchemaRegistryError) as read_only:
        client.register_schema("frozen-value", Schema(ORDER, "AVRO"))
    assert read_only.value.error_code == 42205
    assert client.delete_mode("frozen-value") == "READONLY"
    assert client.register_schema("frozen-value", Schema(ORDER, "AVRO")) > 0
    assert client.get_contexts() == ["."]


def test_soft_and_permanent_deletes(client: SchemaRegistryClient) -> None:
    first = client.register_schema("gone-value", Schema(USER_V1, "AVRO"))
    client.register_schema("gone-value", Schema(USER_V2, "AVRO"))
    with pytest.raises(SchemaRegistryError) as not_soft:
        client.delete_version("gone-value", 1, permanent=True)
    assert not_soft.value.error_code == 40407
    assert client.delete_version("gone-value", 1) == 1
    assert client.get_versions("gone-value") == [2]
    assert client.delete_version("gone-value", 1, permanent=True) == 1
    with pytest.raises(SchemaRegistryError) as not_soft_subject:
        client.delete_subject("gone-value", permanent=True)
    assert not_soft_subject.value.error_code == 40405
    assert client.delete_subject("gone-value") == [2]
    assert "gone-value" not in client.get_subjects()
    assert client.delete_subject("gone-value", permanent=True) == [2]
    with pytest.raises(SchemaRegistryError) as missing:
        client.get_versions("gone-value")
    assert (missing.value.http_status_code, missing.value.error_code) == (404, 40401)
    assert json.loads(schema_text(client.get_schema(first)))["name"] == "User"  # still held by other subjects


def test_references(client: SchemaRegistryClient) -> None:
    order_id = client.register_schema("order-value", Schema(ORDER, "AVRO"))
    wrapper = json.dumps({"type": "record", "name": "Shipment", "namespace": "moldau.test", "fields": [
        {"name": "order", "type": "moldau.test.Order"}]})
    refs = [SchemaReference("moldau.test.Order", "order-value", 1)]
    wrapper_id = client.register_schema("shipment-value", Schema(wrapper, "AVRO", refs))
    held = client.get_latest_version("shipment-value")
    assert held.schema.references == refs
    assert client.get_referenced_by("order-value", 1) == [wrapper_id]
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_version("order-value", 1)
    assert referenced.value.error_code == 42206
    assert order_id != wrapper_id


def test_avro_records_round_trip_through_the_broker(client: SchemaRegistryClient,
                                                    registry_broker: BrokerProcess) -> None:
    topic = "avro-users"
    create_topic(registry_broker.bootstrap, topic)
    serializer = AvroSerializer(client, USER_V2)
    producer = Producer({"bootstrap.servers": registry_broker.bootstrap})
    sent = [{"name": f"user-{i}", "age": 20 + i, "email": None if i % 2 else f"u{i}@example.com"}
            for i in range(5)]
    for user in sent:
        producer.produce(topic, value=serializer(user, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    # A fresh client, so the deserializer fetches the writer's schema by id from the registry.
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry_broker.registry_url}))
    consumer = Consumer({"bootstrap.servers": registry_broker.bootstrap, "group.id": "avro-readers"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got: list[object] = []
        while len(got) < len(sent):
            msg = consumer.poll(10)
            assert msg is not None and msg.error() is None
            value = value_of(msg)
            assert value[0] == 0 and int.from_bytes(value[1:5], "big") == client.get_latest_version(
                f"{topic}-value").schema_id
            got.append(deserializer(value, SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    assert got == sent


def test_bad_input_gets_confluent_error_codes(registry_broker: BrokerProcess) -> None:
    url = registry_broker.registry_url
    assert http(f"{url}/subjects/x/versions", "POST", raw=b"{not json")[1]["error_code"] == 50005
    status, error = http(f"{url}/subjects/x/versions", "POST", {"schema": "{\"type\": \"recrod\"}"})
    assert (status, error["error_code"]) == (422, 42201)
    status, error = http(f"{url}/subjects/no-such-subject/versions/1")
    assert (status, error["error_code"]) == (404, 40401)
    http(f"{url}/subjects/one-value/versions", "POST", {"schema": ORDER}, content_type="application/json")
    status, error = http(f"{url}/subjects/one-value/versions/9")
    assert (status, error["error_code"]) == (404, 40402)
    status, error = http(f"{url}/subjects/one-value/versions/0")
    assert (status, error["error_code"]) == (422, 42202)
    status, error = http(f"{url}/config", "PUT", {"compatibility": "MOSTLY"})
    assert (status, error["error_code"]) == (422, 42203)
    status, error = http(f"{url}/schemas/ids/987654")
    assert (status, error["error_code"]) == (404, 40403)
    assert http(f"{url}/") == (200, {})


def test_schemas_topic_reads_as_confluents_layout(client: SchemaRegistryClient,
                                                  registry_broker: BrokerProcess) -> None:
    schema_id = client.register_schema("layout-value", Schema(ORDER, "AVRO"))
    client.set_compatibility("layout-value", "NONE")
    records = [(json.loads(r.key or b""), None if r.value is None else json.loads(r.value))
               for r in ck_consume_to_end(registry_broker.bootstrap, "_schemas")]
    schema_key = {"keytype": "SCHEMA", "subject": "layout-value", "version": 1, "magic": 1}
    value = next(v for k, v in records if k == schema_key)
    assert value is not None
    assert value == {"subject": "layout-value", "version": 1, "id": schema_id, "schema": value["schema"],
                     "deleted": False}
    assert ({"keytype": "CONFIG", "subject": "layout-value", "magic": 0}, {"compatibilityLevel": "NONE"}) in records


def test_restart_keeps_every_schema_and_id(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path)
    proc.start()
    try:
        client = SchemaRegistryClient({"url": proc.registry_url})
        ids = {f"s{i}-value": client.register_schema(f"s{i}-value", Schema(json.dumps(
            {"type": "record", "name": f"R{i}", "fields": [{"name": "f", "type": "int"}]}), "AVRO"))
            for i in range(5)}
        client.delete_version("s0-value", 1)
        client.set_compatibility("s1-value", "NONE")
        assert proc.stop() == 0
        proc.start()
        fresh = SchemaRegistryClient({"url": proc.registry_url})
        for subject, schema_id in ids.items():
            assert json.loads(schema_text(fresh.get_schema(schema_id)))["fields"][0]["name"] == "f"
            if subject != "s0-value":
                assert fresh.get_latest_version(subject).schema_id == schema_id
        assert "s0-value" not in fresh.get_subjects()
        assert fresh.get_compatibility("s1-value") == "NONE"
        new_id = fresh.register_schema("after-value", Schema(ORDER, "AVRO"))
        assert new_id == max(ids.values()) + 1  # ids continue after the replayed ones
    finally:
        if proc.running:
            proc.stop()
        proc.cleanup()
