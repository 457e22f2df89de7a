"""An example pipeline run on a Spark standalone cluster (a master and two workers on 127.0.0.1) instead of
local[N], checked against the plain-Python computation, with tasks on both workers' executors."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.spark.pipelines import PIPELINES, RunSettings
from moldau.spark.standalone import STATE_FILE, StandaloneCluster, group_alive, master_status
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.spark


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers; every JVM (executors too) is gone after the test."""
    cluster = StandaloneCluster(tmp_path / "spark", workers=2, cores=1, memory="1g")
    cluster.start()
    assert cluster.state is not None
    daemons = list(cluster.state.daemons)
    try:
        yield cluster
    finally:
        cluster.stop()
    assert not [d for d in daemons if group_alive(d.pid)]
    # Spark's Python workers put themselves in groups of their own; they run in their executor's directory.
    assert not processes_under(tmp_path)
    assert not (tmp_path / "spark" / STATE_FILE).exists()


def processes_under(directory: Path) -> list[int]:
    """Live processes whose working directory is inside `directory`."""
    found = []
    for cwd in Path("/proc").glob("[0-9]*/cwd"):
        try:
            state = (cwd.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if cwd.readlink().is_relative_to(directory) and state != "Z":
                found.append(int(cwd.parent.name))
        except OSError:
            continue  # Exited meanwhile, or not ours to look at.
    return found


def executor_task_lines(work_dir: Path) -> list[str]:
    """The "Running task" lines in the logs of every executor this worker started (work_dir/app-*/N/stderr)."""
    return [line for log in work_dir.glob("app-*/*/stderr")
            for line in log.read_text(errors="replace").splitlines() if "Executor: Running task" in line]


@pytest.mark.timeout(240)
def test_pipeline_runs_on_a_standalone_cluster(cluster: StandaloneCluster, broker: BrokerProcess) -> None:
    assert cluster.state is not None
    prefix = f"activity-{uuid.uuid4().hex[:6]}-"
    # The driver runs in its own process: this test session may already hold a local SparkSession, and one
    # process cannot have sessions on two masters. SPARK_LOCAL_IP keeps the driver on loopback too.
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    # Two input partitions and four shuffle partitions: enough tasks that both one-core executors get some.
    run = subprocess.run([sys.executable, "-m", "moldau", "pipeline", "run", "activity",
                          "--bootstrap-server", broker.bootstrap, "--events", "200", "--seed", "7",
                          "--prefix", prefix, "--master", cluster.master_url],
                         env=env, capture_output=True, text=True, timeout=200)
    # `pipeline run` compares the output topic with the plain-Python result and exits 1 on any difference.
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "matches the plain-Python computation" in run.stdout

    # Read the output back independently: every expected row once.
    pipeline = PIPELINES["activity"]
    written = pipeline.actual(_settings(broker.bootstrap, prefix))
    assert len(written) > 10
    assert len(set(written)) == len(written)
    assert f"{len(written)} results written" in run.stdout

    # The application ran on this cluster, with one executor (and its core) from each worker...
    apps = master_status(cluster.state.ui_url)["completedapps"]
    assert [(app["name"], app["cores"]) for app in apps] == [("moldau-pipeline", 2)]
    # ...and each of those executors ran tasks.
    for worker in cluster.state.workers():
        assert worker.work_dir is not None
        assert executor_task_lines(Path(worker.work_dir)), f"no task ran on {worker.work_dir}"


def _settings(bootstrap: str, prefix: str) -> RunSettings:
    # Only the broker and the topic prefix matter for reading the output back.
    return RunSettings(bootstrap=bootstrap, prefix=prefix, events=0, seed=0, checkpoint=Path())
