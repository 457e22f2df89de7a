"""A node's client listener holds its port from the moment it is bound, before the node accepts connections."""

from __future__ import annotations

import errno
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from moldau.net.ports import free_ports


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


def test_a_second_listener_cannot_take_the_port_of_a_node_still_joining_its_cluster(tmp_path: Path) -> None:
    # A broker whose controller never answers binds its listener and then waits to join, never accepting: the
    # window in which a port bound but not listening could be taken by another process's SO_REUSEADDR socket.
    port, absent_controller = free_ports(2)
    overrides = {
        "process.roles": "broker", "node.id": "2", "cluster.id": "inLPoBa5QQeZfUt7Mlj53w",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{absent_controller}", "log.dirs": str(tmp_path / "data"),
        "schema.registry.listeners": "", "console.listeners": "",
    }
    args = [sys.executable, "-m", "moldau", "server"]
    for key, value in overrides.items():
        args += ["--override", f"{key}={value}"]
    with open(tmp_path / "broker.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not _bound(port):
            assert proc.poll() is None, (tmp_path / "broker.log").read_text()
            assert time.monotonic() < deadline, "the broker did not bind its listener"
            time.sleep(0.05)
        with socket.socket() as intruder:
            intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError) as refused:
                intruder.bind(("127.0.0.1", port))
                intruder.listen()
            assert refused.value.errno == errno.EADDRINUSE
        # A client that connects meanwhile waits in the backlog rather than being refused.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(10)
