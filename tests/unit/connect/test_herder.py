"""The herder's lifecycle rules with connectors whose tasks need no broker: states, failures with traces,
restarts, pause/resume/stop, deletes and the errors the REST API turns into 400/404/409."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from moldau.connect.api import SourceConnector, SourceRecord, SourceTask, Task
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.errors import ConfigException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.worker.herder import Herder, HerderError
from moldau.connect.worker.stores import MemoryConfigStore, MemoryOffsetStore, MemoryStatusStore
from moldau.connect.worker.worker_config import WorkerConfig
from moldau.net.ports import free_port

FAIL = threading.Event()  # set: IdleTask.poll raises


class IdleConnector(SourceConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef().define("label", ConfigType.STRING, importance=Importance.HIGH, documentation="a label")

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)

    def task_class(self) -> type[Task]:
        return IdleTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.props, "index": str(i)} for i in range(max_tasks)]

    def stop(self) -> None:
        pass


class IdleTask(SourceTask):
    def start(self, props: Mapping[str, str]) -> None:
        self.index = int(props["index"])

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.01)
        if FAIL.is_set() and self.index == 1:
            raise RuntimeError("task 1 broke")
        return None

    def stop(self) -> None:
        pass


@pytest.fixture
def herder() -> Iterator[Herder]:
    FAIL.clear()
    registry = PluginRegistry.discover(entry_points=False)
    registry.add_class(IdleConnector)
    # Nothing listens on this port: the tasks never produce, so no broker is needed.
    worker = WorkerConfig.parse({"bootstrap.servers": f"127.0.0.1:{free_port()}", "key.converter": "StringConverter",
                                 "value.converter": "StringConverter", "offset.storage.file.filename": "unused",
                                 "listeners": "http://127.0.0.1:18083", "producer.log_level": "0"})
    herder = Herder(worker, registry, MemoryConfigStore(), MemoryOffsetStore(), MemoryStatusStore())
    yield herder
    herder.stop_all()


def _wait_states(herder: Herder, name: str, connector: str, tasks: list[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        status = herder.status(name)
        if status["connector"]["state"] == connector and [t["state"] for t in status["tasks"]] == tasks:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.02)


CONFIG = {"connector.class": "IdleConnector", "label": "x", "tasks.max": "2"}


def test_create_run_fail_restart(herder: Herder) -> None:
    assert herder.put_connector("c", CONFIG, allow_replace=False) is True
    status = _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    assert status["type"] == "source" and status["connector"]["worker_id"] == "127.0.0.1:18083"
    assert herder.info("c")["tasks"] == [{"connector": "c", "task": 0}, {"connector": "c", "task": 1}]
    FAIL.set()
    status = _wait_states(herder, "c", "RUNNING", ["RUNNING", "FAILED"])
    assert "RuntimeError: task 1 broke" in status["tasks"][1]["trace"]
    FAIL.clear()
    answer = herder.restart("c", include_tasks=True, only_failed=True)
    assert answer is not None and [t["state"] for t in answer["tasks"]] == ["RUNNING", "RESTARTING"]
    assert answer["connector"]["state"] == "RUNNING"
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    assert herder.restart("c", include_tasks=False, only_failed=False) is None


def test_pause_resume_stop_delete(herder: Herder) -> None:
    herder.put_connector("c", CONFIG, allow_replace=False)
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    herder.pause("c")
    _wait_states(herder, "c", "PAUSED", ["PAUSED", "PAUSED"])
    herder.resume("c")
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    herder.stop("c")
    _wait_states(herder, "c", "STOPPED", [])
    assert herder.info("c")["tasks"] == []
    herder.pause("c")  # a stopped connector stays stopped
    _wait_states(herder, "c", "STOPPED", [])
    herder.resume("c")
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    herder.delete("c")
    with pytest.raises(HerderError) as raised:
        herder.status("c")
    assert raised.value.status == 404 and herder.connectors() == []


def test_reconfigure_changes_tasks(herder: Herder) -> None:
    herder.put_connector("c", CONFIG, allow_replace=False)
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING"])
    assert herder.put_connector("c", {**CONFIG, "tasks.max": "3"}, allow_replace=True) is False
    _wait_states(herder, "c", "RUNNING", ["RUNNING", "RUNNING", "RUNNING"])
    assert [t["config"]["index"] for t in herder.task_configs("c")] == ["0", "1", "2"]


def test_errors(herder: Herder) -> None:
    herder.put_connector("c", CONFIG, allow_replace=False)
    with pytest.raises(HerderError) as raised:
        herder.put_connector("c", CONFIG, allow_replace=False)
    assert raised.value.status == 409
    with pytest.raises(HerderError) as raised:
        herder.put_connector("d", {"connector.class": "IdleConnector", "tasks.max": "0"}, allow_replace=False)
    assert raised.value.status == 400
    assert "label: Missing required configuration" in raised.value.message and "tasks.max:" in raised.value.message
    with pytest.raises(HerderError) as raised:
        herder.put_connector("d", {"connector.class": "IdleConnector", "label": "x",
                                   "transforms": "t"}, allow_replace=False)
    assert raised.value.status == 400 and "transforms.t.type" in raised.value.message
    with pytest.raises(HerderError) as raised:
        herder.restart_task("c", 5)
    assert raised.value.status == 404
    with pytest.raises(HerderError) as raised:
        herder.alter_offsets("c", [])
    assert raised.value.status == 400 and "STOPPED" in raised.value.message
    assert "d" not in herder.connectors()


def test_topic_tracking_settings_are_obeyed() -> None:
    """KIP-558's worker settings: with tracking off, tasks record nothing and the topics endpoints answer 400;
    with resets not allowed, only the reset does; an unknown connector is a 404 first."""
    registry = PluginRegistry.discover(entry_points=False)
    registry.add_class(IdleConnector)
    base = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "key.converter": "StringConverter",
            "value.converter": "StringConverter", "offset.storage.file.filename": "unused"}
    for overrides, topics_status, reset_status in (
            ({"topic.tracking.enable": "false"}, 400, 400),
            ({"topic.tracking.allow.reset": "false"}, None, 400)):
        statuses = MemoryStatusStore()
        herder = Herder(WorkerConfig.parse({**base, **overrides}), registry, MemoryConfigStore(),
                        MemoryOffsetStore(), statuses)
        try:
            herder.put_connector("c", CONFIG, allow_replace=False)
            herder._topic_tracker("c", 0)("used")
            if topics_status is None:
                assert herder.topics("c") == ["used"]
            else:
                with pytest.raises(HerderError) as raised:
                    herder.topics("c")
                assert raised.value.status == topics_status and "Topic tracking is disabled" in raised.value.message
                assert statuses.topics("c") == set()  # nothing recorded either
            with pytest.raises(HerderError) as raised:
                herder.reset_topics("c")
            assert raised.value.status == reset_status
            with pytest.raises(HerderError) as raised:
                herder.topics("nope")
            assert raised.value.status == 404
        finally:
            herder.stop_all()
    with pytest.raises(ConfigException, match=r"topic\.tracking\.enable"):
        WorkerConfig.parse({**base, "topic.tracking.enable": "sometimes"})
