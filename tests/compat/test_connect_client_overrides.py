"""Client settings for a connector's tasks through Kafka Connect's REST API against a real worker: the worker's
`consumer.*` / `producer.*` configs, a connector's `consumer.override.*` changing what its task consumes, and
`connector.client.config.override.policy` refusing overrides (by Kafka's class name) with a 400 naming the field."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, wait_for

NONE_POLICY = "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy"


def _worker(directory: Path, bootstrap: str, overrides: dict[str, str]) -> Iterator[WorkerProcess]:
    proc = WorkerProcess(directory, bootstrap, overrides)
    proc.start()
    try:
        yield proc
        assert proc.stop() == 0, proc.log_tail()
    finally:
        proc.cleanup()


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """The default policy (All), with worker-level client settings in Java client names."""
    yield from _worker(tmp_path_factory.mktemp("overrides-all"), shared_broker.bootstrap, {
        "consumer.max.poll.records": "2", "producer.linger.ms": "1", "producer.buffer.memory": "8388608"})


@pytest.fixture(scope="module")
def strict_worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    yield from _worker(tmp_path_factory.mktemp("overrides-none"), shared_broker.bootstrap, {
        "connector.client.config.override.policy": NONE_POLICY})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _sink(topic: str, output: Path, **extra: str) -> dict[str, Any]:
    return {"name": _name("sink"), "connector.class": "FileStreamSink", "file": str(output), "topics": topic,
            **extra}


def test_consumer_override_changes_where_the_sink_starts(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                        tmp_path: Path) -> None:
    """Sinks start at the earliest offset by default; `consumer.override.auto.offset.reset=latest` skips what
    was in the topic before the connector existed."""
    topic = _name("history")
    _produce(shared_broker.bootstrap, topic, [b"old 1", b"old 2", b"old 3"])
    default_out, latest_out = tmp_path / "default.txt", tmp_path / "latest.txt"
    default_name, latest_name = _name("default"), _name("latest")
    default_config = {**_sink(topic, default_out), "name": default_name}
    assert worker.request("POST", "/connectors", {"name": default_name, "config": default_config})[0] == 201
    latest_config = {**_sink(topic, latest_out, **{"consumer.override.auto.offset.reset": "latest"}),
                     "name": latest_name}
    status, body = worker.request("POST", "/connectors", {"name": latest_name, "config": latest_config})
    assert status == 201, body
    wait_for(lambda: read_lines(default_out)[:3] == ["old 1", "old 2", "old 3"], what="the default sink")
    sent = 0

    def new_records_arrive() -> bool:
        nonlocal sent
        if read_lines(latest_out):
            return True
        sent += 1  # the latest sink only sees records produced after it found its position: keep producing
        _produce(shared_broker.bootstrap, topic, [f"new {sent}".encode()])
        return False
    wait_for(new_records_arrive, what="new records in the latest sink")
    lines = read_lines(latest_out)
    assert lines and all(line.startswith("new ") for line in lines)
    for name in (default_name, latest_name):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_unknown_client_setting_is_refused(worker: WorkerProcess, tmp_path: Path) -> None:
    config = _sink("t", tmp_path / "x.txt", **{"producer.override.no.such.setting": "1"})
    status, body = worker.request("POST", "/connectors", {"name": config["name"], "config": config})
    assert status == 400 and "producer.override.no.such.setting" in body["message"]
    status, body = worker.request("PUT", "/connector-plugins/FileStreamSink/config/validate", _sink(
        "t", tmp_path / "x.txt", **{"consumer.override.key.deserializer": "x"}))
    assert status == 200 and body["error_count"] == 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
    assert list(errors) == ["consumer.override.key.deserializer"]


def test_policy_none_refuses_overrides(strict_worker: WorkerProcess, tmp_path: Path) -> None:
    config = _sink("t", tmp_path / "x.txt", **{"consumer.override.auto.offset.reset": "latest"})
    status, body = strict_worker.request("POST", "/connectors", {"name": config["name"], "config": config})
    assert status == 400 and body["error_code"] == 400
    assert "consumer.override.auto.offset.reset" in body["message"] and "'None' policy" in body["message"]
    status, body = strict_worker.request("PUT", "/connector-plugins/FileStreamSink/config/validate", config)
    assert status == 200 and body["error_count"] == 1
    config.pop("consumer.override.auto.offset.reset")
    name = config["name"]
    assert strict_worker.request("POST", "/connectors", {"name": name, "config": config})[0] == 201
    assert strict_worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_worker_level_settings_reach_the_tasks(worker: WorkerProcess, shared_broker: BrokerProcess,
                                                tmp_path: Path) -> None:
    """consumer.max.poll.records (no librdkafka setting: the sink's batch size) and producer.buffer.memory
    (librdkafka's queue.buffering.max.kbytes) are accepted; records flow source -> topic -> sink."""
    topic, source_file, output = _name("flow"), tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("".join(f"line {i}\n" for i in range(7)))
    names = [_name("src"), _name("snk")]
    assert worker.request("POST", "/connectors", {"name": names[0], "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}})[0] == 201
    sink = {**_sink(topic, output), "name": names[1]}
    assert worker.request("POST", "/connectors", {"name": names[1], "config": sink})[0] == 201
    wait_for(lambda: read_lines(output) == [f"line {i}" for i in range(7)], what="the lines in the sink file")
    for name in names:
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
