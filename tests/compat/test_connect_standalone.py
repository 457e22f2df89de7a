"""`moldau connect standalone` as a real process against a real broker: file source -> topic -> file sink,
resuming after restarts and crashes, Kafka Connect's REST API (answers and errors), failing and restarted
tasks, pause/resume, plugins from `plugin.path`, and one run through a Kafka Connect client library."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, wait_for

FLAKY_PLUGIN = '''
"""A test plugin: a source whose task fails while a marker file exists."""
import os
import time

from moldau.connect.api import SourceConnector, SourceTask
from moldau.connect.config import ConfigDef, ConfigType, Importance


class FlakySourceConnector(SourceConnector):
    aliases = ("com.example.FlakySource",)

    def config_def(self):
        return ConfigDef().define("marker", ConfigType.STRING, importance=Importance.HIGH, documentation="file")

    def start(self, props):
        if props.get("fail.start") == "true":
            raise ValueError("connector refused to start on purpose")
        self.props = dict(props)

    def task_class(self):
        return FlakySourceTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class FlakySourceTask(SourceTask):
    def start(self, props):
        self.marker = props["marker"]

    def poll(self):
        time.sleep(0.05)
        if os.path.exists(self.marker):
            raise RuntimeError("flaky task failed on purpose")
        return None

    def stop(self):
        pass
'''


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """One worker for the REST, failure and pause tests, with a plugin directory."""
    directory = tmp_path_factory.mktemp("connect-worker")
    plugins = directory / "plugins"
    plugins.mkdir()
    (plugins / "flaky_plugin.py").write_text(FLAKY_PLUGIN)
    proc = WorkerProcess(directory, shared_broker.bootstrap, {"plugin.path": str(plugins)})
    proc.start()
    try:
        yield proc
        assert proc.stop() == 0, proc.log_tail()
    finally:
        proc.cleanup()


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _file_pair(worker: WorkerProcess, tmp_path: Path, topic: str) -> tuple[str, str, Path, Path]:
    source, sink = _name("src"), _name("sink")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    status, _ = worker.request("POST", "/connectors", {"name": source, "config": {
        "connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}})
    assert status == 201
    status, _ = worker.request("POST", "/connectors", {"name": sink, "config": {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "file": str(sink_file),
        "topics": topic}})
    assert status == 201
    return source, sink, source_file, sink_file


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as file:
        file.write("".join(line + "\n" for line in lines))


def _running(worker: WorkerProcess, name: str) -> dict[str, Any] | None:
    status, body = worker.request("GET", f"/connectors/{name}/status")
    if status == 200 and body["connector"]["state"] == "RUNNING" and body["tasks"] and \
            all(t["state"] == "RUNNING" for t in body["tasks"]):
        return dict(body)
    return None


def test_file_source_to_file_sink_round_trip(worker: WorkerProcess, tmp_path: Path) -> None:
    topic = _name("lines")
    source, sink, source_file, sink_file = _file_pair(worker, tmp_path, topic)
    lines = [f"line {i} é" for i in range(500)]
    _append(source_file, lines)
    wait_for(lambda: len(read_lines(sink_file)) >= len(lines), what="the sink file")
    assert read_lines(sink_file) == lines

    status, info = worker.request("GET", f"/connectors/{source}")
    assert status == 200 and info["type"] == "source" and info["tasks"] == [{"connector": source, "task": 0}]
    assert info["config"]["file"] == str(source_file)
    status, topics = worker.request("GET", f"/connectors/{sink}/topics")
    assert topics == {sink: {"topics": [topic]}}
    # Offsets, in KIP-875's shapes: the source's file position, the sink's consumer offset.
    size = source_file.stat().st_size
    wait_for(lambda: worker.request("GET", f"/connectors/{source}/offsets")[1]["offsets"] ==
             [{"partition": {"filename": str(source_file)}, "offset": {"position": size}}], what="source offsets")
    wait_for(lambda: worker.request("GET", f"/connectors/{sink}/offsets")[1]["offsets"] ==
             [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 500}}],
             what="sink offsets")
    status, expanded = worker.request("GET", "/connectors?expand=status&expand=info")
    assert expanded[source]["status"]["connector"]["state"] == "RUNNING"
    assert expanded[sink]["info"]["type"] == "sink"
    for name in (source, sink):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
        assert worker.request("GET", f"/connectors/{name}")[0] == 404


def test_rest_api_answers_and_errors(worker: WorkerProcess, tmp_path: Path) -> None:
    status, root = worker.request("GET", "/")
    assert status == 200 and set(root) == {"version", "commit", "kafka_cluster_id"} and root["kafka_cluster_id"]

    status, plugins = worker.request("GET", "/connector-plugins")
    classes = {p["class"]: p["type"] for p in plugins}
    assert classes["org.apache.kafka.connect.file.FileStreamSourceConnector"] == "source"
    assert classes["org.apache.kafka.connect.file.FileStreamSinkConnector"] == "sink"
    assert classes["com.example.FlakySource"] == "source"  # from plugin.path

    status, body = worker.request("GET", "/connectors/no-such-connector/status")
    assert status == 404 and body == {"error_code": 404, "message": "Connector no-such-connector not found"}

    name = _name("bad")
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "x"), "topic": "t", "batch.size": "zero"}})
    assert status == 400 and body["error_code"] == 400 and "batch.size" in body["message"]
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "x")}})
    assert status == 400 and '"topic"' in body["message"]
    status, body = worker.request("POST", "/connectors", {"name": name, "config": {"connector.class": "NoSuch"}})
    assert status == 400 and "NoSuch" in body["message"]

    status, body = worker.request("PUT", "/connector-plugins/FileStreamSource/config/validate",
                                  {"connector.class": "FileStreamSource", "name": "v", "batch.size": "-1"})
    assert status == 200 and body["name"] == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert body["error_count"] == 2
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
    assert set(errors) == {"topic", "batch.size"}
    definitions = {c["definition"]["name"]: c["definition"] for c in body["configs"]}
    assert definitions["batch.size"]["default_value"] == "2000" and definitions["topic"]["required"] is True
    assert worker.request("PUT", "/connector-plugins/Nope/config/validate", {"a": "b"})[0] == 404
    status, own = worker.request("GET", "/connector-plugins/FileStreamSink/config")
    assert status == 200 and [d["name"] for d in own] == ["file"]
    status, own = worker.request("GET", "/connector-plugins/org.apache.kafka.connect.storage.StringConverter/config")
    assert status == 200 and [d["name"] for d in own] == ["converter.encoding"]

    source_file = tmp_path / "dup.txt"
    config = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": _name("dup")}
    assert worker.request("POST", "/connectors", {"name": name, "config": config})[0] == 201
    status, body = worker.request("POST", "/connectors", {"name": name, "config": config})
    assert status == 409 and body == {"error_code": 409, "message": f"Connector {name} already exists"}

    # PUT /config updates (200) or creates (201); PATCH merges; GET /tasks lists task configs.
    status, _ = worker.request("PUT", f"/connectors/{name}/config", {**config, "batch.size": "10"})
    assert status == 200
    status, _ = worker.request("PATCH", f"/connectors/{name}/config", {"batch.size": "20"})
    assert status == 200
    assert worker.request("GET", f"/connectors/{name}/config")[1]["batch.size"] == "20"
    status, tasks = worker.request("GET", f"/connectors/{name}/tasks")
    assert tasks[0]["id"] == {"connector": name, "task": 0} and tasks[0]["config"]["batch.size"] == "20"
    wait_for(lambda: _running(worker, name), what="the reconfigured connector")
    status, task = worker.request("GET", f"/connectors/{name}/tasks/0/status")
    assert status == 200 and task["id"] == 0 and task["state"] == "RUNNING"
    assert worker.request("GET", f"/connectors/{name}/tasks/7/status")[0] == 404
    assert worker.request("POST", f"/connectors/{name}/tasks/7/restart")[0] == 404

    # Stop (KIP-875): the connector reports STOPPED with no tasks; resume starts it again.
    assert worker.request("PUT", f"/connectors/{name}/stop")[0] == 204
    status, body = worker.request("GET", f"/connectors/{name}/status")
    assert body["connector"]["state"] == "STOPPED" and body["tasks"] == []
    assert worker.request("PUT", f"/connectors/{name}/resume")[0] == 202
    wait_for(lambda: _running(worker, name), what="the resumed connector")
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 404


def test_failed_task_reports_trace_and_restarts(worker: WorkerProcess, tmp_path: Path) -> None:
    marker = tmp_path / "fail"
    marker.write_text("")
    name = _name("flaky")
    status, _ = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "com.example.FlakySource", "marker": str(marker)}})
    assert status == 201

    def failed() -> dict[str, Any] | None:
        body = worker.request("GET", f"/connectors/{name}/status")[1]
        return body if body["tasks"] and body["tasks"][0]["state"] == "FAILED" else None

    body = wait_for(failed, what="the task to fail")
    assert body["connector"]["state"] == "RUNNING"
    trace = body["tasks"][0]["trace"]
    assert "RuntimeError: flaky task failed on purpose" in trace and "Traceback" in trace

    marker.unlink()
    status, body = worker.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
    assert status == 202
    assert body["connector"]["state"] == "RUNNING"  # not failed, so not restarted
    assert body["tasks"][0]["state"] == "RESTARTING"
    wait_for(lambda: _running(worker, name), what="the restarted task")
    assert "trace" not in worker.request("GET", f"/connectors/{name}/tasks/0/status")[1]

    marker.write_text("")
    wait_for(failed, what="the task to fail again")
    marker.unlink()
    assert worker.request("POST", f"/connectors/{name}/tasks/0/restart")[0] == 204
    wait_for(lambda: _running(worker, name), what="the task restarted alone")
    assert worker.request("POST", f"/connectors/{name}/restart")[0] == 204  # the connector only
    wait_for(lambda: _running(worker, name), what="the restarted connector")
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_pause_and_resume(worker: WorkerProcess, tmp_path: Path) -> None:
    source, sink, source_file, sink_file = _file_pair(worker, tmp_path, _name("paused"))
    _append(source_file, ["before"])
    wait_for(lambda: read_lines(sink_file) == ["before"], what="the first line")

    assert worker.request("PUT", f"/connectors/{source}/pause")[0] == 202
    status, body = worker.request("GET", f"/connectors/{source}/status")
    assert status == 200 and body["connector"]["state"] == "PAUSED" and body["tasks"][0]["state"] == "PAUSED"
    _append(source_file, ["while paused"])
    time.sleep(2.0)
    assert read_lines(sink_file) == ["before"]

    assert worker.request("PUT", f"/connectors/{source}/resume")[0] == 202
    wait_for(lambda: read_lines(sink_file) == ["before", "while paused"], what="the line written while paused")
    assert _running(worker, source)
    for name in (source, sink):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_restart_resumes_source_without_loss(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """Connectors from files; a clean stop loses and repeats nothing; a crash repeats at most what was sent
    after the last offset commit (at least once)."""
    topic = _name("resume")
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    source_file.write_text("")
    (tmp_path / "source.properties").write_text(
        f"name=resume-source\nconnector.class=FileStreamSource\nfile={source_file}\ntopic={topic}\n")
    (tmp_path / "sink.json").write_text(
        '{"name": "resume-sink", "config": {"connector.class": "FileStreamSink", '
        f'"file": "{sink_file}", "topics": "{topic}"}}}}')
    # After the kill below, the sink's new consumer joins its group once the killed one's session has expired.
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap, {"consumer.session.timeout.ms": "6000"},
                           connector_files=[tmp_path / "source.properties", tmp_path / "sink.json"])
    expected: list[str] = []
    try:
        worker.start()
        for batch in range(3):
            lines = [f"batch {batch} line {i}" for i in range(1000)]
            _append(source_file, lines)
            expected += lines
            want = len(expected)
            def sunk(want: int = want) -> bool:
                return len(read_lines(sink_file)) >= want

            wait_for(sunk, what=f"batch {batch}")
            assert worker.stop() == 0, worker.log_tail()
            assert read_lines(sink_file) == expected  # a clean stop: nothing lost, nothing repeated
            worker.start()

        # A crash while lines stream in: every line arrives, duplicates only from after the last commit.
        crash_lines = [f"crash line {i}" for i in range(5000)]
        _append(source_file, crash_lines[:2500])
        wait_for(lambda: len(read_lines(sink_file)) >= len(expected) + 1000, what="lines before the crash")
        worker.kill()
        _append(source_file, crash_lines[2500:])
        expected += crash_lines
        worker.start()
        wait_for(lambda: set(expected) <= set(read_lines(sink_file)), timeout_s=60, what="every line after the crash")
        counts = Counter(read_lines(sink_file))
        duplicates = sum(c - 1 for c in counts.values())
        print(f"after a crash: {len(expected)} lines expected, {sum(counts.values())} written, "
              f"{duplicates} duplicates")
        assert set(counts) == set(expected)
        assert all(counts[line] == 1 for line in expected[:3000])  # before the crash batch: exactly once
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.cleanup()


def test_kafka_connect_client_library(worker: WorkerProcess, tmp_path: Path) -> None:
    """The REST API through kafka-connect-py, a Kafka Connect client written against Confluent's docs."""
    import kafka_connect  # type: ignore[import-untyped]  # the client ships no type information

    client = kafka_connect.KafkaConnect(url=worker.url)
    assert client.get_cluster_info()["kafka_cluster_id"]
    name = _name("client")
    created = client.create_connector({"name": name, "config": {
        "connector.class": "FileStreamSource", "file": str(tmp_path / "c.txt"), "topic": _name("client")}})
    assert created["name"] == name and created["type"] == "source"
    wait_for(lambda: client.get_connector_status(name)["connector"]["state"] == "RUNNING", what="running")
    assert name in client.list_connectors()
    assert name in client.list_connectors(expand="status", state="running")
    client.pause_connector(name)
    assert client.get_connector_status(name)["connector"]["state"] == "PAUSED"
    client.resume_connector(name)
    assert client.get_connector_task_status(name, 0)["state"] == "RUNNING"
    assert client.list_connector_tasks(name)[0]["id"] == {"connector": name, "task": 0}
    assert any(p["class"].endswith("FileStreamSourceConnector") for p in client.list_connector_plugins())
    client.delete_connector(name)
    assert name not in client.list_connectors()


def test_offsets_altered_and_reset_while_stopped(worker: WorkerProcess, tmp_path: Path) -> None:
    """KIP-875: offsets change only while the connector is STOPPED; the source then re-reads from the set
    position, and the sink re-consumes from the set offset, or from the earliest after a null offset."""
    topic = _name("offsets")
    source, sink, source_file, sink_file = _file_pair(worker, tmp_path, topic)
    _append(source_file, ["a", "b", "c"])
    wait_for(lambda: read_lines(sink_file) == ["a", "b", "c"], what="the first lines")
    wait_for(lambda: worker.request("GET", f"/connectors/{source}/offsets")[1]["offsets"], what="source offsets")

    patch = {"offsets": [{"partition": {"filename": str(source_file)}, "offset": {"position": 2}}]}
    status, body = worker.request("PATCH", f"/connectors/{source}/offsets", patch)
    assert status == 400 and "STOPPED" in body["message"]
    assert worker.request("PUT", f"/connectors/{source}/stop")[0] == 204
    status, body = worker.request("PATCH", f"/connectors/{source}/offsets", patch)
    assert status == 200 and "altered" in body["message"]
    assert worker.request("GET", f"/connectors/{source}/offsets")[1]["offsets"] == patch["offsets"]
    assert worker.request("PUT", f"/connectors/{source}/resume")[0] == 202
    wait_for(lambda: read_lines(sink_file) == ["a", "b", "c", "b", "c"], what="lines re-read from position 2")

    wait_for(lambda: worker.request("GET", f"/connectors/{sink}/offsets")[1]["offsets"] ==
             [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}],
             what="sink offsets")
    assert worker.request("PUT", f"/connectors/{sink}/stop")[0] == 204
    sink_patch = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                               "offset": {"kafka_offset": 4}}]}
    assert worker.request("PATCH", f"/connectors/{sink}/offsets", sink_patch)[0] == 200
    assert worker.request("GET", f"/connectors/{sink}/offsets")[1]["offsets"] == sink_patch["offsets"]
    assert worker.request("PUT", f"/connectors/{sink}/resume")[0] == 202
    wait_for(lambda: read_lines(sink_file) == ["a", "b", "c", "b", "c", "c"], what="the sink re-consuming")

    # A null offset resets one partition: its committed offset goes, and the sink starts it from the earliest.
    assert worker.request("PUT", f"/connectors/{sink}/stop")[0] == 204
    reset = {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": None}]}
    status, body = worker.request("PATCH", f"/connectors/{sink}/offsets", reset)
    assert status == 200 and "altered" in body["message"], body
    assert worker.request("GET", f"/connectors/{sink}/offsets")[1]["offsets"] == []
    assert worker.request("PUT", f"/connectors/{sink}/resume")[0] == 202
    wait_for(lambda: read_lines(sink_file)[6:] == ["a", "b", "c", "b", "c"], what="the reset partition re-read")

    assert worker.request("PUT", f"/connectors/{sink}/stop")[0] == 204
    assert worker.request("DELETE", f"/connectors/{sink}/offsets")[0] == 200
    assert worker.request("GET", f"/connectors/{sink}/offsets")[1]["offsets"] == []
    assert worker.request("PUT", f"/connectors/{source}/stop")[0] == 204
    assert worker.request("DELETE", f"/connectors/{source}/offsets")[0] == 200
    assert worker.request("GET", f"/connectors/{source}/offsets")[1]["offsets"] == []
    for name in (source, sink):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_cli_manages_connectors(worker: WorkerProcess, tmp_path: Path) -> None:
    name = _name("cli")
    config = tmp_path / "cli.properties"
    config.write_text(f"name={name}\nconnector.class=FileStreamSource\nfile={tmp_path / 'in.txt'}\n"
                      f"topic={_name('cli')}\n")

    def moldau(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "moldau", "connect", *args, "--url", worker.url],
                              capture_output=True, text=True, timeout=60)

    created = moldau("create", str(config))
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["name"] == name
    wait_for(lambda: _running(worker, name), what="the connector")
    listed = moldau("list")
    assert f"{name}\tsource\tRUNNING\ttasks 0:RUNNING" in listed.stdout.splitlines()
    assert moldau("pause", name).returncode == 0
    assert json.loads(moldau("status", name).stdout)["connector"]["state"] == "PAUSED"
    assert moldau("resume", name).returncode == 0
    assert json.loads(moldau("describe", name).stdout)["tasks"] == [{"connector": name, "task": 0}]
    restarted = moldau("restart", name, "--include-tasks")
    assert restarted.returncode == 0 and json.loads(restarted.stdout)["tasks"][0]["state"] == "RESTARTING"
    assert "org.apache.kafka.connect.file.FileStreamSinkConnector\tsink" in moldau("plugins").stdout
    assert moldau("delete", name).returncode == 0
    missing = moldau("status", name)
    assert missing.returncode == 1 and f"Connector {name} not found (HTTP 404)" in missing.stderr


def test_connector_failing_at_start_is_failed_with_its_trace(worker: WorkerProcess, tmp_path: Path) -> None:
    name = _name("refuses")
    status, _ = worker.request("POST", "/connectors", {"name": name, "config": {
        "connector.class": "com.example.FlakySource", "marker": str(tmp_path / "none"), "fail.start": "true"}})
    assert status == 201
    body = worker.request("GET", f"/connectors/{name}/status")[1]
    assert body["connector"]["state"] == "FAILED" and body["tasks"] == []
    assert "ValueError: connector refused to start on purpose" in body["connector"]["trace"]
    status, _ = worker.request("PATCH", f"/connectors/{name}/config", {"fail.start": None})
    assert status == 200
    wait_for(lambda: _running(worker, name), what="the reconfigured connector")
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204


def test_sink_error_tolerance(worker: WorkerProcess, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """A record the converter cannot read fails the task (errors.tolerance=none, the default) or is skipped
    (errors.tolerance=all)."""
    from confluent_kafka import Producer

    topic = _name("poison")
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap})
    for value in (b"good 1", b"\xff\xfe not utf-8", b"good 2"):
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0
    strict, tolerant = _name("strict"), _name("tolerant")
    for name, tolerance in ((strict, "none"), (tolerant, "all")):
        status, _ = worker.request("POST", "/connectors", {"name": name, "config": {
            "connector.class": "FileStreamSink", "file": str(tmp_path / f"{name}.txt"), "topics": topic,
            "errors.tolerance": tolerance, "errors.log.enable": "true"}})
        assert status == 201
    wait_for(lambda: read_lines(tmp_path / f"{tolerant}.txt") == ["good 1", "good 2"], what="the tolerant sink")

    def strict_failed() -> dict[str, Any] | None:
        body = worker.request("GET", f"/connectors/{strict}/status")[1]
        return body if body["tasks"] and body["tasks"][0]["state"] == "FAILED" else None

    trace = wait_for(strict_failed, what="the strict sink to fail")["tasks"][0]["trace"]
    assert "Tolerance exceeded in error handler" in trace and "is not UTF-8 text" in trace
    for name in (strict, tolerant):
        assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
