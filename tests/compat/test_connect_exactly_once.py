"""Exactly-once source delivery (KIP-618) on a real distributed worker process: two file source connectors
(transaction.boundary poll and interval) copy files that keep growing; the worker is killed with SIGKILL
mid-stream and started again, and a read_committed consumer then reads every line exactly once, in order. The
worker's offsets topic holds the connectors' offsets in Kafka Connect's format, written transactionally. New task
configs make the leader fence the running task (its producers' transactional id) before the new one starts. A
transaction another writer left open on the offsets topic does not make a restarted task resume from older
offsets. The
configs KIP-618 adds are validated: `exactly.once.support=required` is refused for a connector that cannot
give exactly-once delivery, and connector-defined transaction boundaries for a connector that cannot define them;
a plugin connector that defines them commits and aborts its transactions where its task asks."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, wait_for
from tests.support.transactions import READ_COMMITTED, committed_records, read_to_end, txn_producer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

FILE_SOURCE = "FileStreamSource"

BOUNDING_PLUGIN = '''
"""A test plugin: a source of the numbers 0 to 9, one per poll, whose task defines its transactions: commit
after 2, abort the batch of 5 (and with it 3 and 4), commit after the batch of 7."""
import time

from moldau.connect.api import (ConnectorTransactionBoundaries, ExactlyOnceSupport, SourceConnector, SourceRecord,
                                SourceTask)
from moldau.connect.config import ConfigDef

PARTITION = {"source": "numbers"}


class BoundingSourceConnector(SourceConnector):
    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return BoundingSourceTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass

    def exactly_once_support(self, props):
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props):
        return ConnectorTransactionBoundaries.SUPPORTED


class BoundingSourceTask(SourceTask):
    def start(self, props):
        self.topic = props["topic"]
        committed = self.context.offset_storage_reader.offset(PARTITION)
        self.next = 0 if committed is None else committed["n"] + 1

    def poll(self):
        if self.next > 9:
            time.sleep(0.1)
            return None
        n, self.next = self.next, self.next + 1
        record = SourceRecord(topic=self.topic, value=str(n), source_partition=PARTITION, source_offset={"n": n})
        transactions = self.context.transaction_context()
        if n == 2:
            transactions.commit_transaction(record)
        elif n == 5:
            transactions.abort_transaction()
        elif n == 7:
            transactions.commit_transaction()
        return [record]

    def stop(self):
        pass
'''


@pytest.fixture(scope="module")
def worker(shared_broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    run = uuid.uuid4().hex[:8]
    settings = {
        "group.id": f"connect-eos-{run}", "config.storage.topic": f"connect-eos-configs-{run}",
        "offset.storage.topic": f"connect-eos-offsets-{run}", "status.storage.topic": f"connect-eos-status-{run}",
        "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1", "offset.storage.partitions": "3", "status.storage.partitions": "1",
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1000", "scheduled.rebalance.max.delay.ms": "0",
        "exactly.once.source.support": "enabled",
    }
    directory = tmp_path_factory.mktemp("connect-eos")
    plugins = directory / "plugins"
    plugins.mkdir()
    (plugins / "bounding_plugin.py").write_text(BOUNDING_PLUGIN)
    proc = WorkerProcess(directory, shared_broker.bootstrap, {**settings, "plugin.path": str(plugins)},
                         mode="distributed")
    proc.start(timeout_s=60)
    try:
        yield proc
        assert proc.stop() == 0, proc.log_tail()
    finally:
        proc.cleanup()


class Writer:
    """Appends numbered lines to a file until stopped, a few at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stopping.wait(0.005):
            with open(self.path, "a") as file:
                file.write("".join(f"line-{self.written + i}\n" for i in range(5)))
            self.written += 5

    def __enter__(self) -> Writer:
        self.path.touch()
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join()

    def lines(self) -> list[str]:
        return [f"line-{i}" for i in range(self.written)]


def _create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    def created() -> bool:
        status, body = worker.request("PUT", f"/connectors/{name}/config", config)
        assert status in (200, 201, 409), body
        return status != 409  # the group is still rebalancing
    wait_for(created, 60, f"connector {name} created")


def _committed_values(bootstrap: str, topic: str) -> list[str]:
    return [(r.value or b"").decode() for r in committed_records(bootstrap, topic, 1)]


def _wait_copied(bootstrap: str, topic: str, count: int) -> None:
    wait_for(lambda: len(_committed_values(bootstrap, topic)) >= count, 90, f"{count} records in {topic}")


def _fenced(worker: WorkerProcess, name: str) -> bool:
    return f"fenced the producers of transactional id {worker.properties['group.id']}-{name}-0" in \
        worker.log_path.read_text(errors="replace")


def _running(worker: WorkerProcess, name: str) -> bool:
    try:
        status, body = worker.request("GET", f"/connectors/{name}/status")
    except OSError:
        return False
    return status == 200 and bool(body["tasks"]) and all(t["state"] == "RUNNING" for t in body["tasks"])


def test_a_worker_killed_mid_stream_copies_every_line_exactly_once(worker: WorkerProcess,
                                                                   shared_broker: BrokerProcess) -> None:
    run = uuid.uuid4().hex[:6]
    boundaries = {"poll": {}, "interval": {"transaction.boundary.interval.ms": "200"}}
    files = {b: worker.directory / f"input-{b}-{run}.txt" for b in boundaries}
    topics = {b: f"eos-{b}-{run}" for b in boundaries}
    configs = {boundary: {
        "connector.class": FILE_SOURCE, "file": str(files[boundary]), "topic": topics[boundary], "batch.size": "50",
        "transaction.boundary": boundary, "exactly.once.support": "required", **extra}
        for boundary, extra in boundaries.items()}
    with Writer(files["poll"]) as poll_writer, Writer(files["interval"]) as interval_writer:
        for boundary, config in configs.items():
            _create(worker, f"eos-{boundary}-{run}", config)
        for boundary in boundaries:
            _wait_copied(shared_broker.bootstrap, topics[boundary], 500)
        worker.kill()
        worker.start(timeout_s=60)
        for boundary in boundaries:
            wait_for(partial(_running, worker, f"eos-{boundary}-{run}"), 90, "the tasks to run again")
        # New task configs: the leader fences the running task's transactional id before storing them.
        _create(worker, f"eos-poll-{run}", {**configs["poll"], "batch.size": "40"})
        wait_for(partial(_fenced, worker, f"eos-poll-{run}"), 60, "the old task fenced")
        wait_for(partial(_running, worker, f"eos-poll-{run}"), 90, "the reconfigured task to run")
    for boundary, writer in (("poll", poll_writer), ("interval", interval_writer)):
        expected = writer.lines()
        _wait_copied(shared_broker.bootstrap, topics[boundary], len(expected))
        # Nothing lost, nothing twice, in the file's order.
        assert _committed_values(shared_broker.bootstrap, topics[boundary]) == expected, boundary
    offsets = read_to_end(shared_broker.bootstrap, worker.properties["offset.storage.topic"], READ_COMMITTED)
    keys = {json.loads(r.key or b"null")[0] for r in offsets}
    assert keys >= {f"eos-poll-{run}", f"eos-interval-{run}"}


def test_a_transaction_left_open_on_the_offsets_topic_does_not_hide_newer_offsets(
        worker: WorkerProcess, shared_broker: BrokerProcess) -> None:
    """Another writer's transaction (a sibling task's, after a crash) begins on the offsets topic before the
    task's last commit and stays open while the task starts again: the task waits for it to end instead of
    resuming from the offsets it could read below it (which would copy the lines after them twice)."""
    run = uuid.uuid4().hex[:6]
    path, topic, name = worker.directory / f"input-open-{run}.txt", f"eos-open-{run}", f"eos-open-{run}"
    path.write_text("".join(f"line-{i}\n" for i in range(200)))
    _create(worker, name, {"connector.class": FILE_SOURCE, "file": str(path), "topic": topic, "batch.size": "50"})
    _wait_copied(shared_broker.bootstrap, topic, 200)
    offsets_topic = worker.properties["offset.storage.topic"]
    stranger = txn_producer(shared_broker.bootstrap, f"stranger-{run}")
    stranger.begin_transaction()
    for partition in range(3):  # whichever partition the connector's offsets go to
        stranger.produce(offsets_topic, key=b'["stranger",{"p":0}]', value=b'{"o":0}', partition=partition)
    assert stranger.flush(30) == 0
    with open(path, "a") as file:
        file.write("".join(f"line-{i}\n" for i in range(200, 400)))
    _wait_copied(shared_broker.bootstrap, topic, 400)
    worker.kill()
    worker.start(timeout_s=60)
    wait_for(partial(_log_has, worker, f"starting task {name}-0"), 60, "the task to start again")
    time.sleep(2)  # the task waits for the open transaction meanwhile
    stranger.abort_transaction(30)
    wait_for(partial(_running, worker, name), 90, "the task to run again")
    with open(path, "a") as file:
        file.write("line-400\n")
    _wait_copied(shared_broker.bootstrap, topic, 401)
    assert _committed_values(shared_broker.bootstrap, topic) == [f"line-{i}" for i in range(401)]


def _log_has(worker: WorkerProcess, text: str) -> bool:
    return worker.log_path.read_text(errors="replace").count(text) >= 2  # once before the kill, once after


def _validate(worker: WorkerProcess, config: dict[str, str]) -> dict[str, list[str]]:
    status, body = worker.request("PUT", f"/connector-plugins/{FILE_SOURCE}/config/validate",
                                  {"connector.class": FILE_SOURCE, "topic": "t", **config})
    assert status == 200, body
    return {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}


def test_exactly_once_configs_are_validated(worker: WorkerProcess) -> None:
    assert _validate(worker, {"name": "ok", "file": "/dev/null", "exactly.once.support": "required"}) == {}
    stdin: dict[str, Any] = _validate(worker, {"name": "stdin", "exactly.once.support": "required"})
    assert "does not support exactly-once" in stdin["exactly.once.support"][0]
    boundary = _validate(worker, {"name": "c", "file": "/dev/null", "transaction.boundary": "connector"})
    assert "does not support connector-defined transaction boundaries" in boundary["transaction.boundary"][0]
    assert "transaction.boundary" in _validate(worker, {"name": "x", "transaction.boundary": "sometimes"})
    answer: list[Any] = []

    def refused() -> bool:
        answer[:] = worker.request("POST", "/connectors", {"name": "refused", "config": {
            "connector.class": FILE_SOURCE, "topic": "t", "exactly.once.support": "required"}})
        status: int = answer[0]
        return status != 409  # the group is still rebalancing
    wait_for(refused, 60, "an answer outside a rebalance")
    assert answer[0] == 400 and "exactly.once.support" in answer[1]["message"], answer


def test_a_connector_defines_its_transactions(worker: WorkerProcess, shared_broker: BrokerProcess) -> None:
    """`transaction.boundary=connector`: the plugin's task commits after record 2, aborts the batch of record 5
    (3, 4 and 5 with it) and commits after the batch of 7; 8 and 9 wait in an open transaction, which the task's
    stop in good order commits. Committed offsets follow the committed records only."""
    name, topic = f"bounding-{uuid.uuid4().hex[:6]}", f"bounding-{uuid.uuid4().hex[:6]}"
    _create(worker, name, {"connector.class": "BoundingSourceConnector", "topic": topic,
                           "transaction.boundary": "connector", "exactly.once.support": "required"})
    wait_for(lambda: _committed_values(shared_broker.bootstrap, topic) == ["0", "1", "2", "6", "7"], 60,
             "the transactions the connector committed")
    time.sleep(2)  # nothing else is committed while the task keeps its transaction open
    assert _committed_values(shared_broker.bootstrap, topic) == ["0", "1", "2", "6", "7"]
    every = [(r.value or b"").decode() for r in read_to_end(shared_broker.bootstrap, topic, "read_uncommitted")]
    assert every == [str(n) for n in range(10)]  # the aborted ones and the open ones are in the log
    assert worker.request("DELETE", f"/connectors/{name}")[0] == 204
    wait_for(lambda: _committed_values(shared_broker.bootstrap, topic)[-2:] == ["8", "9"], 60,
             "the open transaction committed as the task stopped")
