"""`moldau cluster`: run a local multi-node cluster in the foreground, show its state, stop it.

`start` lays a cluster out in a directory (node ids, roles, ports, cluster id, remembered in
`DIR/cluster.properties` so that a later `start` reuses them and the data dirs stay valid), starts one
`moldau server` process per node with Kafka's KRaft settings, and supervises them until SIGINT/SIGTERM.
`status` and `stop` work on a cluster started from another terminal, through the pid files it writes.
`unregister --id N` removes a shut-down broker's registration from any cluster, through a broker
(UnregisterBroker).

This module holds the three commands. The node layout and the per-node configuration (`plan_layout`,
`node_overrides`, `server_command`, ...) are in `moldau.cli.cluster_layout`, the processes (`spawn_node`, the
port and pid probes, the `Supervisor`) in `moldau.cli.cluster_processes`; both are re-exported here, where the
test harness (`tests/support/cluster.py`) and the cluster benchmark import them from.
"""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from kio.schema.types import BrokerId
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest

from moldau.cli import raw_request
from moldau.cli.cluster_layout import (
    HOST,
    LAYOUT_FILE,
    Layout,
    Node,
    UsageError,
    base_ports,
    check_node_config,
    node_overrides,
    plan_layout,
    plan_roles,
    ports_needed,
    read_layout,
    server_command,
    write_layout,
)
from moldau.cli.cluster_processes import (
    Supervisor,
    live_pid,
    pid_alive,
    port_free,
    port_open,
    read_pid,
    signal_pid,
    spawn_node,
    wait_gone,
)
from moldau.cli.common import CliError, add_action
from moldau.cli.output import add_output_option, emit, records
from moldau.cli.table import format_table
from moldau.config import ConfigError, parse_overrides
from moldau.net.ports import free_ports
from moldau.security.sasl.scram_bootstrap import ScramSpecError, parse_add_scram

# The commands, and the layout and process helpers that other code has always imported from here.
__all__ = [
    "HOST", "LAYOUT_FILE", "READY_TIMEOUT_S", "STOP_TIMEOUT_S", "SUPERVISOR_PID_FILE", "Layout", "Node", "Supervisor",
    "UsageError", "add_start", "add_status", "add_stop", "node_overrides", "pid_alive", "plan_layout", "plan_roles",
    "read_layout", "read_pid", "register", "server_command", "spawn_node", "start", "status", "stop", "write_layout",
]

SUPERVISOR_PID_FILE = "cluster.pid"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
USAGE_EXIT = 2

SubParsers = argparse._SubParsersAction  # argparse exposes no public name for it
_Handler = Callable[[argparse.Namespace], int]


# --------------------------------------------------------------------------- `cluster start`


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
    parser.add_argument("--add-scram", action="append", default=[], metavar="SPEC",
                        help="a SCRAM user to write into the new cluster, as `moldau server --add-scram` takes it "
                             "(given to the controller nodes; repeatable; no effect once the cluster exists)")
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
    scram = _scram_args(args.add_scram)
    layout = _layout_for(base, args)
    _check_configs(base, layout, overrides)
    _check_not_running(base, layout)
    write_layout(base, layout)
    supervisor = Supervisor(base, layout, overrides, args.stop_timeout, controller_args=scram)
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


def _scram_args(specs: Sequence[str]) -> list[str]:
    """`--add-scram SPEC` for each spec, checked here so a malformed one stops `start` before any node does."""
    for spec in specs:
        try:
            parse_add_scram(spec)
        except ScramSpecError as exc:
            raise UsageError(str(exc)) from None
    return [arg for spec in specs for arg in ("--add-scram", spec)]


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
    add_output_option(parser)
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
    headers = ["NODE", "ROLES", "KAFKA", "CONTROLLER", "PID", "STATE"]
    document = {"cluster_id": layout.cluster_id, "dir": str(base), "bootstrap_servers": layout.bootstrap,
                "supervisor_pid": supervisor, "healthy": healthy, "nodes": records(rows, headers)}
    emit(args, document, lambda: "\n".join([
        f"cluster {layout.cluster_id}: {layout.describe()} in {base}", format_table(rows, headers),
        f"bootstrap servers: {layout.bootstrap}",
        f"supervisor (moldau cluster start): {'pid ' + str(supervisor) if supervisor else 'not running'}"]))
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

def stop(args: argparse.Namespace) -> int:
    base: Path = args.dir.resolve()
    layout = _existing_layout(base)
    supervisor = live_pid(base / SUPERVISOR_PID_FILE)
    if supervisor is not None:
        signal_pid(supervisor, signal.SIGTERM)
        if wait_gone([supervisor], args.timeout):
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
        signal_pid(pid, signal.SIGTERM)
    for pid in wait_gone(list(orphans.values()), timeout_s):
        signal_pid(pid, signal.SIGKILL)
    wait_gone(list(orphans.values()), 5.0)
    for node_id, pid in orphans.items():
        layout.node(node_id).pid_path(base).unlink(missing_ok=True)
        print(f"stopped node {node_id} (pid {pid}), which ran without its supervisor")


# --------------------------------------------------------------------------- `cluster unregister`

def add_unregister(actions: SubParsers[argparse.ArgumentParser]) -> None:
    parser = add_action(actions, "unregister", unregister,
                        "remove a shut-down broker's registration from the cluster (UnregisterBroker)")
    parser.add_argument("--id", type=int, required=True, dest="broker_id", help="the broker's node id")


def unregister(args: argparse.Namespace) -> int:
    response = raw_request.call(args.bootstrap_server, UnregisterBrokerRequest(broker_id=BrokerId(args.broker_id)))
    raw_request.check(response.error_code, response.error_message)
    print(f"Broker {args.broker_id} is no longer registered.")
    return 0


# --------------------------------------------------------------------------- registration

def register(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add `cluster start|status|stop|unregister` to the top-level parser."""
    parser = subparsers.add_parser("cluster", help="run a local multi-node cluster",
                                   description="Run a local multi-node cluster (KRaft-style configuration).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_start(actions)
    add_status(actions)
    add_stop(actions)
    add_unregister(actions)
