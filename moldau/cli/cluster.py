"""`moldau cluster`: run a local multi-node cluster in the foreground, show its state, stop it.

`start` lays a cluster out in a directory (node ids, roles, ports, cluster id, remembered in
`DIR/cluster.properties` so that a later `start` reuses them and the data dirs stay valid), starts one
`moldau server` process per node with Kafka's KRaft settings, and supervises them until SIGINT/SIGTERM.
`status` and `stop` work on a cluster started from another terminal, through the pid files it writes.

The node layout and the per-node configuration are plain functions (`plan_layout`, `node_overrides`,
`server_command`, `spawn_node`) that the test harness (`tests/support/cluster.py`) and the cluster
benchmark reuse, so every multi-node process runs with the same settings.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from moldau.cli.common import CliError, plural
from moldau.cli.table import format_table
from moldau.config import BrokerConfig, ConfigError, parse_overrides, parse_properties
from moldau.net.ports import free_ports

LAYOUT_FILE = "cluster.properties"
SUPERVISOR_PID_FILE = "cluster.pid"
NODE_PID_FILE = "pid"
SERVER_LOG = "server.log"
HOST = "127.0.0.1"
KAFKA_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
BROKER, CONTROLLER = "broker", "controller"
COMBINED = (BROKER, CONTROLLER)
MAX_NODES = 64
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLL_S = 0.2
TAIL_LINES = 15
USAGE_EXIT = 2

SubParsers = argparse._SubParsersAction  # argparse exposes no public name for it
_Handler = Callable[[argparse.Namespace], int]


class UsageError(CliError):
    """Bad arguments: reported like argparse's own errors, with exit status 2."""


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True, slots=True)
class Node:
    """One node of a local cluster: its id, roles and loopback ports (None for a listener it lacks)."""

    node_id: int
    roles: tuple[str, ...]
    kafka_port: int | None
    controller_port: int | None

    @property
    def is_broker(self) -> bool:
        return BROKER in self.roles

    @property
    def is_controller(self) -> bool:
        return CONTROLLER in self.roles

    @property
    def kafka_address(self) -> str | None:
        return None if self.kafka_port is None else f"{HOST}:{self.kafka_port}"

    @property
    def controller_address(self) -> str | None:
        return None if self.controller_port is None else f"{HOST}:{self.controller_port}"

    @property
    def ports(self) -> list[int]:
        return [port for port in (self.kafka_port, self.controller_port) if port is not None]

    def directory(self, base: Path) -> Path:
        return base / f"node-{self.node_id}"

    def data_dir(self, base: Path) -> Path:
        return self.directory(base) / "data"

    def log_path(self, base: Path) -> Path:
        return self.directory(base) / SERVER_LOG

    def pid_path(self, base: Path) -> Path:
        return self.directory(base) / NODE_PID_FILE


@dataclass(frozen=True, slots=True)
class Layout:
    """A whole cluster: the shared cluster id and the nodes in id order."""

    cluster_id: str
    nodes: tuple[Node, ...]

    @property
    def brokers(self) -> list[Node]:
        return [node for node in self.nodes if node.is_broker]

    @property
    def controllers(self) -> list[Node]:
        return [node for node in self.nodes if node.is_controller]

    @property
    def voters(self) -> str:
        """`controller.quorum.voters`: `id@host:port` of every controller-role node."""
        return ",".join(f"{node.node_id}@{node.controller_address}" for node in self.controllers)

    @property
    def bootstrap(self) -> str:
        """The kafka addresses of the broker-role nodes, comma-separated."""
        return ",".join(str(node.kafka_address) for node in self.brokers)

    @property
    def ports(self) -> list[int]:
        return [port for node in self.nodes for port in node.ports]

    def node(self, node_id: int) -> Node:
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} in this cluster")

    def describe(self) -> str:
        if all(node.roles == COMBINED for node in self.nodes):
            return f"{plural(len(self.nodes), 'combined node')}"
        return f"{plural(len(self.controllers), 'controller')} and {plural(len(self.brokers), 'broker')}"


def new_cluster_id() -> str:
    """A random cluster id as Kafka makes them: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def plan_roles(
    nodes: int | None = None, controllers: int | None = None, brokers: int | None = None
) -> list[tuple[str, ...]]:
    """Roles in node id order. Raises UsageError.

    `nodes` combined nodes (ids 1..N), or `controllers` controller-only nodes (ids 1..C) followed by
    `brokers` broker-only nodes (ids C+1..C+B).
    """
    if nodes is not None and (controllers is not None or brokers is not None):
        raise UsageError("--nodes cannot be combined with --controllers/--brokers")
    if nodes is not None:
        _check_count("--nodes", nodes, nodes)
        return [COMBINED] * nodes
    if controllers is None or brokers is None:
        raise UsageError("--controllers and --brokers go together (or use --nodes N for combined nodes)")
    _check_count("--controllers", controllers, controllers + brokers)
    _check_count("--brokers", brokers, controllers + brokers)
    only_controller: tuple[str, ...] = (CONTROLLER,)
    only_broker: tuple[str, ...] = (BROKER,)
    return [only_controller] * controllers + [only_broker] * brokers


def _check_count(option: str, count: int, total: int) -> None:
    if count < 1:
        raise UsageError(f"{option} must be at least 1, got {count}")
    if total > MAX_NODES:
        raise UsageError(f"at most {MAX_NODES} nodes are supported, asked for {total}")


def ports_needed(roles: Sequence[tuple[str, ...]]) -> int:
    return sum(BROKER in r for r in roles) + sum(CONTROLLER in r for r in roles)


def base_ports(base_port: int, count: int) -> list[int]:
    """Ports `base_port .. base_port+count-1`; UsageError if they leave the unprivileged range."""
    if base_port < 1024 or base_port + count - 1 > 65535:
        raise UsageError(f"--base-port {base_port} needs ports {base_port}..{base_port + count - 1}, "
                         "which must lie within 1024..65535")
    return list(range(base_port, base_port + count))


def plan_layout(roles: Sequence[tuple[str, ...]], ports: Sequence[int], cluster_id: str | None = None) -> Layout:
    """Number the nodes 1..N and hand out `ports`: first a kafka port to every broker-role node in id
    order, then a controller port to every controller-role node in id order."""
    available = iter(ports)
    kafka = {i: next(available) for i, r in enumerate(roles, 1) if BROKER in r}
    control = {i: next(available) for i, r in enumerate(roles, 1) if CONTROLLER in r}
    nodes = tuple(Node(i, tuple(r), kafka.get(i), control.get(i)) for i, r in enumerate(roles, 1))
    return Layout(cluster_id or new_cluster_id(), nodes)


def node_overrides(layout: Layout, node: Node, base: Path) -> dict[str, str]:
    """The server configuration of one node, as `--override` key/values (Kafka's KRaft names)."""
    listeners = []
    if node.is_broker:
        listeners.append(f"{KAFKA_LISTENER}://{node.kafka_address}")
    if node.is_controller:
        listeners.append(f"{CONTROLLER_LISTENER}://{node.controller_address}")
    config = {
        "node.id": str(node.node_id),
        "process.roles": ",".join(node.roles),
        "listeners": ",".join(listeners),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listener.security.protocol.map": f"{KAFKA_LISTENER}:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
        "controller.quorum.voters": layout.voters,
        "cluster.id": layout.cluster_id,
        "log.dirs": str(node.data_dir(base)),
    }
    if node.is_broker:
        config["advertised.listeners"] = f"{KAFKA_LISTENER}://{node.kafka_address}"
    return config


def server_command(overrides: Mapping[str, str], log_level: str = "INFO") -> list[str]:
    """The command line of one node: this interpreter running `moldau server` with the overrides."""
    command = [sys.executable, "-m", "moldau", "server", "--log-level", log_level]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    return command


def check_node_config(overrides: Mapping[str, str]) -> None:
    """Raise ConfigError if `moldau server` would refuse this configuration."""
    config_log = logging.getLogger("moldau.config")
    level = config_log.level
    config_log.setLevel(logging.ERROR)  # unknown keys are the server's to warn about, once per node
    try:
        BrokerConfig.from_properties(overrides)
    finally:
        config_log.setLevel(level)


# --------------------------------------------------------------------------- the layout file


def write_layout(base: Path, layout: Layout) -> None:
    """Remember the layout in `base/cluster.properties` (Java properties syntax)."""
    lines = [
        "# Written by `moldau cluster start`; later starts on this directory reuse it.",
        f"cluster.id={layout.cluster_id}",
        f"node.ids={','.join(str(node.node_id) for node in layout.nodes)}",
    ]
    for node in layout.nodes:
        prefix = f"node.{node.node_id}"
        lines.append(f"{prefix}.roles={','.join(node.roles)}")
        if node.kafka_port is not None:
            lines.append(f"{prefix}.kafka.port={node.kafka_port}")
        if node.controller_port is not None:
            lines.append(f"{prefix}.controller.port={node.controller_port}")
    base.mkdir(parents=True, exist_ok=True)
    (base / LAYOUT_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def read_layout(base: Path) -> Layout | None:
    """The layout remembered in `base`, None if there is none; CliError if the file is damaged."""
    path = base / LAYOUT_FILE
    if not path.is_file():
        return None
    props = parse_properties(path.read_text(encoding="utf-8"))
    try:
        ids = [int(item) for item in props["node.ids"].split(",")]
        nodes = tuple(_read_node(props, node_id) for node_id in ids)
        return Layout(props["cluster.id"], nodes)
    except (KeyError, ValueError) as exc:
        raise CliError(f"{path} is damaged ({type(exc).__name__}: {exc}); start a cluster in a new directory") from None


def _read_node(props: Mapping[str, str], node_id: int) -> Node:
    prefix = f"node.{node_id}"
    roles = tuple(role.strip() for role in props[f"{prefix}.roles"].split(","))
    if not roles or any(role not in COMBINED for role in roles):
        raise ValueError(f"{prefix}.roles={props[f'{prefix}.roles']}")
    kafka = props.get(f"{prefix}.kafka.port")
    control = props.get(f"{prefix}.controller.port")
    return Node(node_id, roles, None if kafka is None else int(kafka), None if control is None else int(control))


# --------------------------------------------------------------------------- processes


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


# --------------------------------------------------------------------------- `cluster start`


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

    def __init__(self, base: Path, layout: Layout, overrides: Mapping[str, str], stop_timeout_s: float) -> None:
        self.base, self.layout, self.overrides = base, layout, dict(overrides)
        self.stop_timeout_s = stop_timeout_s
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.reported: set[int] = set()
        self.signals = _Signals()

    def config(self, node: Node) -> dict[str, str]:
        return {**node_overrides(self.layout, node, self.base), **self.overrides}

    def start_all(self) -> None:
        for node in self.layout.nodes:
            node.data_dir(self.base).mkdir(parents=True, exist_ok=True)
            proc = spawn_node(server_command(self.config(node)), node.log_path(self.base),
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


def add_start(actions: SubParsers[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser("start", help="start a local cluster and supervise it in the foreground",
                                description="Start a local cluster in DIR and run until Ctrl-C or SIGTERM.")
    _add_dir(parser)
    parser.add_argument("--nodes", type=int, metavar="N", help="N combined (broker,controller) nodes, ids 1..N")
    parser.add_argument("--controllers", type=int, metavar="C", help="C controller-only nodes, ids 1..C")
    parser.add_argument("--brokers", type=int, metavar="B", help="B broker-only nodes, ids C+1..C+B")
    parser.add_argument("--base-port", type=int, metavar="P",
                        help="kafka ports P, P+1, ... then the controller ports (default: free ports)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a server config for every node, over the generated ones (repeatable)")
    parser.add_argument("--stop-timeout", type=float, default=STOP_TIMEOUT_S, metavar="S",
                        help=f"seconds to wait for nodes after SIGTERM before SIGKILL (default {STOP_TIMEOUT_S:.0f})")
    parser.add_argument("--ready-timeout", type=float, default=READY_TIMEOUT_S, metavar="S",
                        help=f"seconds to wait for nodes to listen (default {READY_TIMEOUT_S:.0f})")
    parser.set_defaults(func=_usage_guard(start, parser))


def _add_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", type=Path, required=True, metavar="DIR", help="the cluster directory")


def _usage_guard(handler: _Handler, parser: argparse.ArgumentParser) -> _Handler:
    """Turn a UsageError of `handler` into argparse's usage message and exit status 2."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except UsageError as exc:
            parser.error(str(exc))

    return run


def start(args: argparse.Namespace) -> int:
    base: Path = args.dir.resolve()
    overrides = _overrides(args.override)
    layout = _layout_for(base, args)
    _check_configs(base, layout, overrides)
    _check_not_running(base, layout)
    write_layout(base, layout)
    supervisor = Supervisor(base, layout, overrides, args.stop_timeout)
    supervisor.signals.install()
    pid_file = base / SUPERVISOR_PID_FILE
    pid_file.write_text(f"{os.getpid()}\n")
    try:
        supervisor.start_all()
        supervisor.wait_ready(args.ready_timeout)
        if not supervisor.signals.count:
            _print_started(base, layout, supervisor)
        code = supervisor.watch()
    finally:
        supervisor.stop_all()
        pid_file.unlink(missing_ok=True)
    print("cluster stopped", flush=True)
    return code


def _overrides(items: Sequence[str]) -> dict[str, str]:
    try:
        return parse_overrides(items)
    except ConfigError as exc:
        raise UsageError(f"--override: {exc}") from None


def _layout_for(base: Path, args: argparse.Namespace) -> Layout:
    """The layout remembered in `base` (checked against the arguments), or a new one from them."""
    if base.exists() and not base.is_dir():
        raise UsageError(f"--dir {base} exists and is not a directory")
    asked = None
    if (args.nodes, args.controllers, args.brokers) != (None, None, None):
        asked = plan_roles(args.nodes, args.controllers, args.brokers)
    known = read_layout(base)
    if known is None:
        if asked is None:
            raise UsageError(f"{base} holds no cluster yet: give --nodes N, or --controllers C --brokers B")
        count = ports_needed(asked)
        ports = free_ports(count) if args.base_port is None else base_ports(args.base_port, count)
        return plan_layout(asked, ports)
    _check_same(base, known, asked, args.base_port)
    return known


def _check_same(base: Path, known: Layout, asked: list[tuple[str, ...]] | None, base_port: int | None) -> None:
    if asked is not None and [node.roles for node in known.nodes] != asked:
        raise UsageError(f"{base} already holds a cluster of {known.describe()}; give the same layout "
                         "(or none) to restart it, or use another --dir")
    if base_port is not None and min(known.ports) != base_port:
        raise UsageError(f"{base} already holds a cluster on ports from {min(known.ports)}; "
                         f"drop --base-port {base_port} or use another --dir")


def _check_configs(base: Path, layout: Layout, overrides: Mapping[str, str]) -> None:
    for node in layout.nodes:
        try:
            check_node_config({**node_overrides(layout, node, base), **overrides})
        except ConfigError as exc:
            raise UsageError(f"node {node.node_id} would not start: {exc}") from None


def _check_not_running(base: Path, layout: Layout) -> None:
    pid = live_pid(base / SUPERVISOR_PID_FILE)
    if pid is not None:
        raise CliError(f"a cluster is already running from {base} (pid {pid}); "
                       f"stop it first: moldau cluster stop --dir {base}")
    for node in layout.nodes:
        pid = live_pid(node.pid_path(base))
        if pid is not None:
            raise CliError(f"node {node.node_id} of {base} is still running (pid {pid}); "
                           f"stop it first: moldau cluster stop --dir {base}")
    taken = [port for port in layout.ports if not port_free(port)]
    if taken:
        raise CliError(f"port{'s' if len(taken) > 1 else ''} {', '.join(map(str, taken))} of the cluster in {base} "
                       "already in use")


def _print_started(base: Path, layout: Layout, supervisor: Supervisor) -> None:
    rows = []
    for node in layout.nodes:
        proc = supervisor.procs[node.node_id]
        pid: object = proc.pid if proc.poll() is None else f"exited ({proc.returncode})"
        rows.append([node.node_id, ",".join(node.roles), node.kafka_address, node.controller_address, pid,
                     str(node.log_path(base))])
    print(f"cluster {layout.cluster_id}: {layout.describe()} in {base}")
    print(format_table(rows, ["NODE", "ROLES", "KAFKA", "CONTROLLER", "PID", "LOG"]))
    print(f"bootstrap servers: {layout.bootstrap}")
    print(f"controller quorum voters: {layout.voters}")
    print(f"running; stop with Ctrl-C or: moldau cluster stop --dir {base}", flush=True)


# --------------------------------------------------------------------------- `cluster status`


def add_status(actions: SubParsers[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser("status", help="show which nodes of a cluster directory are running",
                                description="Show the nodes of a cluster directory; exit status 1 unless "
                                            "every node runs and accepts connections.")
    _add_dir(parser)
    parser.set_defaults(func=_usage_guard(status, parser))


def _existing_layout(base: Path) -> Layout:
    layout = read_layout(base)
    if layout is None:
        raise UsageError(f"{base} is not a cluster directory (no {LAYOUT_FILE}); create one with "
                         "moldau cluster start --nodes N --dir DIR")
    return layout


def _node_state(base: Path, node: Node) -> tuple[int | None, str, bool]:
    """(live pid, state text, healthy) of one node."""
    pid = live_pid(node.pid_path(base))
    if pid is None:
        stale = node.pid_path(base).exists()
        return None, "stopped (stale pid file)" if stale else "stopped", False
    closed = [port for port in node.ports if not port_open(port)]
    if closed:
        return pid, f"running, not accepting connections on {', '.join(map(str, closed))}", False
    return pid, "running, accepting connections", True


def status(args: argparse.Namespace) -> int:
    base: Path = args.dir.resolve()
    layout = _existing_layout(base)
    rows, healthy = [], True
    for node in layout.nodes:
        pid, state, ok = _node_state(base, node)
        healthy &= ok
        rows.append([node.node_id, ",".join(node.roles), node.kafka_address, node.controller_address, pid, state])
    supervisor = live_pid(base / SUPERVISOR_PID_FILE)
    print(f"cluster {layout.cluster_id}: {layout.describe()} in {base}")
    print(format_table(rows, ["NODE", "ROLES", "KAFKA", "CONTROLLER", "PID", "STATE"]))
    print(f"bootstrap servers: {layout.bootstrap}")
    print(f"supervisor (moldau cluster start): {'pid ' + str(supervisor) if supervisor else 'not running'}")
    return 0 if healthy else 1


# --------------------------------------------------------------------------- `cluster stop`


def add_stop(actions: SubParsers[argparse.ArgumentParser]) -> None:
    parser = actions.add_parser("stop", help="stop a cluster started by `moldau cluster start` elsewhere",
                                description="SIGTERM the `moldau cluster start` process of DIR and wait for it; "
                                            "nodes left without it are stopped directly.")
    _add_dir(parser)
    parser.add_argument("--timeout", type=float, default=STOP_TIMEOUT_S + 15, metavar="S",
                        help=f"seconds to wait before giving up (default {STOP_TIMEOUT_S + 15:.0f})")
    parser.set_defaults(func=_usage_guard(stop, parser))


def _wait_gone(pids: Sequence[int], timeout_s: float) -> list[int]:
    """Wait until none of `pids` is alive; return those still alive at the timeout."""
    deadline = time.monotonic() + timeout_s
    alive = [pid for pid in pids if pid_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if pid_alive(pid)]
    return alive


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def stop(args: argparse.Namespace) -> int:
    base: Path = args.dir.resolve()
    layout = _existing_layout(base)
    supervisor = live_pid(base / SUPERVISOR_PID_FILE)
    if supervisor is not None:
        _signal(supervisor, signal.SIGTERM)
        if _wait_gone([supervisor], args.timeout):
            raise CliError(f"moldau cluster start (pid {supervisor}) still runs after {args.timeout:.0f} s")
        print(f"stopped the cluster in {base} (supervisor pid {supervisor})")
    orphans = {node.node_id: pid for node in layout.nodes if (pid := live_pid(node.pid_path(base))) is not None}
    if orphans:
        _stop_orphans(base, layout, orphans, args.timeout)
    elif supervisor is None:
        print(f"no cluster is running in {base}")
    return 0


def _stop_orphans(base: Path, layout: Layout, orphans: Mapping[int, int], timeout_s: float) -> None:
    """Stop nodes whose supervisor is gone: SIGTERM, then SIGKILL after the timeout."""
    for pid in orphans.values():
        _signal(pid, signal.SIGTERM)
    for pid in _wait_gone(list(orphans.values()), timeout_s):
        _signal(pid, signal.SIGKILL)
    _wait_gone(list(orphans.values()), 5.0)
    for node_id, pid in orphans.items():
        layout.node(node_id).pid_path(base).unlink(missing_ok=True)
        print(f"stopped node {node_id} (pid {pid}), which ran without its supervisor")


# --------------------------------------------------------------------------- registration

def register(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add `cluster start|status|stop` to the top-level parser."""
    parser = subparsers.add_parser("cluster", help="run a local multi-node cluster",
                                   description="Run a local multi-node cluster (KRaft-style configuration).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_start(actions)
    add_status(actions)
    add_stop(actions)
