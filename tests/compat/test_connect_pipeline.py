"""Converters and transforms inside a real `moldau connect standalone` worker: a file source's lines pass
through Kafka's SMTs (with a predicate) and Confluent's AvroConverter / Kafka's JsonConverter into a topic of a
real broker, where confluent-kafka's deserializers read them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.connect_worker import WorkerProcess, running_worker, wait_for


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(tmp_path_factory.mktemp("connect-pipeline"), shared_broker.bootstrap) as proc:
        yield proc


def consume(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        got: list[bytes | None] = []
        for _ in range(300):
            if len(got) >= count:
                break
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def start_source(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    status, body = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body


def test_lines_through_transforms_and_the_avro_converter(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                         tmp_path: Path) -> None:
    source_file, raw = tmp_path / "in.txt", f"lines-{uuid.uuid4().hex[:8]}"
    routed = raw.replace("lines-", "routed-")
    create_topic(shared_broker.bootstrap, routed)
    source_file.write_text("one\ntwo\nthree\n")
    start_source(worker, "avro-pipeline", {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": raw,
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": shared_broker.registry_url,
        "transforms": "hoist,stamp,route",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "line",
        "transforms.stamp.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.stamp.static.field": "origin", "transforms.stamp.static.value": "file",
        "transforms.stamp.topic.field": "source_topic!",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "lines-(.*)", "transforms.route.replacement": "routed-$1",
    })
    values = consume(shared_broker.bootstrap, routed, 3)
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": shared_broker.registry_url}))
    ctx = SerializationContext(routed, MessageField.VALUE)
    assert [deserializer(v, ctx) for v in values] == [
        {"line": line, "source_topic": raw, "origin": "file"} for line in ("one", "two", "three")]
    assert worker.request("DELETE", "/connectors/avro-pipeline")[0] == 204


def test_a_predicate_filters_and_json_without_schemas(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                      tmp_path: Path) -> None:
    topic = f"json-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, topic)
    dropped, kept = tmp_path / "dropped.txt", tmp_path / "kept.txt"
    dropped.write_text("x\ny\n")
    kept.write_text("a\nb\n")
    common = {"connector.class": "FileStreamSource", "topic": topic,
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false",
              "transforms": "hoist,drop",
              "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "text",
              "transforms.drop.type": "Filter", "transforms.drop.predicate": "fromDropped",
              "predicates": "fromDropped", "predicates.fromDropped.type": "HasHeaderKey",
              "predicates.fromDropped.name": "no-such-header"}
    # The first connector's predicate holds for every record (negated: none has the header): all are dropped,
    # yet its offsets advance past both lines.
    start_source(worker, "json-dropping", {**common, "file": str(dropped), "transforms.drop.negate": "true"})
    wait_for(lambda: worker.request("GET", "/connectors/json-dropping/offsets")[1].get("offsets") == [
        {"partition": {"filename": str(dropped)}, "offset": {"position": 4}}], what="offsets past dropped lines")
    start_source(worker, "json-keeping", {**common, "file": str(kept)})
    values = consume(shared_broker.bootstrap, topic, 2)
    assert [json.loads(v or b"null") for v in values] == [{"text": "a"}, {"text": "b"}]
    for name in ("json-dropping", "json-keeping"):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
