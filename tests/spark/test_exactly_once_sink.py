"""The streaming sink is exactly-once: a query killed (SIGKILL) in the middle of publishing a micro-batch and
restarted from its checkpoint writes every input row once, and read_committed readers only ever see whole
micro-batches.

The query runs in a process of its own (`tests.spark.sink_driver`) so that it can be killed; the sink's test
hook (`moldau.spark.publish.PAUSE_ENV`) holds the driver at the chosen point of the chosen batch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import IsolationLevel
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from moldau.spark.fetch import FetchSettings, read_range
from moldau.spark.offsets import OffsetRange
from moldau.spark.publish import PAUSE_ENV
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic

pytestmark = pytest.mark.spark

ROWS_PER_BATCH = 20
BATCHES = 5
OUT_PARTITIONS = 3
LATEST: Any = OffsetSpec.latest  # untyped in the client library


def visible(bootstrap: str, topic: str, isolation: str) -> list[int]:
    """The input offsets written to `topic` as one reader at `isolation` sees them now.

    The end offsets of every partition come from one ListOffsets request (at the reader's isolation level:
    the last stable offset for read_committed), so the view is one snapshot of the topic.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
    specs = {CkTopicPartition(topic, p): LATEST() for p in range(OUT_PARTITIONS)}
    ends = {tp.partition: f.result().offset for tp, f in admin.list_offsets(specs, isolation_level=level).items()}
    settings = FetchSettings(bootstrap=bootstrap, client_conf={}, isolation_level=isolation, include_headers=False,
                             fail_on_data_loss=True, poll_timeout_ms=30_000)
    return [int(value) for p, end in ends.items() if end > 0
            for batch in read_range(settings, OffsetRange(topic, p, 0, end))
            for value in batch.column("value").to_pylist()]


def per_batch(offsets: list[int]) -> Counter[int]:
    """How many rows of each micro-batch: batch b holds input offsets [b*N, (b+1)*N) (one input partition)."""
    return Counter(off // ROWS_PER_BATCH for off in offsets)


def committed_batches(bootstrap: str, topic: str) -> set[int]:
    """The batches a read_committed reader sees; fails if it sees part of one, or a row twice."""
    offsets = visible(bootstrap, topic, "read_committed")
    assert len(offsets) == len(set(offsets)), f"duplicated rows: {sorted(offsets)}"
    counts = per_batch(offsets)
    assert all(n == ROWS_PER_BATCH for n in counts.values()), f"part of a batch is visible: {counts}"
    return set(counts)


class Watcher(threading.Thread):
    """Takes read_committed snapshots of the output while the query runs, keeping the bad ones."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopping = threading.Event()
        self.snapshots = 0
        self.bad: list[str] = []

    def run(self) -> None:
        while not self.stopping.wait(0.3):
            try:
                committed_batches(self.bootstrap, self.topic)
            except AssertionError as exc:
                self.bad.append(str(exc))
            self.snapshots += 1


def start_query(broker: BrokerProcess, topics: tuple[str, str], checkpoint: Path, log: Path,
                pause: str | None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    env.pop(PAUSE_ENV, None)
    if pause is not None:
        env[PAUSE_ENV] = pause
    with log.open("ab") as out:
        # A session of its own: killing its process group kills the driver, Spark's JVM and their children.
        return subprocess.Popen([sys.executable, "-m", "tests.spark.sink_driver", broker.bootstrap, *topics,
                                 str(checkpoint), str(ROWS_PER_BATCH)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"the query exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"the query never reached {path.name}:\n{log.read_text()[-3000:]}"
        time.sleep(0.2)


def kill(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the query's whole process group: a crash of the driver machine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


@pytest.mark.timeout(900)
def test_killed_mid_batch_and_restarted_writes_every_row_once(shared_broker: BrokerProcess, tmp_path: Path) -> None:
    bootstrap = shared_broker.bootstrap
    source_topic, out_topic = f"eo-in-{uuid.uuid4().hex[:8]}", f"eo-out-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, source_topic)
    create_topic(bootstrap, out_topic, partitions=OUT_PARTITIONS)
    ck_produce(bootstrap, source_topic, [{"value": b"x"} for _ in range(ROWS_PER_BATCH * BATCHES)])
    topics, checkpoint, log = (source_topic, out_topic), tmp_path / "ck", tmp_path / "query.log"
    watcher = Watcher(bootstrap, out_topic)
    watcher.start()
    runs: list[subprocess.Popen[bytes]] = []
    try:
        # 1. Killed with batch 1's transaction open: every row of it produced, none committed.
        runs.append(start_query(shared_broker, topics, checkpoint, log, f"before-commit:1:{tmp_path / 'p1'}"))
        wait_for(tmp_path / "p1", runs[-1], log)
        assert 1 in per_batch(visible(bootstrap, out_topic, "read_uncommitted")), "batch 1 was not in flight"
        assert committed_batches(bootstrap, out_topic) == {0}
        kill(runs[-1])
        assert committed_batches(bootstrap, out_topic) == {0}

        # 2. Killed after batch 3's transaction committed, before Spark recorded the batch in its checkpoint.
        runs.append(start_query(shared_broker, topics, checkpoint, log, f"after-commit:3:{tmp_path / 'p3'}"))
        wait_for(tmp_path / "p3", runs[-1], log)
        assert committed_batches(bootstrap, out_topic) == {0, 1, 2, 3}
        kill(runs[-1])
        assert not (checkpoint / "commits" / "3").exists(), "Spark recorded batch 3: it will not be replayed"

        # 3. Restarted: batch 3 is replayed (and written no second time), batch 4 runs, the query ends.
        runs.append(start_query(shared_broker, topics, checkpoint, log, None))
        assert runs[-1].wait(300) == 0, log.read_text()[-3000:]
    finally:
        for proc in runs:
            kill(proc)
        watcher.stopping.set()
        watcher.join(30)

    assert sorted(visible(bootstrap, out_topic, "read_committed")) == list(range(ROWS_PER_BATCH * BATCHES))
    assert (checkpoint / "commits" / "3").exists()
    assert watcher.snapshots > 10 and not watcher.bad, watcher.bad[:3]
