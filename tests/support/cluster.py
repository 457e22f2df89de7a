"""A local multi-node cluster for tests: one real `moldau server` process per node, on free loopback ports.

The nodes get the same configuration as `moldau cluster start` (`moldau.cli.cluster.node_overrides`): KRaft
names, a PLAINTEXT listener on broker nodes, a CONTROLLER listener on controller nodes, one cluster id.

    with LocalCluster(tmp_path, nodes=3) as cluster:          # starts every node, stops them all on exit
        leader = cluster.active_controller(timeout_s=30)       # QuorumInfo once the controllers agree
        cluster.node(leader.leader_id).kill()
        cluster.wait_until(lambda: ..., 10, "a new leader")

Per node (`cluster.node(i)` or `cluster[i]`): start, stop (SIGTERM), kill (SIGKILL), pause (SIGSTOP), resume
(SIGCONT), restart, is_running, log_tail. `close()` resumes paused nodes and stops everything, so no process
outlives a test. Nothing here needs pytest; `bench/cluster.py` uses it too.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from moldau.cli.cluster import (
    Layout,
    Node,
    node_overrides,
    plan_layout,
    plan_roles,
    server_command,
    spawn_node,
)
from moldau.net.ports import free_ports
from tests.support.broker_process import signal_and_wait
from tests.support.polling import wait_until
from tests.support.raw_client import RawClient

T = TypeVar("T")

METADATA_TOPIC = "__cluster_metadata"
DESCRIBE_QUORUM = 55
API_VERSIONS = 18
# DescribeQuorum versions kio can encode; the newest one both sides know is used.
DESCRIBE_QUORUM_VERSIONS = (0, 2)
METADATA_VERSION = 12
# A follower's answer on the controller listener, as in Kafka: it names the leader it knows, without states.
NOT_LEADER_OR_FOLLOWER = 6
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


class QuorumError(Exception):
    """A node could not answer DescribeQuorum: unreachable, API not supported, or an error code."""


class WaitTimeout(AssertionError):
    """`wait_until` gave up; the message says what was awaited and shows each node's log tail."""


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One voter or observer as the answering node sees it (timestamps are -1 before v1 or when unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    """A DescribeQuorum answer for the metadata partition; `node_id` is the node that answered.

    Only the leader answers in full (`error_code` 0). A follower answers NOT_LEADER_OR_FOLLOWER (6), as
    Kafka's controllers do, with the leader id and epoch it knows and no replica states.
    """

    node_id: int
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]
    error_code: int = 0
    error_message: str | None = None

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0

    @property
    def from_leader(self) -> bool:
        """True if the answering node is the leader (a full answer)."""
        return self.error_code == 0 and self.leader_id == self.node_id


# --------------------------------------------------------------------------- requests


def _code(value: Any) -> int:
    return int(getattr(value, "value", value))


def _api_range(client: RawClient, api_key: int) -> tuple[int, int] | None:
    from kio.schema.api_versions.v0.request import ApiVersionsRequest

    response = client.request(ApiVersionsRequest())
    if _code(response.error_code):
        raise QuorumError(f"ApiVersions failed with error {_code(response.error_code)}")
    for api in response.api_keys:
        if int(api.api_key) == api_key:
            return int(api.min_version), int(api.max_version)
    return None


def _describe_quorum_request(version: int) -> Any:
    from moldau.protocol import codec

    schema = sys.modules[codec.api_schema(DESCRIBE_QUORUM, version).request_type.__module__]
    partition = schema.PartitionData(partition_index=0)
    return schema.DescribeQuorumRequest(topics=(schema.TopicData(topic_name=METADATA_TOPIC, partitions=(partition,)),))


def _replica(state: Any) -> ReplicaState:
    return ReplicaState(int(state.replica_id), int(state.log_end_offset),
                        int(getattr(state, "last_fetch_timestamp", -1)),
                        int(getattr(state, "last_caught_up_timestamp", -1)))


def _quorum_info(node_id: int, response: Any) -> QuorumInfo:
    if _code(response.error_code):
        raise QuorumError(f"node {node_id}: DescribeQuorum error {_code(response.error_code)} "
                          f"{getattr(response, 'error_message', None) or ''}".rstrip())
    for topic in response.topics:
        for partition in topic.partitions if topic.topic_name == METADATA_TOPIC else ():
            code = _code(partition.error_code)
            message = getattr(partition, "error_message", None)
            if code not in (0, NOT_LEADER_OR_FOLLOWER):
                raise QuorumError(f"node {node_id}: DescribeQuorum partition error {code} {message or ''}".rstrip())
            return QuorumInfo(node_id, int(partition.leader_id), int(partition.leader_epoch),
                              int(partition.high_watermark), tuple(_replica(s) for s in partition.current_voters),
                              tuple(_replica(s) for s in partition.observers), code, message)
    raise QuorumError(f"node {node_id}: DescribeQuorum answer has no {METADATA_TOPIC} partition 0")


def describe_quorum_at(address: str, node_id: int = -1, timeout_s: float = 5.0) -> QuorumInfo:
    """Send DescribeQuorum (API key 55) to a controller listener `host:port`.

    Returns the answer of a leader or of a follower (see QuorumInfo); raises QuorumError otherwise.
    """
    try:
        with RawClient(address, timeout_s) as client:
            supported = _api_range(client, DESCRIBE_QUORUM)
            if supported is None:
                raise QuorumError(f"node {node_id} at {address} does not support DescribeQuorum (API key 55): "
                                  "the controller quorum is not running there")
            version = min(supported[1], DESCRIBE_QUORUM_VERSIONS[1])
            if version < max(supported[0], DESCRIBE_QUORUM_VERSIONS[0]):
                raise QuorumError(f"node {node_id} supports DescribeQuorum v{supported[0]}-{supported[1]} only")
            return _quorum_info(node_id, client.request(_describe_quorum_request(version)))
    except (OSError, ConnectionError) as exc:
        raise QuorumError(f"node {node_id} at {address}: {type(exc).__name__}: {exc}") from exc


def metadata_at(address: str, topics: Iterable[str] | None = None, timeout_s: float = 5.0) -> Any:
    """A Metadata v12 answer (kio's MetadataResponse) from the broker at `host:port`; all topics if None."""
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
    from kio.schema.types import TopicName

    wanted = None if topics is None else tuple(MetadataRequestTopic(topic_id=None, name=TopicName(t)) for t in topics)
    request = MetadataRequest(topics=wanted, allow_auto_topic_creation=False,
                              include_topic_authorized_operations=False)
    with RawClient(address, timeout_s) as client:
        return client.request(request)


# --------------------------------------------------------------------------- one node


class ClusterNode:
    """One node's server process; its directory is `base/node-<id>` (data in `data/`, output in `server.log`)."""

    def __init__(self, spec: Node, layout: Layout, base: Path, overrides: Mapping[str, str]) -> None:
        self.spec = spec
        self.node_id = spec.node_id
        self.roles = spec.roles
        self.kafka_port = spec.kafka_port
        self.controller_port = spec.controller_port
        self.log_path = spec.log_path(base)
        self.data_dir = spec.data_dir(base)
        self.overrides = {**node_overrides(layout, spec, base), **overrides}
        if spec.is_broker and self.overrides.get("schema.registry.listeners", "").endswith(":0"):
            # A fixed free port rather than any port: tests need the URL, and it stays the same across restarts.
            self.overrides["schema.registry.listeners"] = f"http://127.0.0.1:{free_ports(1)[0]}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self.starts = 0
        self.extra_args: list[str] = []  # given to `moldau server` besides the overrides

    def __repr__(self) -> str:
        return f"ClusterNode({self.node_id}, {','.join(self.roles)}, running={self.is_running})"

    @property
    def registry_url(self) -> str | None:
        """The node's schema registry, for a broker node with its listener on."""
        return self.overrides.get("schema.registry.listeners") or None

    @property
    def kafka_address(self) -> str | None:
        return self.spec.kafka_address

    @property
    def controller_address(self) -> str | None:
        return self.spec.controller_address

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def is_running(self) -> bool:
        """True while the process exists (a paused node is running, only stopped by SIGSTOP)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def start(self, timeout_s: float = START_TIMEOUT_S, wait: bool = True) -> None:
        """Start the process; with `wait`, return once all its ports accept connections."""
        if self.is_running:
            raise RuntimeError(f"node {self.node_id} is already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self.paused = False
        self.proc = spawn_node([*server_command(self.overrides), *self.extra_args], self.log_path,
                               f"start #{self.starts}")
        if wait:
            self.wait_listening(timeout_s)

    def listening(self) -> bool:
        """True if every port of the node accepts connections."""
        for port in self.spec.ports:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    pass
            except OSError:
                return False
        return True

    def wait_listening(self, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.is_running:
                raise RuntimeError(f"node {self.node_id} exited with {self.exit_code}:\n{self.log_tail()}")
            if self.listening():
                return
            time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} did not listen within {timeout_s}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (after SIGCONT if paused) and wait: a clean shutdown. Returns the exit code.

        Raises RuntimeError (after SIGKILL) if the node ignores SIGTERM for `timeout_s`.
        """
        self.resume()
        return self._signal_and_wait(signal.SIGTERM, timeout_s)

    def kill(self) -> int:
        """SIGKILL: a crash, with no chance to flush or close connections."""
        return self._signal_and_wait(signal.SIGKILL, 10.0)

    def pause(self) -> None:
        """SIGSTOP: the process freezes, its sockets stay open (a hung node, not a dead one)."""
        self._require_running().send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT a paused node; nothing happens otherwise."""
        if self.paused and self.is_running:
            self._require_running().send_signal(signal.SIGCONT)
        self.paused = False

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.stop()
        self.start(timeout_s)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def send_term(self) -> None:
        """SIGTERM without waiting (after SIGCONT if paused), for stopping many nodes at once."""
        self.resume()
        if self.is_running:
            self._require_running().send_signal(signal.SIGTERM)

    def _require_running(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"node {self.node_id} is not running")
        return self.proc

    def _signal_and_wait(self, sig: int, timeout_s: float) -> int:
        if self.proc is None:
            return 0
        try:
            return signal_and_wait(self.proc, sig, timeout_s, f"node {self.node_id}")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{self.log_tail()}") from None
        finally:
            self.paused = False

    def cleanup(self) -> None:
        """SIGKILL if still running; never raises."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGCONT)
                self.proc.kill()
            self.proc.wait()
        self.paused = False


# --------------------------------------------------------------------------- the cluster


class LocalCluster:
    """`nodes` combined nodes (ids 1..N), or `controllers` controller-only (ids 1..C) and `brokers`
    broker-only nodes (ids C+1..C+B), each a real server process on free loopback ports.

    `overrides` go to every node, `node_overrides[id]` to one node; both win over the generated config.
    `layout` (from `plan_layout`) fixes ports and cluster id in advance, for callers that must know them
    before the nodes exist; its roles win over `nodes`/`controllers`/`brokers`.
    Used as a context manager it starts every node on entry and stops them all on exit.
    """

    def __init__(
        self,
        base_dir: Path,
        nodes: int | None = 3,
        *,
        controllers: int | None = None,
        brokers: int | None = None,
        overrides: Mapping[str, str] | None = None,
        node_overrides: Mapping[int, Mapping[str, str]] | None = None,
        layout: Layout | None = None,
    ) -> None:
        self.base_dir = base_dir
        if layout is None:
            separate = controllers is not None or brokers is not None
            roles = plan_roles(None if separate else nodes, controllers, brokers)
            layout = plan_layout(roles, free_ports(sum(len(r) for r in roles)))
        self.layout = layout
        per_node = node_overrides or {}
        self.nodes: dict[int, ClusterNode] = {}
        for spec in self.layout.nodes:
            config = {**(overrides or {}), **per_node.get(spec.node_id, {})}
            self.nodes[spec.node_id] = ClusterNode(spec, self.layout, base_dir, config)

    # ---- access

    @property
    def cluster_id(self) -> str:
        return self.layout.cluster_id

    def node(self, node_id: int) -> ClusterNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise KeyError(f"no node {node_id}; nodes are {sorted(self.nodes)}") from None

    def __getitem__(self, node_id: int) -> ClusterNode:
        return self.node(node_id)

    @property
    def brokers(self) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node.spec.is_broker]

    @property
    def controllers(self) -> list[ClusterNode]:
        return [node for node in self.nodes.values() if node.spec.is_controller]

    @property
    def bootstrap(self) -> str:
        """Comma-separated kafka addresses of every broker-role node (running or not)."""
        return self.layout.bootstrap

    @property
    def controller_addresses(self) -> dict[int, str]:
        """Node id -> `host:port` of the CONTROLLER listener, for every controller-role node."""
        return {node.node_id: str(node.controller_address) for node in self.controllers}

    @property
    def bootstrap_controllers(self) -> str:
        """Comma-separated controller addresses (what Kafka's `--bootstrap-controller` takes)."""
        return ",".join(self.controller_addresses.values())

    @property
    def voters(self) -> str:
        return self.layout.voters

    # ---- lifecycle

    def start(self, timeout_s: float = START_TIMEOUT_S) -> LocalCluster:
        """Start every node that is not running, all at once, and wait until each one listens."""
        stopped = [node for node in self.nodes.values() if not node.is_running]
        for node in stopped:
            node.start(wait=False)
        deadline = time.monotonic() + timeout_s
        for node in stopped:
            node.wait_listening(max(0.1, deadline - time.monotonic()))
        return self

    def close(self, timeout_s: float = STOP_TIMEOUT_S) -> dict[int, int | None]:
        """Stop every node (broker-only nodes first, then the rest), SIGKILL what ignores SIGTERM for
        `timeout_s`. Returns each node's exit code (None if it was never started). Never raises."""
        first = [node for node in self.nodes.values() if not node.spec.is_controller]
        rest = [node for node in self.nodes.values() if node.spec.is_controller]
        for wave in (first, rest):
            self._stop_wave(wave, timeout_s)
        return {node_id: node.exit_code for node_id, node in self.nodes.items()}

    def _stop_wave(self, nodes: list[ClusterNode], timeout_s: float) -> None:
        for node in nodes:
            with contextlib.suppress(Exception):
                node.send_term()
        deadline = time.monotonic() + timeout_s
        for node in nodes:
            if node.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.proc.wait(max(0.0, deadline - time.monotonic()))
            node.cleanup()

    def __enter__(self) -> LocalCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- quorum

    def describe_quorum(self, node_id: int, timeout_s: float = 5.0) -> QuorumInfo:
        """DescribeQuorum sent to this node's CONTROLLER listener: the leader answers in full, a follower with
        error_code 6 and the leader it knows (see QuorumInfo). Raises QuorumError."""
        node = self.node(node_id)
        if node.controller_address is None:
            raise ValueError(f"node {node_id} is not a controller (roles {','.join(node.roles)})")
        return describe_quorum_at(node.controller_address, node_id, timeout_s)

    def quorum_views(self, timeout_s: float = 2.0) -> dict[int, QuorumInfo | QuorumError]:
        """Each running, unpaused controller's DescribeQuorum answer, or the error it gave."""
        views: dict[int, QuorumInfo | QuorumError] = {}
        for node in self.controllers:
            if node.is_running and not node.paused:
                try:
                    views[node.node_id] = self.describe_quorum(node.node_id, timeout_s)
                except QuorumError as exc:
                    views[node.node_id] = exc
        return views

    def agreed_leader(self) -> QuorumInfo | None:
        """The leader's own view if every running, unpaused controller names the same leader and epoch,
        and that leader is one of them; None otherwise."""
        views = self.quorum_views()
        answers = [view for view in views.values() if isinstance(view, QuorumInfo)]
        if not answers or len(answers) != len(views):
            return None
        if len({(view.leader_id, view.leader_epoch) for view in answers}) != 1:
            return None
        leader = views.get(answers[0].leader_id)
        return leader if isinstance(leader, QuorumInfo) and leader.from_leader else None

    def active_controller(self, timeout_s: float = 30.0) -> QuorumInfo:
        """Poll the running controllers until they agree on a leader; the leader's view (its `leader_id`).

        Raises WaitTimeout with every controller's last answer and each node's log tail."""
        last: dict[int, QuorumInfo | QuorumError] = {}

        def agreed() -> QuorumInfo | None:
            nonlocal last
            found = self.agreed_leader()
            if found is None:
                last = self.quorum_views()
            return found

        def describe() -> str:
            views = "; ".join(f"node {node_id}: {_view_text(view)}" for node_id, view in sorted(last.items()))
            return f"the controllers to agree on a leader (last answers: {views or 'no controller running'})"

        return self.wait_until(agreed, timeout_s, describe)

    # ---- waiting

    def wait_until(self, predicate: Callable[[], T | None], timeout_s: float, what: str | Callable[[], str],
                   interval_s: float = 0.1) -> T:
        """Call `predicate` until it returns something truthy, and return that.

        An exception from `predicate` counts as "not yet" and is shown if time runs out. On timeout, raise
        WaitTimeout naming `what` (a string, or a function giving one), with each node's state and log tail.
        """
        return wait_until(predicate, timeout_s, what, interval_s, self.report, WaitTimeout)

    def report(self, lines: int = 25) -> str:
        """Each node's state and the tail of its log, for failure messages."""
        parts = []
        for node in self.nodes.values():
            state = "paused" if node.paused else "running" if node.is_running else f"exited ({node.exit_code})"
            parts.append(f"--- node {node.node_id} ({','.join(node.roles)}, {state}) {node.log_path}\n"
                         f"{node.log_tail(lines)}")
        return "\n".join(parts)


def _view_text(view: QuorumInfo | QuorumError) -> str:
    if isinstance(view, QuorumError):
        return f"error: {view}"
    role = "leader" if view.from_leader else "follower" if view.error_code else "answered"
    return f"{role}, leader {view.leader_id} epoch {view.leader_epoch} hw {view.high_watermark}"
