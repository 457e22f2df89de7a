"""`connect.protocol=sessioned` (KIP-507) with real worker processes against a real broker: two workers run
connectors created through the follower (task configs reach the leader signed with the session key); raw
requests to the leader's internal task-config endpoint unsigned, with a wrong signature or an unknown algorithm
are refused with Kafka Connect's statuses and change nothing, while one signed with the key from the config topic
is accepted; and with a short `inter.worker.key.ttl.ms` the leader writes new `session-key` records while task
configs keep reaching it.

The two workers are one module-scoped cluster; the tests run in order."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import (
    WorkerProcess,
    group_leader,
    read_lines,
    read_topic,
    until_settled,
    wait_for,
)

KEY_TTL_MS = 4000
WAIT_S = 60.0


@dataclass
class Cluster:
    bootstrap: str
    config_topic: str
    workers: list[WorkerProcess]
    directory: Path

    @property
    def leader(self) -> WorkerProcess:
        return group_leader(self.workers)

    @property
    def follower(self) -> WorkerProcess:
        leader = self.leader
        return next(w for w in self.workers if w is not leader)

    def session_keys(self) -> list[dict[str, Any]]:
        return [json.loads(value) for key, value in read_topic(self.bootstrap, self.config_topic)
                if key == b"session-key" and value is not None]


@pytest.fixture(scope="module")
def cluster(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run = uuid.uuid4().hex[:8]
    settings = {"group.id": f"sessioned-{run}", "config.storage.topic": f"sessioned-configs-{run}",
                "offset.storage.topic": f"sessioned-offsets-{run}", "status.storage.topic": f"sessioned-status-{run}",
                "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
                "status.storage.replication.factor": "1", "offset.storage.partitions": "1",
                "status.storage.partitions": "1", "heartbeat.interval.ms": "1000",
                "scheduled.rebalance.max.delay.ms": "3000", "inter.worker.key.ttl.ms": str(KEY_TTL_MS)}
    directory = tmp_path_factory.mktemp("connect-sessioned")
    # connect.protocol is left at its default, sessioned.
    workers = [WorkerProcess(directory / f"worker-{i}", shared_broker.bootstrap, settings, mode="distributed")
               for i in range(2)]
    try:
        for worker in workers:
            worker.start(timeout_s=60)
        yield Cluster(shared_broker.bootstrap, settings["config.storage.topic"], workers, directory)
        for worker in workers:
            assert worker.stop() == 0, worker.log_tail()
    finally:
        for worker in workers:
            worker.cleanup()


def _create(cluster: Cluster, name: str, config: dict[str, str]) -> None:
    status, body = until_settled(cluster.follower, "POST", "/connectors", {"name": name, "config": config})
    assert status == 201, body


def _running(worker: WorkerProcess, names: list[str]) -> bool:
    status, body = worker.request("GET", "/connectors?expand=status")
    return status == 200 and all(
        name in body and body[name]["status"]["connector"]["state"] == "RUNNING" and body[name]["status"]["tasks"]
        and all(t["state"] == "RUNNING" for t in body[name]["status"]["tasks"]) for name in names)


def test_connectors_created_through_the_follower_run_their_tasks(cluster: Cluster) -> None:
    source, sink = cluster.directory / "in.txt", cluster.directory / "out.txt"
    source.write_text("")
    for name, config in [("signed-source", {"connector.class": "FileStreamSource", "file": str(source),
                                            "topic": "sessioned-lines"}),
                         ("signed-sink", {"connector.class": "FileStreamSink", "file": str(sink),
                                          "topics": "sessioned-lines"})]:
        _create(cluster, name, config)
    wait_for(lambda: _running(cluster.workers[0], ["signed-source", "signed-sink"]), WAIT_S, "both running")
    # The two connectors run on different workers, so one of them sent its task configs from the follower.
    _, statuses = cluster.workers[0].request("GET", "/connectors?expand=status")
    owners = {statuses[n]["status"]["connector"]["worker_id"] for n in ("signed-source", "signed-sink")}
    assert owners == {f"127.0.0.1:{w.port}" for w in cluster.workers}
    source.write_text("signed\nrequests\n")
    wait_for(lambda: read_lines(sink) == ["signed", "requests"], WAIT_S, "the lines in the sink file")
    assert cluster.session_keys(), "no session-key record in the config topic"


def _post_tasks(worker: WorkerProcess, name: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    request = urllib.request.Request(f"{worker.url}/connectors/{name}/tasks?forward=false", data=body,
                                     method="POST", headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _signature(key: bytes, body: bytes) -> str:
    return base64.b64encode(hmac.new(key, body, hashlib.sha256).digest()).decode()


def test_the_leader_refuses_unsigned_and_badly_signed_task_configs(cluster: Cluster) -> None:
    leader = cluster.leader
    _, before = leader.request("GET", "/connectors/signed-source/tasks")
    forged = json.dumps([{**before[0]["config"], "file": "/etc/passwd"}]).encode()
    status, body = _post_tasks(leader, "signed-source", forged, {})
    assert (status, body["message"]) == (400, "Internal request missing required signature")
    wrong = {"X-Connect-Authorization": _signature(b"not the session key", forged),
             "X-Connect-Request-Signature-Algorithm": "HmacSHA256"}
    status, body = _post_tasks(leader, "signed-source", forged, wrong)
    assert (status, body["message"]) == (403, "Internal request contained invalid signature.")
    status, body = _post_tasks(leader, "signed-source", forged, {**wrong,
                                                                  "X-Connect-Request-Signature-Algorithm": "HmacMD5"})
    assert (status, body["message"]) == (400, "Algorithm HmacMD5 not available")
    for worker in cluster.workers:
        assert worker.request("GET", "/connectors/signed-source/tasks")[1] == before
    assert not any(b"/etc/passwd" in (value or b"") for _, value in read_topic(cluster.bootstrap,
                                                                                cluster.config_topic))
    # Signed with the latest session key (read from the config topic, as workers do), the same endpoint accepts
    # task configs; these are the current ones, so nothing is written.
    current = json.dumps([task["config"] for task in before]).encode()

    def accepted() -> bool:
        key = base64.b64decode(cluster.session_keys()[-1]["key"])
        headers = {"X-Connect-Authorization": _signature(key, current),
                   "X-Connect-Request-Signature-Algorithm": "HmacSHA256"}
        return _post_tasks(leader, "signed-source", current, headers)[0] == 204
    wait_for(accepted, WAIT_S, "a request signed with the session key accepted")


def _tasks_use(worker: WorkerProcess, name: str, file: Path) -> bool:
    status, tasks = worker.request("GET", f"/connectors/{name}/tasks")
    return status == 200 and bool(tasks) and all(t["config"].get("file") == str(file) for t in tasks)


def test_keys_rotate_and_task_configs_still_reach_the_leader(cluster: Cluster) -> None:
    first = cluster.session_keys()
    wait_for(lambda: len(cluster.session_keys()) >= len(first) + 2, WAIT_S, "two more session keys")
    keys = cluster.session_keys()
    assert len({k["key"] for k in keys}) == len(keys)  # every rotation writes a new key
    created = [k["creation-timestamp"] for k in keys]
    assert created == sorted(created) and all(k["algorithm"] == "HmacSHA256" for k in keys)
    assert all(len(base64.b64decode(k["key"])) == 32 for k in keys)
    # New task configs for both connectors (one runs on the follower) after the key changed.
    moved = cluster.directory / "moved.txt"
    moved.write_text("")
    follower = cluster.follower
    _, source_config = follower.request("GET", "/connectors/signed-source/config")
    status, _ = until_settled(follower, "PUT", "/connectors/signed-source/config", {**source_config,
                                                                                     "file": str(moved)})
    assert status == 200
    _, sink_config = follower.request("GET", "/connectors/signed-sink/config")
    rotated_sink = cluster.directory / "rotated-out.txt"
    status, _ = until_settled(follower, "PUT", "/connectors/signed-sink/config", {**sink_config,
                                                                                   "file": str(rotated_sink)})
    assert status == 200
    for name, file in (("signed-source", moved), ("signed-sink", rotated_sink)):
        wait_for(partial(_tasks_use, cluster.workers[0], name, file), WAIT_S, f"{name}'s new task config")
    # The sink task of the new config has opened its file: the previous one has stopped (the statuses still say
    # RUNNING in between, from before the restart), so what is written now reaches the new file.
    wait_for(rotated_sink.exists, WAIT_S, "the new sink task")
    wait_for(lambda: _running(cluster.workers[0], ["signed-source", "signed-sink"]), WAIT_S, "both running")
    moved.write_text("after\nrotation\n")
    wait_for(lambda: read_lines(rotated_sink)[-2:] == ["after", "rotation"], WAIT_S, "the lines after rotation")
