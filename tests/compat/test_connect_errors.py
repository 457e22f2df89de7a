"""Connect's `errors.*` handling in a real worker against a real broker: a sink with `errors.tolerance=all`
sends records its converter cannot read to the dead letter queue (original key, value and headers, plus Kafka's
`__connect.errors.*` headers) and commits their offsets; with `none` the task fails with the trace in its
status; a source whose transform fails on some records skips exactly those."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, running_worker, wait_for

Headers = list[tuple[str, str | bytes | None]]
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
BUSY_PLUGIN = '''
"""A test transform that is busy (RetriableException) the first `failures` times it sees each value."""
from moldau.connect.api import Transformation
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.errors import RetriableException


class BusyTransform(Transformation):
    aliases = ("com.example.Busy",)

    def configure(self, configs):
        self.failures = int(configs.get("failures", "2"))
        self.seen = {}

    def apply(self, record):
        count = self.seen.get(record.value, 0)
        self.seen[record.value] = count + 1
        if count < self.failures:
            raise RetriableException(f"busy with {record.value!r}, attempt {count + 1}")
        return record

    def config_def(self):
        return ConfigDef().define("failures", ConfigType.INT, 2, Importance.LOW, "attempts that fail")
'''


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    directory = tmp_path_factory.mktemp("connect-errors")
    plugins = directory / "plugins"
    plugins.mkdir()
    (plugins / "busy_plugin.py").write_text(BUSY_PLUGIN)
    with running_worker(directory, shared_broker.bootstrap, {"plugin.path": str(plugins)}) as proc:
        yield proc


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes, Headers]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": _name("reader"), "enable.auto.commit": False})
    consumer.assign([KafkaTopicPartition(topic, 0, 0)])
    found: list[Any] = []
    try:
        def more() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                found.append(message)
            return len(found) >= count
        wait_for(more, what=f"{count} records in {topic}")
    finally:
        consumer.close()
    return found


def _status(worker: WorkerProcess, name: str) -> dict[str, Any]:
    status, body = worker.request("GET", f"/connectors/{name}/status")
    assert status == 200, body
    return dict(body)


def test_sink_dead_letter_queue(worker: WorkerProcess, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic, dlq, name = _name("orders"), _name("dlq"), _name("json-sink")
    records: list[tuple[bytes, bytes, Headers]] = [
        (b"k1", b'{"id": 1}', [("origin", b"shop")]),
        (b"k2", b"{not json", [("origin", b"shop"), ("attempt", b"1")]),
        (b"k3", b'{"id": 3}', []),
        (b"k4", b"\xff\xfe", [("origin", b"app")]),
        (b"k5", b'{"id": 5}', []),
    ]
    _produce(shared_broker.bootstrap, topic, records)
    output = tmp_path / "out.txt"
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink", "file": str(output), "topics": topic,
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.tolerance": "all", "errors.log.enable": "true", "errors.log.include.messages": "true",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"}})
    assert status == 201, body

    wait_for(lambda: read_lines(output) == ["{id=1}", "{id=3}", "{id=5}"],
             what="the good records in the sink file")
    letters = _read_all(shared_broker.bootstrap, dlq, 2)
    assert [(m.key(), m.value()) for m in letters] == [(b"k2", b"{not json"), (b"k4", b"\xff\xfe")]
    for message, (offset, original) in zip(letters, ((1, records[1][2]), (3, records[3][2])), strict=True):
        headers = list(message.headers() or [])
        assert headers[:len(original)] == original  # the consumed record's own headers come first, unchanged
        context = {k: v.decode() for k, v in headers[len(original):]}
        assert context["__connect.errors.topic"] == topic
        assert context["__connect.errors.partition"] == "0"
        assert context["__connect.errors.offset"] == str(offset)
        assert context["__connect.errors.connector.name"] == name
        assert context["__connect.errors.task.id"] == "0"
        assert context["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert context["__connect.errors.class.name"].endswith("JsonConverter")
        assert context["__connect.errors.exception.class.name"]
        assert context["__connect.errors.exception.message"]
        assert "Traceback" in context["__connect.errors.exception.stacktrace"]

    def committed() -> bool:
        offsets = worker.request("GET", f"/connectors/{name}/offsets")[1]["offsets"]
        return [o["offset"]["kafka_offset"] for o in offsets] == [len(records)]
    wait_for(committed, what="the consumer offsets past every record, skipped ones included")
    assert _status(worker, name)["tasks"][0]["state"] == "RUNNING"
    assert "Error encountered in task" in worker.log_tail(400)
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_tolerance_none_fails_the_task(worker: WorkerProcess, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic, dlq, name = _name("strict-in"), _name("strict-dlq"), _name("strict")
    _produce(shared_broker.bootstrap, topic, [(b"k", b"{broken", [])])
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"), "topics": topic,
        "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "false",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1"}})
    assert status == 201, body

    def failed() -> dict[str, Any] | None:
        body = _status(worker, name)
        return body if body["tasks"] and body["tasks"][0]["state"] == "FAILED" else None
    trace = wait_for(failed, what="the task to fail")["tasks"][0]["trace"]
    assert "Tolerance exceeded in error handler" in trace and "JSON" in trace
    offsets = worker.request("GET", f"/connectors/{name}/offsets")[1]["offsets"]
    assert offsets == []  # the record that failed the task is not committed
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_source_transform_errors_are_skipped(worker: WorkerProcess, shared_broker: BrokerProcess,
                                             tmp_path: Path) -> None:
    """Cast$Value to int32 fails on the lines that are not numbers; with tolerance=all they are skipped and the
    file's offset still moves past them."""
    source_file, topic, name = tmp_path / "numbers.txt", _name("numbers"), _name("cast-source")
    source_file.write_text("1\ntwo\n3\nfour\n5\n")
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": topic,
        "transforms": "toInt", "transforms.toInt.type": "org.apache.kafka.connect.transforms.Cast$Value",
        "transforms.toInt.spec": "int32", "errors.tolerance": "all", "errors.log.enable": "true"}})
    assert status == 201, body
    values = [m.value() for m in _read_all(shared_broker.bootstrap, topic, 3)]
    assert values == [b"1", b"3", b"5"]

    def position() -> bool:
        offsets = worker.request("GET", f"/connectors/{name}/offsets")[1]["offsets"]
        return bool(offsets) and offsets[0]["offset"]["position"] == len(source_file.read_bytes())
    wait_for(position, what="the source offset past the skipped lines")
    assert _status(worker, name)["tasks"][0]["state"] == "RUNNING"
    assert "TRANSFORMATION" in worker.log_tail(400)
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_retriable_errors_are_retried(worker: WorkerProcess, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """A transform raising RetriableException twice per record: with errors.retry.timeout the records go
    through; without it (the default, 0) the first error fails the task."""
    source_file = tmp_path / "words.txt"
    source_file.write_text("alpha\nbeta\n")
    patient, hasty = _name("patient"), _name("hasty")
    for name, timeout in ((patient, "30000"), (hasty, "0")):
        status, body = worker.request("POST", "/connectors", {"name": name, "config": {
            "connector.class": "FileStreamSource", "file": str(source_file), "topic": name,
            "transforms": "busy", "transforms.busy.type": "com.example.Busy",
            "errors.retry.timeout": timeout, "errors.retry.delay.max.ms": "400"}})
        assert status == 201, body
    assert [m.value() for m in _read_all(shared_broker.bootstrap, patient, 2)] == [b"alpha", b"beta"]
    assert _status(worker, patient)["tasks"][0]["state"] == "RUNNING"

    def failed() -> dict[str, Any] | None:
        body = _status(worker, hasty)
        return body if body["tasks"] and body["tasks"][0]["state"] == "FAILED" else None
    trace = wait_for(failed, what="the task without retries to fail")["tasks"][0]["trace"]
    assert "Tolerance exceeded in error handler" in trace and "busy with 'alpha', attempt 1" in trace
    for name in (patient, hasty):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_dead_letter_queue_is_a_sink_config(worker: WorkerProcess) -> None:
    """Kafka's dead letter queue configs are defined for sink connectors; validation shows them for sinks."""
    status, body = worker.request("PUT", "/connector-plugins/FileStreamSink/config/validate", {
        "connector.class": "FileStreamSink", "topics": "t", "errors.tolerance": "sometimes"})
    assert status == 200
    by_name = {c["definition"]["name"]: c for c in body["configs"]}
    assert "errors.deadletterqueue.topic.name" in by_name
    assert by_name["errors.tolerance"]["value"]["errors"]
    status, body = worker.request("PUT", "/connector-plugins/FileStreamSource/config/validate", {
        "connector.class": "FileStreamSource", "topic": "t"})
    assert status == 200
    assert "errors.deadletterqueue.topic.name" not in {c["definition"]["name"] for c in body["configs"]}
