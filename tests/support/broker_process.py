"""A real `moldau server` process for tests: started on a free loopback port with its own data dir.

Tests talk to it over TCP with real client libraries; nothing stands in for the broker.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from moldau.net.ports import free_ports


def spawn_server(overrides: dict[str, str], log_path: Path, *, heading: str = "",
                 log_level: str | None = None, extra_args: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """`moldau server` with `overrides` (no schema registry or console unless given) and `extra_args`, its output
    appended to `log_path` after `heading`, not waited for: for tests of what happens while a node starts."""
    args = [sys.executable, "-m", "moldau", "server", *extra_args]
    if log_level is not None:
        args += ["--log-level", log_level]
    for key, value in {"schema.registry.listeners": "", "console.listeners": "", **overrides}.items():
        args += ["--override", f"{key}={value}"]
    with open(log_path, "ab") as log:
        log.write(heading.encode())
        log.flush()
        return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def port_bound(port: int) -> bool:
    """Whether anything holds `port` on 127.0.0.1, listening or not (a plain bind, without SO_REUSEADDR, fails)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            return True
    return False


def wait_bound(proc: subprocess.Popen[bytes], port: int, log_path: Path, timeout_s: float = 30.0) -> None:
    """Until the starting node `proc` has bound `port`."""
    deadline = time.monotonic() + timeout_s
    while not port_bound(port):
        assert proc.poll() is None, log_path.read_text()
        assert time.monotonic() < deadline, f"the node did not bind port {port}:\n{log_path.read_text()}"
        time.sleep(0.05)


def signal_and_wait(proc: subprocess.Popen[bytes], sig: int, timeout_s: float, what: str) -> int:
    """Send `sig` if the process still runs and wait for its exit code; past the timeout SIGKILL it and raise."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{what} ignored signal {sig} for {timeout_s}s") from None


class BrokerProcess:
    def __init__(self, data_dir: Path, overrides: dict[str, str] | None = None, port: int | None = None,
                 extra_args: Sequence[str] = ()) -> None:
        self.data_dir = data_dir
        self.extra_args = list(extra_args)  # given to `moldau server` besides the overrides
        # Every test broker gets its own schema registry and console ports: the defaults would collide. The ports
        # are picked together, so that no two of them are the same (picked one at a time, they could be).
        picked = [p for p in free_ports(3) if p != port]
        self.port = port or picked.pop()
        self.registry_port, self.console_port = picked[:2]
        self.overrides = {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(data_dir / "logs"),
            "node.id": "1",
            "schema.registry.listeners": f"http://127.0.0.1:{self.registry_port}",
            "console.listeners": f"http://127.0.0.1:{self.console_port}",
            **(overrides or {}),
        }
        self.log_path = data_dir / "broker.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def registry_url(self) -> str:
        """The broker's schema registry (its REST API), as `schema.registry.listeners` says."""
        return self.overrides["schema.registry.listeners"]

    @property
    def console_url(self) -> str:
        """The broker's web console, on its console listener."""
        return self.overrides["console.listeners"].rstrip("/")

    @property
    def metrics_url(self) -> str:
        """The broker's Prometheus endpoint, on its console listener."""
        return self.overrides["console.listeners"].rstrip("/") + "/metrics"

    def start(self, timeout_s: float = 30.0) -> None:
        self.starts += 1
        self.proc = spawn_server(self.overrides, self.log_path, heading=f"\n===== start #{self.starts}\n",
                                 log_level="INFO", extra_args=self.extra_args)
        self._wait_until_listening(timeout_s)

    def _wait_until_listening(self, timeout_s: float) -> None:
        """Until this start printed its "listening" line (every listener bound, the node started) and the port
        takes connections. A port that takes connections alone is not enough: it listens from the moment it is
        bound, and a later listener that cannot bind still stops the node."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self._started_listening():
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        raise RuntimeError(f"broker did not listen within {timeout_s}s:\n{self.log_tail()}")

    def _started_listening(self) -> bool:
        text = self.log_path.read_text(errors="replace")
        return "moldau: listening on" in text[text.rfind(f"===== start #{self.starts}\n"):]

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        return self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        """SIGKILL: a crash, with no chance to flush or mark a clean shutdown."""
        self._signal_and_wait(signal.SIGKILL, 10.0)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _signal_and_wait(self, sig: int, timeout_s: float) -> int:
        if self.proc is None:
            return 0
        try:
            return signal_and_wait(self.proc, sig, timeout_s, "broker")
        finally:
            self.proc = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None


@contextlib.contextmanager
def running_broker(tmp_path: Path, configs: Mapping[str, str]) -> Iterator[BrokerProcess]:
    """A started broker of the test's own (for tests that restart it or need configs the shared one lacks), stopped
    and removed after; its log must show no internal error."""
    proc = BrokerProcess(tmp_path, dict(configs))
    proc.start()
    try:
        yield proc
        assert "internal error" not in proc.log_path.read_text(), proc.log_tail()
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for process {pid}")
