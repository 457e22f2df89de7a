"""`moldau server` stops on SIGTERM also while it is still starting (a broker waiting for its controllers)."""

from __future__ import annotations

import signal
from pathlib import Path

from moldau.net.ports import free_ports
from tests.support.broker_process import spawn_server, wait_bound


def test_sigterm_stops_a_broker_still_waiting_to_join_its_cluster(tmp_path: Path) -> None:
    port, absent_controller = free_ports(2)
    log_path = tmp_path / "broker.log"
    proc = spawn_server({
        "process.roles": "broker", "node.id": "2", "cluster.id": "inLPoBa5QQeZfUt7Mlj53w",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{absent_controller}", "log.dirs": str(tmp_path / "data"),
    }, log_path)
    try:
        wait_bound(proc, port, log_path)  # listeners bound: it goes on to register, which no controller answers
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log_path.read_text()
        text = log_path.read_text()
        assert "stopping before the node had started" in text and "stopped cleanly" in text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
