"""The layout of a local cluster and the configuration of each of its nodes, for `moldau cluster`.

A layout is the cluster id and its nodes (id, roles, loopback ports); `plan_roles` and `plan_layout` make one,
`write_layout` and `read_layout` keep it in `DIR/cluster.properties` so that a later start reuses it.
`node_overrides` turns one node into Kafka's KRaft settings and `server_command` into its `moldau server`
command line: the test harness (`tests/support/cluster.py`) and the cluster benchmark use them too, so every
multi-node process runs with the same settings.
"""

from __future__ import annotations

import base64
import logging
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from moldau.cli.common import CliError, plural
from moldau.config import BrokerConfig, parse_properties

LAYOUT_FILE = "cluster.properties"
NODE_PID_FILE = "pid"
SERVER_LOG = "server.log"
HOST = "127.0.0.1"
KAFKA_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"
BROKER, CONTROLLER = "broker", "controller"
COMBINED = (BROKER, CONTROLLER)
MAX_NODES = 64


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
        # Any free port: one registry port per node would need the layout to reserve it. The node's log says
        # where its registry listens, and every node serves the same registry.
        config["schema.registry.listeners"] = f"http://{HOST}:0"
    # Every node serves /metrics; on any free port too, which its log names.
    config["console.listeners"] = f"http://{HOST}:0"
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

