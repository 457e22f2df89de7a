"""The processes of a local cluster: starting a node, probing ports and pids, and the `Supervisor` that
`moldau cluster start` runs its nodes under until a signal stops them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType

from moldau.cli.cluster_layout import HOST, Layout, Node, node_overrides, server_command

POLL_S = 0.2
TAIL_LINES = 15


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGTERM the child when its parent dies, so a killed supervisor leaves no orphans."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def spawn_node(command: Sequence[str], log_path: Path, banner: str = "") -> subprocess.Popen[bytes]:
    """Start one server process in its own session, output appended to `log_path`.

    Its own session keeps a terminal's Ctrl-C away from it: the supervisor decides how it stops.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        if banner:
            log.write(f"\n===== {banner}\n".encode())
            log.flush()
        before_exec = _die_with_parent if sys.platform == "linux" else None
        return subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=before_exec)


def port_open(port: int, timeout_s: float = 0.5) -> bool:
    """True if something accepts TCP connections on loopback `port`."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def port_free(port: int) -> bool:
    """True if this process could listen on loopback `port` now."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True


def pid_alive(pid: int) -> bool:
    """True if process `pid` exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def live_pid(path: Path) -> int | None:
    """The pid in `path` if that process is still alive."""
    pid = read_pid(path)
    return pid if pid is not None and pid_alive(pid) else None


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def wait_gone(pids: Sequence[int], timeout_s: float) -> list[int]:
    """Wait until none of `pids` is alive; return those still alive at the timeout."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if pid_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if pid_alive(pid)]
    return alive


def signal_pid(pid: int, sig: int) -> None:
    """Send `sig` to `pid` unless it is gone already."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


# --------------------------------------------------------------------------- the supervisor


class _Signals:
    """Counts SIGINT/SIGTERM; the supervisor loop polls it."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self)


class Supervisor:
    """The `start` command's children: one process per node, watched until a signal stops them."""

    def __init__(self, base: Path, layout: Layout, overrides: Mapping[str, str], stop_timeout_s: float,
                 controller_args: Sequence[str] = ()) -> None:
        """`controller_args`: more arguments of the controller nodes' `moldau server` (`--add-scram`)."""
        self.base, self.layout, self.overrides = base, layout, dict(overrides)
        self.controller_args = list(controller_args)
        self.stop_timeout_s = stop_timeout_s
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.reported: set[int] = set()
        self.signals = _Signals()

    def config(self, node: Node) -> dict[str, str]:
        return {**node_overrides(self.layout, node, self.base), **self.overrides}

    def start_all(self) -> None:
        for node in self.layout.nodes:
            node.data_dir(self.base).mkdir(parents=True, exist_ok=True)
            extra = self.controller_args if node.is_controller else []
            proc = spawn_node([*server_command(self.config(node)), *extra], node.log_path(self.base),
                              f"node {node.node_id} started {time.strftime('%Y-%m-%d %H:%M:%S')}")
            self.procs[node.node_id] = proc
            node.pid_path(self.base).write_text(f"{proc.pid}\n")

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until every node listens on its ports, a node exits, or a signal arrives."""
        deadline = time.monotonic() + timeout_s
        pending = {node.node_id for node in self.layout.nodes}
        while pending and time.monotonic() < deadline and not self.signals.count:
            for node_id in sorted(pending):
                node = self.layout.node(node_id)
                if self.procs[node_id].poll() is not None or all(port_open(p, 0.2) for p in node.ports):
                    pending.discard(node_id)
            self.report_deaths()
            time.sleep(POLL_S if pending else 0)
        for node_id in sorted(pending):
            print(f"warning: node {node_id} does not accept connections after {timeout_s:.0f} s; "
                  f"see {self.layout.node(node_id).log_path(self.base)}", file=sys.stderr, flush=True)

    def running(self) -> list[int]:
        return [node_id for node_id, proc in self.procs.items() if proc.poll() is None]

    def report_deaths(self) -> None:
        for node_id, proc in self.procs.items():
            code = proc.poll()
            if code is None or node_id in self.reported:
                continue
            self.reported.add(node_id)
            node = self.layout.node(node_id)
            node.pid_path(self.base).unlink(missing_ok=True)
            print(f"node {node_id} exited unexpectedly with code {code}; last lines of {node.log_path(self.base)}:\n"
                  f"{_indent(log_tail(node.log_path(self.base)))}", file=sys.stderr, flush=True)

    def watch(self) -> int:
        """Report nodes that die until a signal arrives (0) or no node is left (1)."""
        while not self.signals.count:
            self.report_deaths()
            if not self.running():
                print("error: every node has exited; stopping", file=sys.stderr, flush=True)
                return 1
            time.sleep(POLL_S)
        return 0

    def stop_all(self) -> None:
        """SIGTERM every child, wait up to the stop timeout, SIGKILL the rest (at once on a second signal)."""
        alive = self.running()
        signalled = self.signals.count
        for node_id in alive:
            self.procs[node_id].send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout_s
        while self.running() and time.monotonic() < deadline and self.signals.count <= max(signalled, 1):
            time.sleep(0.05)
        for node_id in self.running():
            print(f"node {node_id} still running after SIGTERM; killing it", file=sys.stderr, flush=True)
            self.procs[node_id].kill()
        for node_id, proc in self.procs.items():
            code = proc.wait()
            self.layout.node(node_id).pid_path(self.base).unlink(missing_ok=True)
            if node_id in alive:
                print(f"node {node_id} stopped (exit code {code})", flush=True)
