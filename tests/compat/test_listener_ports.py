"""A node whose client port another process took while the node started stops with an error, rather than
advertising a port that someone else serves."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from moldau.net.ports import free_ports
from tests.support.broker_process import spawn_server, wait_bound

CLUSTER_ID = "inLPoBa5QQeZfUt7Mlj53w"


def test_a_node_whose_port_was_taken_while_it_joined_its_cluster_stops_with_an_error(tmp_path: Path) -> None:
    port, controller_port = free_ports(2)
    voters = {"controller.listener.names": "CONTROLLER", "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
              "cluster.id": CLUSTER_ID}
    # A broker binds its client listener at once and accepts only once it has joined: until its controller
    # starts, it waits in that window.
    broker_log = tmp_path / "broker.log"
    broker = spawn_server({"process.roles": "broker", "node.id": "2", "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                           "log.dirs": str(tmp_path / "broker"), **voters}, broker_log)
    controller: subprocess.Popen[bytes] | None = None
    intruder = socket.socket()
    try:
        wait_bound(broker, port, broker_log)
        intruder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        intruder.bind(("127.0.0.1", port))  # the kernel allows it: the broker's socket does not listen yet
        intruder.listen()
        controller = spawn_server({"process.roles": "controller", "node.id": "1",
                                   "listeners": f"CONTROLLER://127.0.0.1:{controller_port}",
                                   "log.dirs": str(tmp_path / "controller"), **voters}, tmp_path / "controller.log")
        code = broker.wait(60)
        log = broker_log.read_text()
        assert code != 0, log
        assert f"port {port} was taken by another process while this node started" in log
        assert "moldau: listening on" not in log
    finally:
        intruder.close()
        for proc in (broker, controller):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
