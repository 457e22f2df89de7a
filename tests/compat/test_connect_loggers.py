"""Kafka Connect's `/admin/loggers` (KIP-495) through real HTTP against a real worker: listing, reading and
setting levels with Kafka's level names, the loggers a change affects, its effect on what the worker logs, and
Kafka's errors for an unknown logger or level."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, running_worker, wait_for


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    with running_worker(tmp_path_factory.mktemp("connect-loggers"), shared_broker.bootstrap) as proc:
        yield proc


def test_list_and_read_levels(worker: WorkerProcess) -> None:
    status, body = worker.request("GET", "/admin/loggers")
    assert status == 200
    assert body["root"] == {"level": "INFO", "last_modified": None}
    status, body = worker.request("GET", "/admin/loggers/moldau.connect.worker.herder")
    assert (status, body) == (200, {"level": "INFO", "last_modified": None})
    status, body = worker.request("GET", "/admin/loggers/com.example.nobody")
    assert status == 404 and body == {"error_code": 404, "message": "Logger com.example.nobody not found."}


def test_set_a_level_for_a_logger_and_its_children(worker: WorkerProcess) -> None:
    status, affected = worker.request("PUT", "/admin/loggers/moldau.connect.worker", {"level": "DEBUG"})
    assert status == 200
    assert affected[0] == "moldau.connect.worker" and "moldau.connect.worker.herder" in affected
    assert affected == sorted(affected) and all(n.startswith("moldau.connect.worker") for n in affected)
    status, body = worker.request("GET", "/admin/loggers/moldau.connect.worker.herder")
    assert status == 200 and body["level"] == "DEBUG" and isinstance(body["last_modified"], int)
    listed = worker.request("GET", "/admin/loggers")[1]
    assert listed["moldau.connect.worker"]["level"] == "DEBUG" and listed["root"]["level"] == "INFO"
    for level, shown in (("trace", "TRACE"), ("WARN", "WARN"), ("FATAL", "FATAL"), ("OFF", "OFF"), ("INFO", "INFO")):
        assert worker.request("PUT", "/admin/loggers/moldau.connect.worker", {"level": level})[0] == 200
        assert worker.request("GET", "/admin/loggers/moldau.connect.worker")[1]["level"] == shown


def test_a_new_logger_and_cluster_scope(worker: WorkerProcess) -> None:
    status, affected = worker.request("PUT", "/admin/loggers/com.example.plugin", {"level": "ERROR"})
    assert (status, affected) == (200, ["com.example.plugin"])
    assert worker.request("GET", "/admin/loggers/com.example.plugin")[1]["level"] == "ERROR"
    status, body = worker.request("PUT", "/admin/loggers/com.example.plugin?scope=cluster", {"level": "WARN"})
    assert (status, body) == (204, None)
    assert worker.request("GET", "/admin/loggers/com.example.plugin")[1]["level"] == "WARN"


def test_bad_requests(worker: WorkerProcess) -> None:
    status, body = worker.request("PUT", "/admin/loggers/moldau.connect", {"level": "LOUD"})
    assert status == 400 and body["error_code"] == 400 and "LOUD" in body["message"]
    status, body = worker.request("PUT", "/admin/loggers/moldau.connect", {"lvl": "DEBUG"})
    assert status == 400 and "level" in body["message"]


def test_turning_a_logger_off_silences_it(worker: WorkerProcess, shared_broker: BrokerProcess,
                                          tmp_path: Path) -> None:
    """With the error handler's logger OFF, a skipped record is no longer logged even with errors.log.enable."""
    assert worker.request("PUT", "/admin/loggers/moldau.connect.worker.error_handler", {"level": "OFF"})[0] == 200
    topic = f"quiet-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for value in (b"one", b"\xff\xfe", b"two"):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    name, output = f"quiet-{uuid.uuid4().hex[:8]}", tmp_path / "out.txt"
    assert worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSink", "file": str(output), "topics": topic,
        "errors.tolerance": "all", "errors.log.enable": "true"}})[0] == 201
    wait_for(lambda: read_lines(output) == ["one", "two"], what="the good records")
    assert f"Error encountered in task {name}" not in worker.log_tail(1000)
    assert worker.request("PUT", "/admin/loggers/moldau.connect.worker.error_handler", {"level": "ERROR"})[0] == 200
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
