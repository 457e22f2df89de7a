"""A Spark standalone cluster on this machine: one master and N workers started from the installed pyspark.

The pyspark wheel carries Spark's jars and `bin/spark-class` but not the `sbin/start-*.sh` scripts, so this
module starts the master and worker daemons itself, waits until the master lists every worker as ALIVE,
and stops them again. Everything binds to 127.0.0.1 on free ports. From a shell:

    python -m moldau.spark.standalone start --dir DIR [--workers 2]   # prints the master URL
    python -m moldau.spark.standalone url --dir DIR     # prints it again, for --master "$(...)"
    python -m moldau.spark.standalone stop --dir DIR

`start` leaves the daemons running in the background and records them in DIR/cluster.json; `stop` reads it.
From Python, `with StandaloneCluster(DIR) as cluster:` does both.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from moldau.net.ports import free_port

HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
# A JVM that ignores SIGTERM this long is killed.
STOP_GRACE_S = 15.0


class ClusterError(RuntimeError):
    """A daemon did not start, or the master did not see its workers in time."""


def spark_home() -> Path:
    """The installed pyspark package directory, which is a complete SPARK_HOME (jars, bin/spark-class)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def daemon_env(home: Path) -> dict[str, str]:
    """The environment of the daemons, and of the executors the workers start (they inherit it)."""
    env = dict(os.environ)
    env["SPARK_HOME"] = str(home)
    # Executors start Spark's Python workers; they must be this interpreter, which has moldau installed.
    env["PYSPARK_PYTHON"] = sys.executable
    # Without it Spark binds to the address of the machine's hostname, which may not be loopback.
    env["SPARK_LOCAL_IP"] = HOST
    # Unset, Spark reads SPARK_HOME/conf, which the pyspark package lacks: settings meant for another Spark
    # installation on the machine (its spark-defaults.conf, spark-env.sh) stay out of this cluster.
    env.pop("SPARK_CONF_DIR", None)
    return env


@dataclass
class Daemon:
    """One started JVM: its role, process id (leader of its own process group) and log file."""

    role: str
    pid: int
    log: str
    work_dir: str | None = None


@dataclass
class ClusterState:
    """What `start` records in DIR/cluster.json for `stop` and for callers."""

    master_url: str
    ui_url: str
    daemons: list[Daemon] = field(default_factory=list)

    def workers(self) -> list[Daemon]:
        """The worker daemons, in start order."""
        return [d for d in self.daemons if d.role == "worker"]

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        """Read a state file written by `save`."""
        data = json.loads(path.read_text())
        return cls(data["master_url"], data["ui_url"], [Daemon(**d) for d in data["daemons"]])

    def save(self, path: Path) -> None:
        """Write the state file."""
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")


class StandaloneCluster:
    """A master and `workers` workers (`cores` and `memory` each), with logs and work dirs under `directory`."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 timeout_s: float = 90.0) -> None:
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.timeout_s = timeout_s
        self.state: ClusterState | None = None

    @property
    def master_url(self) -> str:
        """`spark://127.0.0.1:PORT`, for `SparkSession.builder.master` or `--master`."""
        if self.state is None:
            raise ClusterError("the cluster is not running")
        return self.state.master_url

    def start(self) -> ClusterState:
        """Start the master, then the workers; return once the master lists them all as ALIVE."""
        home = spark_home()
        self.directory.mkdir(parents=True, exist_ok=True)
        env = daemon_env(home)
        port, ui_port = free_port(), free_port()
        self.state = ClusterState(f"spark://{HOST}:{port}", f"http://{HOST}:{ui_port}")
        try:
            self._spawn(home, env, "master", None, "org.apache.spark.deploy.master.Master",
                        "--host", HOST, "--port", str(port), "--webui-port", str(ui_port))
            for n in range(self.workers):
                work_dir = self.directory / f"worker-{n}"
                work_dir.mkdir(exist_ok=True)
                self._spawn(home, env, f"worker-{n}", work_dir, "org.apache.spark.deploy.worker.Worker",
                            self.state.master_url, "--host", HOST, "--cores", str(self.cores),
                            "--memory", self.memory, "--webui-port", str(free_port()),
                            "--work-dir", str(work_dir))
            self.wait_for_workers(self.workers)
        except BaseException:
            self.stop()
            raise
        return self.state

    def _spawn(self, home: Path, env: dict[str, str], name: str, work_dir: Path | None, *args: str) -> None:
        assert self.state is not None
        log = self.directory / f"{name}.log"
        with log.open("ab") as out:
            # A session of its own: stopping the group also reaches the executors a worker started, and a
            # Ctrl-C in the shell that ran `start` does not reach the daemons.
            proc = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        role = "master" if name == "master" else "worker"
        self.state.daemons.append(Daemon(role, proc.pid, str(log), str(work_dir) if work_dir else None))
        # Recorded as each one starts, so `stop` finds every daemon even if a later start fails.
        self.state.save(self.directory / STATE_FILE)

    def status(self) -> dict[str, Any]:
        """The master's status page as JSON: workers, running and completed applications."""
        if self.state is None:
            raise ClusterError("the cluster is not running")
        return master_status(self.state.ui_url)

    def wait_for_workers(self, count: int) -> None:
        """Wait until the master lists `count` ALIVE workers; fail early if a daemon exits."""
        assert self.state is not None
        deadline = time.monotonic() + self.timeout_s
        alive = 0
        while time.monotonic() < deadline:
            for daemon in self.state.daemons:
                if not _running(daemon.pid):
                    raise ClusterError(f"spark {daemon.role} exited; see {daemon.log}")
            try:
                workers = master_status(self.state.ui_url).get("workers", [])
                alive = sum(1 for w in workers if w.get("state") == "ALIVE")
                if alive >= count:
                    return
            except (OSError, ValueError):
                pass  # The master's web UI is not up yet.
            time.sleep(0.5)
        raise ClusterError(f"{alive} of {count} workers registered with the master in {self.timeout_s:.0f} s; "
                           f"see the logs in {self.directory}")

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master."""
        if self.state is not None:
            stop_daemons(self.state.daemons)
            self.state = None
            (self.directory / STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def master_status(ui_url: str, timeout_s: float = 5.0) -> dict[str, Any]:
    """GET the master's `/json/` page."""
    with urllib.request.urlopen(f"{ui_url}/json/", timeout=timeout_s) as response:
        data: dict[str, Any] = json.load(response)
        return data


def _running(pid: int) -> bool:
    """Whether process `pid` runs; reaps it if it is an exited child of ours."""
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Not our child (`stop` from another process): ask the kernel whether it exists.
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return waited == 0


def stop_daemons(daemons: list[Daemon]) -> None:
    """SIGTERM each daemon's process group, workers first; SIGKILL what is left after the grace period.

    Returns once no process of any group is left, so a caller may check that nothing outlived the cluster.
    """
    # Workers first, so the master does not log them as lost; each worker's group holds its executors.
    ordered = [d for d in daemons if d.role != "master"] + [d for d in daemons if d.role == "master"]
    for daemon in ordered:
        _signal_group(daemon.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for daemon in ordered:
        while group_alive(daemon.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        # Also reaches executors that outlived their worker.
        _signal_group(daemon.pid, signal.SIGKILL)
    for daemon in ordered:
        while group_alive(daemon.pid):
            time.sleep(0.05)


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. Reaps the leader if it is our child; zombies left by
    other members (reparented to an init that reaps them later) do not count."""
    _running(pgid)  # waitpid: our own exited child would otherwise stay a zombie forever.
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in proc.glob("[0-9]*/stat"):
        try:
            # The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # The process exited while we looked.
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            return True
    return False


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def main(argv: list[str] | None = None) -> int:
    """`start` a cluster recorded in `--dir`, print its master `url`, or `stop` it."""
    parser = argparse.ArgumentParser(prog="python -m moldau.spark.standalone",
                                     description="a Spark standalone cluster on 127.0.0.1 from the installed pyspark")
    actions = parser.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a master and workers in the background, print the master URL")
    start.add_argument("--dir", type=Path, required=True, help="logs, work dirs and cluster.json go here")
    start.add_argument("--workers", type=int, default=2, help="number of workers (default 2)")
    start.add_argument("--cores", type=int, default=1, help="cores per worker (default 1)")
    start.add_argument("--memory", default="1g", help="memory per worker (default 1g)")
    stop = actions.add_parser("stop", help="stop the cluster recorded in --dir")
    stop.add_argument("--dir", type=Path, required=True)
    url = actions.add_parser("url", help="print the master URL of the cluster recorded in --dir")
    url.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    state_file = args.dir / STATE_FILE
    if args.action == "start":
        if state_file.exists():
            print(f"error: {state_file} exists: stop that cluster first", file=sys.stderr)
            return 1
        cluster = StandaloneCluster(args.dir, args.workers, args.cores, args.memory)
        try:
            state = cluster.start()
        except ClusterError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"master {state.master_url}  web UI {state.ui_url}  workers {len(state.workers())} ALIVE")
        return 0
    if not state_file.exists():
        print(f"error: no cluster recorded in {state_file}", file=sys.stderr)
        return 1
    if args.action == "url":
        print(ClusterState.load(state_file).master_url)
        return 0
    stop_daemons(ClusterState.load(state_file).daemons)
    state_file.unlink()
    print("stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
