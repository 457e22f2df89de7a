"""`moldau connect distributed`: three real worker processes in one group against a real broker. Connectors
created through any worker (followers forward to the leader) spread over the workers; a worker killed with
SIGKILL under load has its tasks restarted elsewhere from the committed offsets, with no line lost (the
duplicates of at-least-once delivery are counted and reported); a joining worker takes tasks without the others'
tasks being restarted; config changes and deletes go through the config topic, in Kafka Connect's record
formats, and every worker sees them; a worker of a SASL-secured broker joins its group with the worker's SASL
settings.

The three workers are one module-scoped cluster; the tests run in order and build on each other's connectors.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, read_lines, read_topic, wait_for
from tests.support.sasl_broker import password, start_sasl_broker

SOURCES = 4
REBALANCE_S = 60.0


@dataclass
class Cluster:
    bootstrap: str
    directory: Path
    settings: dict[str, str]
    workers: list[WorkerProcess] = field(default_factory=list)
    sources: dict[str, Path] = field(default_factory=dict)  # connector -> its input file
    topic: str = ""
    sink: str = ""
    sink_file: Path = Path()
    written: int = 0

    def add_worker(self) -> WorkerProcess:
        worker = WorkerProcess(self.directory / f"worker-{len(self.workers)}", self.bootstrap, self.settings,
                               mode="distributed")
        worker.start(timeout_s=60)
        self.workers.append(worker)
        return worker

    def live(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.proc is not None]


@pytest.fixture(scope="module")
def cluster(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run = uuid.uuid4().hex[:8]
    settings = {
        "group.id": f"connect-cluster-{run}",
        "config.storage.topic": f"connect-configs-{run}",
        "offset.storage.topic": f"connect-offsets-{run}",
        "status.storage.topic": f"connect-status-{run}",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "5",
        "status.storage.partitions": "3",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "scheduled.rebalance.max.delay.ms": "3000",
        "offset.flush.interval.ms": "500",
        "consumer.session.timeout.ms": "6000",
    }
    directory = tmp_path_factory.mktemp("connect-distributed")
    cluster = Cluster(shared_broker.bootstrap, directory, settings)
    try:
        for _ in range(3):
            cluster.add_worker()
        yield cluster
        for worker in cluster.live():
            assert worker.stop() == 0, worker.log_tail()
    finally:
        for worker in cluster.workers:
            worker.cleanup()


def _accepted(worker: WorkerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The answer once the group has a leader (before that, Kafka's 409 'rebalance' answer)."""
    answer: tuple[int, Any] = (0, None)

    def done() -> bool:
        nonlocal answer
        answer = worker.request(method, path, body)
        return answer[0] != 409 or "rebalance" not in str(answer[1])
    wait_for(done, REBALANCE_S, f"{method} {path} outside a rebalance")
    return answer


def _statuses(worker: WorkerProcess) -> dict[str, Any]:
    status, body = worker.request("GET", "/connectors?expand=status")
    assert status == 200
    return {name: entry["status"] for name, entry in body.items()}


def _all_running(worker: WorkerProcess, names: list[str]) -> dict[str, Any] | None:
    statuses = _statuses(worker)
    for name in names:
        status = statuses.get(name)
        if status is None or status["connector"]["state"] != "RUNNING" or not status["tasks"] or \
                any(t["state"] != "RUNNING" for t in status["tasks"]):
            return None
    return statuses


def _task_owners(statuses: dict[str, Any]) -> dict[tuple[str, int], str]:
    return {(name, t["id"]): t["worker_id"] for name, s in statuses.items() for t in s["tasks"]}


def _worker_id(worker: WorkerProcess) -> str:
    return f"127.0.0.1:{worker.port}"


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as file:
        file.write("".join(line + "\n" for line in lines))


def _start_counts(cluster: Cluster) -> Counter[str]:
    """How often each source file's task has been started, from every worker's log."""
    counts: Counter[str] = Counter()
    for worker in cluster.workers:
        text = worker.log_path.read_text(errors="replace") if worker.log_path.exists() else ""
        counts.update(re.findall(r"FileStreamSource: reading (\S+) from position", text))
    return counts


def test_connectors_created_through_any_worker_spread_over_the_group(cluster: Cluster) -> None:
    cluster.topic = f"dist-lines-{uuid.uuid4().hex[:8]}"
    for i in range(SOURCES):
        name, path = f"source-{i}", cluster.directory / f"in-{i}.txt"
        path.write_text("")
        worker = cluster.workers[i % 3]  # at least two of the three are followers, which forward to the leader
        status, body = _accepted(worker, "POST", "/connectors", {"name": name, "config": {
            "connector.class": "FileStreamSource", "file": str(path), "topic": cluster.topic}})
        assert status == 201, body
        assert body["name"] == name
        cluster.sources[name] = path
    cluster.sink, cluster.sink_file = "sink", cluster.directory / "out.txt"
    status, body = _accepted(cluster.workers[2], "POST", "/connectors", {"name": cluster.sink, "config": {
        "connector.class": "FileStreamSink", "file": str(cluster.sink_file), "topics": cluster.topic}})
    assert status == 201, body
    names = [*cluster.sources, cluster.sink]
    statuses = wait_for(lambda: _all_running(cluster.workers[0], names), REBALANCE_S, "every connector running")
    # Every worker answers from the same topics.
    for worker in cluster.workers[1:]:
        assert wait_for(partial(_all_running, worker, names), REBALANCE_S, "the same statuses") is not None
    per_worker = Counter(_task_owners(statuses).values())
    assert set(per_worker) == {_worker_id(w) for w in cluster.workers}, per_worker
    assert max(per_worker.values()) - min(per_worker.values()) <= 1, per_worker
    # A duplicate name is refused by the leader, also when forwarded.
    status, body = _accepted(cluster.workers[1], "POST", "/connectors", {"name": "source-0", "config": {
        "connector.class": "FileStreamSource", "file": "x", "topic": "y"}})
    assert status == 409 and body["message"] == "Connector source-0 already exists"


def test_a_killed_worker_s_tasks_move_and_no_line_is_lost(cluster: Cluster) -> None:
    stop_writing = threading.Event()

    def write() -> None:
        while not stop_writing.is_set():
            batch = [f"line {cluster.written + j}" for j in range(20)]
            for i, path in enumerate(cluster.sources.values()):
                _append(path, [f"{line} of {i}" for line in batch])
            cluster.written += len(batch)
            time.sleep(0.02)
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        wait_for(lambda: len(read_lines(cluster.sink_file)) > 2000, REBALANCE_S, "lines flowing")
        owners = _task_owners(_statuses(cluster.workers[0]))
        sources_of = Counter(w for (name, _), w in owners.items() if name.startswith("source-"))
        victim = next(w for w in cluster.live() if sources_of[_worker_id(w)] > 0)
        moved = {task for task, owner in owners.items() if owner == _worker_id(victim)}
        victim.kill()
        time.sleep(2)  # the others keep writing while the victim is gone
    finally:
        stop_writing.set()
        writer.join()
    survivor = cluster.live()[0]

    def moved_and_running() -> bool:
        statuses = _all_running(survivor, list(owners_names(owners)))
        if statuses is None:
            return False
        now = _task_owners(statuses)
        return all(now[task] != _worker_id(victim) for task in moved)
    wait_for(moved_and_running, REBALANCE_S, "the killed worker's tasks running elsewhere")
    expected = {f"line {n} of {i}" for n in range(cluster.written) for i in range(SOURCES)}

    def topic_lines() -> Counter[str] | None:
        counts = Counter(value.decode() for _, value in read_topic(cluster.bootstrap, cluster.topic) if value)
        return counts if set(counts) >= expected else None
    counts = wait_for(topic_lines, REBALANCE_S, "every written line in the topic")
    assert set(counts) == expected  # nothing lost, nothing invented
    duplicates = sum(counts.values()) - len(expected)
    print(f"\nfailover: {len(expected)} lines written, {duplicates} duplicates in the topic (at-least-once), "
          f"tasks moved: {sorted(moved)}")
    # The sink, wherever it runs now, wrote every line too.
    wait_for(lambda: set(read_lines(cluster.sink_file)) >= expected, REBALANCE_S, "every line in the sink file")


def owners_names(owners: dict[tuple[str, int], str]) -> set[str]:
    return {name for name, _ in owners}


def test_a_joining_worker_takes_tasks_without_restarting_the_others(cluster: Cluster) -> None:
    names = [*cluster.sources, cluster.sink]
    before = _task_owners(wait_for(lambda: _all_running(cluster.live()[0], names), REBALANCE_S, "running"))
    starts_before = _start_counts(cluster)
    newcomer = cluster.add_worker()

    def newcomer_runs_tasks() -> dict[tuple[str, int], str] | None:
        statuses = _all_running(newcomer, names)
        owners = _task_owners(statuses) if statuses else {}
        return owners if _worker_id(newcomer) in owners.values() else None
    after = wait_for(newcomer_runs_tasks, REBALANCE_S, "the new worker running tasks")
    per_worker = Counter(after.values())
    assert len(per_worker) == len(cluster.live()) and max(per_worker.values()) - min(per_worker.values()) <= 1
    starts_after = _start_counts(cluster)
    paths = {f"source-{i}": str(path) for i, path in enumerate(cluster.sources.values())}
    for task, owner in after.items():
        if task[0] in paths and owner == before[task]:
            # A task that stayed where it was kept running: it was not started again.
            assert starts_after[paths[task[0]]] == starts_before[paths[task[0]]], task


def test_a_config_change_goes_through_the_config_topic_to_every_worker(cluster: Cluster) -> None:
    new_file = cluster.directory / "out-changed.txt"
    config = {"connector.class": "FileStreamSink", "file": str(new_file), "topics": cluster.topic}
    status, body = _accepted(cluster.live()[-1], "PUT", f"/connectors/{cluster.sink}/config", config)
    assert status == 200, body

    def everywhere() -> bool:
        for worker in cluster.live():
            _, tasks = worker.request("GET", f"/connectors/{cluster.sink}/tasks")
            if not tasks or tasks[0]["config"].get("file") != str(new_file):
                return False
        return True
    wait_for(everywhere, REBALANCE_S, "the new task config on every worker")
    # The task with the new config creates its file when it starts; the old one was stopped before that (a
    # line appended earlier could still reach the old file: it is delivered once, by the old task).
    wait_for(new_file.exists, REBALANCE_S, "the sink task started with the new config")
    wait_for(lambda: _all_running(cluster.live()[0], [cluster.sink]), REBALANCE_S, "the sink running again")
    first = next(iter(cluster.sources.values()))
    _append(first, ["after the change"])
    wait_for(lambda: "after the change" in read_lines(new_file), REBALANCE_S, "the line in the new file")
    records = {key.decode(): json.loads(value) for key, value in
               read_topic(cluster.bootstrap, cluster.settings["config.storage.topic"]) if key and value}
    assert records[f"connector-{cluster.sink}"] == {"properties": {**config, "name": cluster.sink}}
    assert records[f"commit-{cluster.sink}"] == {"tasks": 1}
    assert records[f"task-{cluster.sink}-0"]["properties"]["file"] == str(new_file)


def test_pause_and_resume_from_any_worker(cluster: Cluster) -> None:
    name = "source-1"
    status, _ = cluster.live()[1].request("PUT", f"/connectors/{name}/pause")
    assert status == 202

    def paused(worker: WorkerProcess) -> bool:
        status = _statuses(worker).get(name)
        return bool(status and status["connector"]["state"] == "PAUSED" and
                    all(t["state"] == "PAUSED" for t in status["tasks"]))
    for worker in cluster.live():
        wait_for(partial(paused, worker), REBALANCE_S, "PAUSED on every worker")
    status, _ = cluster.live()[0].request("PUT", f"/connectors/{name}/resume")
    assert status == 202
    statuses = wait_for(lambda: _all_running(cluster.live()[-1], [name]), REBALANCE_S, "RUNNING again")
    # A task restart sent to a worker that does not run the task is forwarded to the one that does.
    owner = statuses[name]["tasks"][0]["worker_id"]
    elsewhere = next(w for w in cluster.live() if _worker_id(w) != owner)
    starts = _start_counts(cluster)[str(cluster.sources[name])]
    status, _ = elsewhere.request("POST", f"/connectors/{name}/tasks/0/restart")
    assert status == 204
    wait_for(lambda: _start_counts(cluster)[str(cluster.sources[name])] == starts + 1, REBALANCE_S, "a restart")
    assert _statuses(cluster.live()[0])[name]["tasks"][0]["worker_id"] == owner


def test_offsets_and_statuses_are_in_kafka_s_record_formats(cluster: Cluster) -> None:
    offsets = read_topic(cluster.bootstrap, cluster.settings["offset.storage.topic"], 5)
    keys = {json.dumps(json.loads(key)) for key, value in offsets if key and value}
    for name, path in cluster.sources.items():
        assert json.dumps([name, {"filename": str(path)}]) in keys
    assert all("position" in json.loads(value) for _, value in offsets if value)
    statuses = {key.decode(): json.loads(value) for key, value in
                read_topic(cluster.bootstrap, cluster.settings["status.storage.topic"], 3) if key and value}
    entry = statuses["status-task-source-0-0"]
    assert set(entry) == {"state", "trace", "worker_id", "generation"} and entry["generation"] >= 1
    # The topics connectors use (KIP-558), Kafka's records too, so every worker answers for every connector.
    used = statuses[f"topic-{cluster.topic}-connector-source-0"]["topic"]
    assert (used["name"], used["connector"], used["task"]) == (cluster.topic, "source-0", 0)
    for worker in cluster.live():
        assert worker.request("GET", f"/connectors/{cluster.sink}/topics") == (
            200, {cluster.sink: {"topics": [cluster.topic]}})
    assert cluster.live()[1].request("PUT", "/connectors/source-1/topics/reset")[0] == 202

    def reset_seen(worker: WorkerProcess) -> bool:
        return bool(worker.request("GET", "/connectors/source-1/topics")[1] == {"source-1": {"topics": []}})

    for worker in cluster.live():
        wait_for(partial(reset_seen, worker), 30, "the reset seen by every worker")


def test_delete_writes_tombstones_and_every_worker_forgets_the_connector(cluster: Cluster) -> None:
    name = "source-3"
    # Through `moldau connect`, against every worker: list, then delete through a follower (forwarded).
    for worker in cluster.live():
        listed = subprocess.run([sys.executable, "-m", "moldau", "connect", "list", "--url", worker.url],
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0 and name in listed.stdout, listed.stderr
    deleted = wait_for(lambda: _cli_delete(cluster.live()[1], name), REBALANCE_S, "the delete accepted")
    assert deleted.returncode == 0, deleted.stderr

    def gone(worker: WorkerProcess) -> bool:
        return worker.request("GET", f"/connectors/{name}")[0] == 404

    for worker in cluster.live():
        wait_for(partial(gone, worker), REBALANCE_S, "404 everywhere")
    last: dict[str, bytes | None] = {}
    for key, value in read_topic(cluster.bootstrap, cluster.settings["config.storage.topic"]):
        if key:
            last[key.decode()] = value
    assert last[f"connector-{name}"] is None and last[f"target-state-{name}"] is None
    # Its task stops wherever it ran: no new line of its file reaches the topic.
    status, _ = cluster.live()[0].request("GET", f"/connectors/{name}/status")
    assert status == 404


def _cli_delete(worker: WorkerProcess, name: str) -> subprocess.CompletedProcess[str] | None:
    done = subprocess.run([sys.executable, "-m", "moldau", "connect", "delete", name, "--url", worker.url],
                          capture_output=True, text=True, timeout=60)
    return None if "rebalance" in done.stderr else done


def test_eager_workers_share_connectors_too(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """`connect.protocol=eager`: every rebalance stops everything and the leader hands it all out again."""
    run = uuid.uuid4().hex[:8]
    settings = {"group.id": f"eager-{run}", "config.storage.topic": f"eager-configs-{run}",
                "offset.storage.topic": f"eager-offsets-{run}", "status.storage.topic": f"eager-status-{run}",
                "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
                "status.storage.replication.factor": "1", "offset.storage.partitions": "1",
                "status.storage.partitions": "1", "connect.protocol": "eager", "heartbeat.interval.ms": "1000"}
    workers = [WorkerProcess(tmp_path / f"w{i}", shared_broker.bootstrap, settings, mode="distributed")
               for i in range(2)]
    try:
        for worker in workers:
            worker.start(timeout_s=60)
        source_file, sink_file, topic = tmp_path / "in.txt", tmp_path / "out.txt", f"eager-{run}"
        source_file.write_text("")
        for index, (name, config) in enumerate([
                ("eager-source", {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}),
                ("eager-sink", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic})]):
            status, body = _accepted(workers[index], "POST", "/connectors", {"name": name, "config": config})
            assert status == 201, body
        statuses = wait_for(lambda: _all_running(workers[1], ["eager-source", "eager-sink"]), REBALANCE_S,
                            "both running")
        assert set(_task_owners(statuses).values()) == {_worker_id(w) for w in workers}
        _append(source_file, ["one", "two"])
        wait_for(lambda: read_lines(sink_file) == ["one", "two"], REBALANCE_S, "the lines in the sink file")
        for worker in workers:
            assert worker.stop() == 0, worker.log_tail()
    finally:
        for worker in workers:
            worker.cleanup()


def test_a_worker_joins_its_group_and_runs_connectors_over_sasl(tmp_path: Path) -> None:
    """A broker whose only client listener with the worker's user is SASL_PLAINTEXT (an authorizer, PLAIN users):
    the worker's group membership (Moldau's own client) authenticates with the worker's `sasl.*` settings, as its
    producer, consumer and admin clients do."""
    (tmp_path / "broker").mkdir()
    broker = start_sasl_broker(tmp_path / "broker")
    run = uuid.uuid4().hex[:8]
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="{password("admin")}";')
    settings = {"group.id": f"sasl-{run}", "config.storage.topic": f"sasl-configs-{run}",
                "offset.storage.topic": f"sasl-offsets-{run}", "status.storage.topic": f"sasl-status-{run}",
                "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
                "status.storage.replication.factor": "1", "offset.storage.partitions": "1",
                "status.storage.partitions": "1", "heartbeat.interval.ms": "1000",
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}
    worker = WorkerProcess(tmp_path / "worker", broker.bootstrap, settings, mode="distributed")
    try:
        worker.start(timeout_s=60)
        source_file, sink_file, topic = tmp_path / "in.txt", tmp_path / "out.txt", f"sasl-{run}"
        source_file.write_text("")
        for name, config in [
                ("sasl-source", {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}),
                ("sasl-sink", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic})]:
            status, body = _accepted(worker, "POST", "/connectors", {"name": name, "config": config})
            assert status == 201, body
        wait_for(lambda: _all_running(worker, ["sasl-source", "sasl-sink"]), REBALANCE_S, "both running")
        _append(source_file, ["secured", "lines"])
        wait_for(lambda: read_lines(sink_file) == ["secured", "lines"], REBALANCE_S, "the lines in the sink file")
        assert worker.stop() == 0, worker.log_tail()
    finally:
        worker.cleanup()
        broker.stop()
