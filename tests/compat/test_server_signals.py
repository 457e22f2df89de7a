"""`moldau server` stops on SIGTERM also while it is still starting (a broker waiting for its controllers), and
stops with an error when it cannot register within initial.broker.registration.timeout.ms."""

from __future__ import annotations

import signal
from pathlib import Path

from moldau.net.ports import free_ports
from tests.support.broker_process import spawn_server, wait_bound


def lone_broker(tmp_path: Path, port: int, absent_controller: int, **extra: str) -> dict[str, str]:
    """A broker-only node whose one controller (at `absent_controller`) never answers."""
    return {
        "process.roles": "broker", "node.id": "2", "cluster.id": "inLPoBa5QQeZfUt7Mlj53w",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{absent_controller}", "log.dirs": str(tmp_path / "data"),
        **extra,
    }


def test_sigterm_stops_a_broker_still_waiting_to_join_its_cluster(tmp_path: Path) -> None:
    port, absent_controller = free_ports(2)
    log_path = tmp_path / "broker.log"
    proc = spawn_server(lone_broker(tmp_path, port, absent_controller), log_path)
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


def test_a_broker_that_cannot_register_stops_after_initial_broker_registration_timeout_ms(tmp_path: Path) -> None:
    """Kafka's initial.broker.registration.timeout.ms: with no controller to register with, the process stops with
    an error naming the setting, instead of waiting for ever."""
    port, absent_controller = free_ports(2)
    log_path = tmp_path / "broker.log"
    proc = spawn_server(lone_broker(tmp_path, port, absent_controller,
                                    **{"initial.broker.registration.timeout.ms": "1500"}), log_path)
    try:
        assert proc.wait(60) != 0, log_path.read_text()
        assert "initial.broker.registration.timeout.ms=1500" in log_path.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
