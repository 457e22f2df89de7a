"""`moldau cluster start|status|stop|unregister` as a user runs them: real processes, nothing from the quorum needed.

Argument errors run in-process (they fail before anything starts); everything that starts nodes runs the
command as a subprocess and checks that no node outlives it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.describe_cluster.v2.request import DescribeClusterRequest

from moldau.cli.cluster import (
    LAYOUT_FILE,
    SUPERVISOR_PID_FILE,
    Layout,
    pid_alive,
    plan_layout,
    plan_roles,
    read_layout,
    read_pid,
    write_layout,
)
from moldau.cli.main import main
from moldau.net.ports import free_ports
from tests.support.raw_client import RawClient

STARTED = "bootstrap servers:"


class StartProcess:
    """`moldau cluster start ...` in a subprocess, its stdout and stderr in files."""

    def __init__(self, tmp_path: Path, cluster_dir: Path, *args: str) -> None:
        self.dir = cluster_dir
        self.out = tmp_path / f"start-{time.monotonic_ns()}.out"
        self.err = self.out.with_suffix(".err")
        command = [sys.executable, "-m", "moldau", "cluster", "start", "--dir", str(cluster_dir), *args]
        with self.out.open("wb") as out, self.err.open("wb") as err:
            self.proc = subprocess.Popen(command, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def stdout(self) -> str:
        return self.out.read_text(errors="replace")

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def wait_for(self, stream: str, text: str, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            content = self.stdout() if stream == "stdout" else self.stderr()
            if text in content:
                return content
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"no {text!r} on {stream} of `cluster start` (exit {self.proc.poll()}):\n"
                    f"--- stdout\n{self.stdout()}\n--- stderr\n{self.stderr()}")

    def node_pids(self) -> dict[int, int]:
        layout = read_layout(self.dir)
        assert layout is not None
        pids = {node.node_id: read_pid(node.pid_path(self.dir)) for node in layout.nodes}
        return {node_id: pid for node_id, pid in pids.items() if pid is not None}

    def stop(self, sig: int = signal.SIGINT, timeout_s: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout_s)

    def cleanup(self, pids: dict[int, int]) -> None:
        """Leave nothing running, whatever the test did."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in pids.values():
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


Starts = list[tuple[StartProcess, dict[int, int]]]


@pytest.fixture
def starts(tmp_path: Path) -> Iterator[Starts]:
    """Started `cluster start` processes and their node pids, killed at the end if still there."""
    started: Starts = []
    yield started
    for start, pids in started:
        start.cleanup(pids)


def _start(tmp_path: Path, starts: Starts, cluster_dir: Path, *args: str) -> tuple[StartProcess, dict[int, int]]:
    start = StartProcess(tmp_path, cluster_dir, *args)
    pids: dict[int, int] = {}
    starts.append((start, pids))
    start.wait_for("stdout", STARTED)
    pids.update(start.node_pids())
    return start, pids


def _accepts(port: int | None) -> bool:
    assert port is not None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", "cluster", *args], capture_output=True, text=True,
                          timeout=60)


def _gone(pids: dict[int, int], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while any(pid_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(pid_alive(pid) for pid in pids.values())


# --------------------------------------------------------------------------- with processes


@pytest.mark.timeout(180)
def test_start_three_nodes_status_then_sigint_stops_everything(tmp_path: Path, starts: Starts) -> None:
    cluster_dir = tmp_path / "cluster"
    start, pids = _start(tmp_path, starts, cluster_dir, "--nodes", "3")
    layout = read_layout(cluster_dir)
    assert layout is not None and [node.node_id for node in layout.nodes] == [1, 2, 3]
    assert sorted(pids) == [1, 2, 3] and all(pid_alive(pid) for pid in pids.values())
    for node in layout.nodes:
        assert _accepts(node.kafka_port) and _accepts(node.controller_port), node
    out = start.stdout()
    assert f"bootstrap servers: {layout.bootstrap}" in out
    for node in layout.nodes:
        assert f"{node.kafka_address}" in out and str(pids[node.node_id]) in out
        assert str(node.log_path(cluster_dir)) in out

    status = _cli("status", "--dir", str(cluster_dir))
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.count("running, accepting connections") == 3
    assert f"pid {start.proc.pid}" in status.stdout

    assert start.stop(signal.SIGINT) == 0, start.stderr()
    assert _gone(pids), f"nodes outlived `cluster start`: {pids}"
    assert start.stdout().count("stopped (exit code 0)") == 3, start.stdout()
    assert not (cluster_dir / SUPERVISOR_PID_FILE).exists()
    assert not any(node.pid_path(cluster_dir).exists() for node in layout.nodes)

    after = _cli("status", "--dir", str(cluster_dir))
    assert after.returncode == 1 and after.stdout.count("stopped") == 3 and "not running" in after.stdout


# Slow once the quorum runs: a node whose quorum is gone waits ~10 s for controlled shutdown.
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_restart_reuses_cluster_properties_and_stop_command_stops_it(tmp_path: Path, starts: Starts) -> None:
    cluster_dir = tmp_path / "cluster"
    first, first_pids = _start(tmp_path, starts, cluster_dir, "--nodes", "2")
    remembered = (cluster_dir / LAYOUT_FILE).read_text()
    assert first.stop(signal.SIGTERM) == 0 and _gone(first_pids)

    second, pids = _start(tmp_path, starts, cluster_dir)  # no layout given: the remembered one
    assert (cluster_dir / LAYOUT_FILE).read_text() == remembered
    layout = read_layout(cluster_dir)
    assert layout is not None
    assert f"cluster {layout.cluster_id}: 2 combined nodes" in second.stdout()
    assert all(_accepts(node.kafka_port) for node in layout.nodes)
    # The node logs are appended to, so each holds both starts.
    assert layout.nodes[0].log_path(cluster_dir).read_text().count("===== node 1 started") == 2

    again = _cli("start", "--dir", str(cluster_dir), "--nodes", "2")
    assert again.returncode == 1 and "already running" in again.stderr

    stopped = _cli("stop", "--dir", str(cluster_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped the cluster" in stopped.stdout
    assert second.proc.wait(30) == 0
    assert _gone(pids)
    nothing = _cli("stop", "--dir", str(cluster_dir))
    assert nothing.returncode == 0 and "no cluster is running" in nothing.stdout


# Slow once the quorum runs: a node whose quorum is gone waits ~10 s for controlled shutdown.
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_node_that_dies_is_reported_and_the_others_keep_running(tmp_path: Path, starts: Starts) -> None:
    cluster_dir = tmp_path / "cluster"
    start, pids = _start(tmp_path, starts, cluster_dir, "--nodes", "2")
    os.kill(pids[2], signal.SIGKILL)
    err = start.wait_for("stderr", "node 2 exited unexpectedly with code -9")
    assert "last lines of" in err and "server.log" in err
    time.sleep(0.5)
    assert start.proc.poll() is None and pid_alive(pids[1])
    status = _cli("status", "--dir", str(cluster_dir))
    assert status.returncode == 1 and "running, accepting connections" in status.stdout
    assert start.stop(signal.SIGTERM) == 0
    assert _gone(pids)


# Slow once the quorum runs: a node whose quorum is gone waits ~10 s for controlled shutdown.
@pytest.mark.slow
@pytest.mark.timeout(180)
def test_separate_controllers_and_brokers(tmp_path: Path, starts: Starts) -> None:
    cluster_dir = tmp_path / "cluster"
    start, pids = _start(tmp_path, starts, cluster_dir, "--controllers", "1", "--brokers", "2",
                         "--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    layout = read_layout(cluster_dir)
    assert layout is not None
    assert [(n.node_id, n.roles) for n in layout.nodes] == [(1, ("controller",)), (2, ("broker",)), (3, ("broker",))]
    assert layout.nodes[0].kafka_port is None and _accepts(layout.nodes[0].controller_port)
    assert all(_accepts(n.kafka_port) and n.controller_port is None for n in layout.nodes[1:])
    assert layout.voters == f"1@{layout.nodes[0].controller_address}"
    assert f"bootstrap servers: {layout.nodes[1].kafka_address},{layout.nodes[2].kafka_address}" in start.stdout()
    # `--add-scram` went to the controller, which wrote the user into the new cluster; not to the brokers.
    assert _scram_mechanisms(f"{layout.nodes[1].kafka_address}", "alice") == ["SCRAM_SHA_256"]
    assert not any("--add-scram has no effect" in n.log_path(cluster_dir).read_text() for n in layout.nodes[1:])
    # A broker shut down for good is fenced; `cluster unregister` (UnregisterBroker) removes its registration.
    broker_2 = layout.nodes[1].kafka_address
    assert broker_2 is not None
    assert "is active" in _cli("unregister", "--id", "3", "-b", broker_2).stderr
    os.kill(pids[3], signal.SIGTERM)
    start.wait_for("stderr", "node 3 exited")
    deadline = time.monotonic() + 30
    while _registered(broker_2) != {2: False, 3: True} and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _registered(broker_2) == {2: False, 3: True}
    unregistered = _cli("unregister", "--id", "3", "-b", broker_2)
    assert unregistered.returncode == 0, unregistered.stderr
    assert _registered(broker_2) == {2: False}
    assert start.stop() == 0 and _gone(pids)


def _scram_mechanisms(bootstrap: str, user: str) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        try:
            futures = admin.describe_user_scram_credentials([user])
            assert isinstance(futures, dict)
            described = futures[user].result(timeout=10)
            return [info.mechanism.name for info in described.scram_credential_infos]
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _registered(bootstrap: str) -> dict[int, bool]:
    """The registered brokers and whether each is fenced (DescribeCluster v2, fenced brokers included)."""
    with RawClient(bootstrap) as client:
        response = client.request(DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                         include_fenced_brokers=True))
    return {b.broker_id: b.is_fenced for b in response.brokers}


# --------------------------------------------------------------------------- argument errors


def _usage_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    with pytest.raises(SystemExit) as exited:
        main(["cluster", *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "usage: moldau cluster" in err
    return err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "holds no cluster yet"),
        (("--nodes", "0"), "--nodes must be at least 1"),
        (("--nodes", "3", "--controllers", "1"), "cannot be combined"),
        (("--controllers", "3"), "--controllers and --brokers go together"),
        (("--controllers", "0", "--brokers", "1"), "--controllers must be at least 1"),
        (("--nodes", "65"), "at most 64 nodes"),
        (("--nodes", "2", "--base-port", "65534"), "must lie within 1024..65535"),
        (("--nodes", "1", "--override", "novalue"), "--override"),
        (("--nodes", "1", "--override", "num.partitions=zero"), "node 1 would not start"),
        (("--nodes", "x"), "invalid int value"),
        (("--nodes", "1", "--add-scram", "SCRAM-SHA-256=[name=alice]"), "give either password or saltedpassword"),
    ],
)
def test_bad_start_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                             message: str) -> None:
    err = _usage_error(capsys, "start", "--dir", str(tmp_path / "c"), *args)
    assert message in err
    assert not (tmp_path / "c" / LAYOUT_FILE).exists()


def test_missing_dir_and_unknown_action(capsys: pytest.CaptureFixture[str]) -> None:
    assert "--dir" in _usage_error(capsys, "start", "--nodes", "3")
    assert "invalid choice" in _usage_error(capsys, "restart")


def _remember(cluster_dir: Path, nodes: int) -> Layout:
    roles = plan_roles(nodes)
    layout = plan_layout(roles, free_ports(2 * nodes))
    write_layout(cluster_dir, layout)
    return layout


def test_a_different_layout_on_an_existing_dir_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _remember(tmp_path, 3)
    err = _usage_error(capsys, "start", "--dir", str(tmp_path), "--controllers", "1", "--brokers", "2")
    assert "already holds a cluster of 3 combined nodes" in err
    assert "drop --base-port" in _usage_error(capsys, "start", "--dir", str(tmp_path), "--base-port", "20000")


def test_status_and_stop_need_a_cluster_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "is not a cluster directory" in _usage_error(capsys, "status", "--dir", str(tmp_path))
    assert "is not a cluster directory" in _usage_error(capsys, "stop", "--dir", str(tmp_path))


def test_bad_arguments_exit_2_from_the_command_line(tmp_path: Path) -> None:
    done = _cli("start", "--dir", str(tmp_path), "--nodes", "-1")
    assert done.returncode == 2
    assert "error: --nodes must be at least 1" in done.stderr


def test_a_port_in_use_is_reported_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = _remember(tmp_path, 1)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", layout.ports[0]))
        squatter.listen()
        assert main(["cluster", "start", "--dir", str(tmp_path)]) == 1
    assert f"{layout.ports[0]} of the cluster in {tmp_path} already in use" in capsys.readouterr().err
    assert not (tmp_path / SUPERVISOR_PID_FILE).exists()


def test_status_shows_a_stale_pid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layout = _remember(tmp_path, 1)
    dead = subprocess.Popen(["true"])
    dead.wait()
    layout.nodes[0].pid_path(tmp_path).parent.mkdir(parents=True)
    layout.nodes[0].pid_path(tmp_path).write_text(f"{dead.pid}\n")
    assert main(["cluster", "status", "--dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "stopped (stale pid file)" in out and "supervisor (moldau cluster start): not running" in out
