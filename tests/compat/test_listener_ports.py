"""A node whose client port another process took while the node started stops with an error, rather than
advertising a port that someone else serves."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import time
from pathlib import Path

from moldau.net.ports import free_ports

CLUSTER_ID = "inLPoBa5QQeZfUt7Mlj53w"


def _bound(port: int) -> bool:
    """Whether anything holds `port` (a plain bind, without SO_REUSEADDR, fails then)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return True
    return False


def _spawn(overrides: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "moldau", "server"]
    for key, value in {**overrides, "schema.registry.listeners": "", "console.listeners": ""}.items():
        args += ["--override", f"{key}={value}"]
    with open(log_path, "wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def test_a_node_whose_port_was_taken_while_it_joined_its_cluster_stops_with_an_error(tmp_path: Path) -> None:
    port, controller_port = free_ports(2)
    voters = {"controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
              "cluster.id": CLUSTER_ID}
    # A broker binds its client listener at once and accepts only once it has joined: until its controller
    # starts, it waits in that window.
    broker = _spawn({"process.roles": "broker", "node.id": "2", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                     "log.dirs": str(tmp_path / "broker"), **voters}, tmp_path / "broker.log")
    controller: subprocess.Popen[bytes] | None = None
    intruder = socket.socket()
    try:
        deadline = time.monotonic() + 30
        while not _bound(port):
            assert broker.poll() is None, (tmp_path / "broker.log").read_text()
            assert time.monotonic() < deadline, "the broker did not bind its listener"
            time.sleep(0.05)
        intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        intruder.bind(("127.0.0.1", port))  # the kernel allows it: the broker's socket does not listen yet
        intruder.listen()
        controller = _spawn({"process.roles": "controller", "node.id": "1",
                             "listeners": f"CONTROLLER://127.0.0.1:{controller_port}",
                             "log.dirs": str(tmp_path / "controller"), **voters}, tmp_path / "controller.log")
        code = broker.wait(60)
        log = (tmp_path / "broker.log").read_text()
        assert code != 0, log
        assert f"port {port} was taken by another process while this node started" in log
        assert "moldau: listening on" not in log
    finally:
        intruder.close()
        for proc in (broker, controller):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
