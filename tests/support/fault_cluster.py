"""A local cluster whose every node-to-node link runs through a `ProxyMesh`, so tests can partition it.

`FaultCluster` is a `LocalCluster` of N combined (broker + controller) nodes configured with Kafka's own
configs only:

- Controller traffic. Node i's `controller.quorum.voters` names itself at its real CONTROLLER port and each
  other node j at the proxy of link i->j (service "controller"). Brokers reach the controller through the
  same addresses (voter ids agree everywhere; only the addresses differ per node).
- Replication traffic. Every node has a CLIENT listener (tests and clients connect there directly, never
  through a proxy), a CONTROLLER listener, and one listener per source node, FROM1..FROMn. Node j advertises
  its FROMi listener at the proxy of link i->j (service "replication") and its own FROMj at the real port;
  node i sets `inter.broker.listener.name=FROMi`, so a follower on node i reaches leader j through the
  proxy i->j. Metadata answers each client with the endpoints of the listener it connected to, so clients
  on CLIENT see CLIENT addresses. Node i also lists FROMi first among its listeners: a broker without
  `inter.broker.listener.name` support falls back to its first non-controller listener, which is the same.

Every listener and proxy is on 127.0.0.1 on a free port. Per node, kill/pause/resume are `LocalCluster`'s
(`cluster[i].kill()` ...); start nodes with `start_node(i)` (or `start()`), which work from any thread:
node processes are spawned with PR_SET_PDEATHSIG, which Linux ties to the spawning *thread*, so a node started
from a short-lived thread (the nemesis) would get SIGTERM when that thread ends. Starts therefore run on one
spawner thread that lives as long as the cluster. `heal()` undoes every fault at once.

    with FaultCluster(tmp_path, nodes=3) as cluster:
        leader = cluster.active_controller().leader_id
        cut = cluster.mesh.isolate(leader)
        cluster.wait_until(lambda: cluster.agreed_leader_among(cluster.others(leader)), 20, "a new controller")
        cluster.mesh.heal(cut)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from moldau.cli.cluster import HOST, plan_layout, plan_roles
from moldau.net.ports import free_ports
from tests.support.cluster import START_TIMEOUT_S, LocalCluster, QuorumError, QuorumInfo, metadata_at
from tests.support.proxy import Address, ProxyMesh
from tests.support.replicated import FAST_FAILOVER

CONTROLLER_SERVICE = "controller"
REPLICATION_SERVICE = "replication"
CLIENT_LISTENER = "CLIENT"
CONTROLLER_LISTENER = "CONTROLLER"
INTER_BROKER_LISTENER_CONFIG = "inter.broker.listener.name"

# Short timeouts so that elections, fencing and failover happen within a few seconds (as in the quorum tests).
FAST = FAST_FAILOVER


def from_listener(source: int) -> str:
    """The name of the listener that carries traffic from node `source`."""
    return f"FROM{source}"


def inter_broker_listener_supported() -> bool:
    """True if the broker knows `inter.broker.listener.name` (an unknown config is only warned about)."""
    from moldau.config import BROKER_CONFIGS

    return INTER_BROKER_LISTENER_CONFIG in BROKER_CONFIGS


class FaultCluster(LocalCluster):
    """`nodes` combined nodes (ids 1..N) wired through a proxy mesh (see the module docstring).

    `overrides` go to every node (over `FAST` and the generated config), `node_overrides[id]` to one node.
    `inter_broker_listener`: set `inter.broker.listener.name=FROMi` on node i; None (the default) sets it
    when the broker knows that config.
    """

    def __init__(
        self,
        base_dir: Path,
        nodes: int = 3,
        *,
        overrides: Mapping[str, str] | None = None,
        node_overrides: Mapping[int, Mapping[str, str]] | None = None,
        inter_broker_listener: bool | None = None,
    ) -> None:
        if nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        ids = list(range(1, nodes + 1))
        ports = free_ports(2 * nodes + nodes * nodes)
        layout = plan_layout(plan_roles(nodes), ports[: 2 * nodes])
        spare = iter(ports[2 * nodes:])
        # listener_ports[dest][source]: node dest's real port for the FROM<source> listener
        self.listener_ports: dict[int, dict[int, int]] = {dest: {source: next(spare) for source in ids}
                                                           for dest in ids}
        self.inter_broker_listener = (inter_broker_listener_supported() if inter_broker_listener is None
                                      else inter_broker_listener)
        targets: dict[int, dict[str, Address | Mapping[int, Address]]] = {}
        for spec in layout.nodes:
            assert spec.controller_port is not None
            targets[spec.node_id] = {
                CONTROLLER_SERVICE: (HOST, spec.controller_port),
                REPLICATION_SERVICE: {source: (HOST, port)
                                      for source, port in self.listener_ports[spec.node_id].items()},
            }
        self.mesh = ProxyMesh(targets)
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix="node-spawner")
        try:
            per_node = {}
            for spec in layout.nodes:
                generated = self._node_config(spec.node_id, layout.nodes)
                per_node[spec.node_id] = {**generated, **FAST, **(overrides or {}),
                                          **(node_overrides or {}).get(spec.node_id, {})}
            super().__init__(base_dir, nodes, node_overrides=per_node, layout=layout)
        except BaseException:
            self.mesh.close()
            self._spawner.shutdown(wait=False)
            raise

    def _node_config(self, node_id: int, specs: Iterable[Any]) -> dict[str, str]:
        specs = list(specs)
        me = next(spec for spec in specs if spec.node_id == node_id)
        ids = [spec.node_id for spec in specs]
        own = from_listener(node_id)
        mine = self.listener_ports[node_id]
        listeners = [f"{own}://{HOST}:{mine[node_id]}", f"{CLIENT_LISTENER}://{HOST}:{me.kafka_port}"]
        listeners += [f"{from_listener(s)}://{HOST}:{mine[s]}" for s in ids if s != node_id]
        listeners.append(f"{CONTROLLER_LISTENER}://{HOST}:{me.controller_port}")
        advertised = [f"{own}://{HOST}:{mine[node_id]}", f"{CLIENT_LISTENER}://{HOST}:{me.kafka_port}"]
        advertised += [f"{from_listener(s)}://{self.mesh.address(s, node_id, REPLICATION_SERVICE)}"
                       for s in ids if s != node_id]
        voters = [f"{node_id}@{HOST}:{me.controller_port}" if spec.node_id == node_id
                  else f"{spec.node_id}@{self.mesh.address(node_id, spec.node_id, CONTROLLER_SERVICE)}"
                  for spec in specs]
        names = [CLIENT_LISTENER, CONTROLLER_LISTENER, *(from_listener(s) for s in ids)]
        config = {
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in names),
            "controller.listener.names": CONTROLLER_LISTENER,
            "controller.quorum.voters": ",".join(voters),
        }
        if self.inter_broker_listener:
            config[INTER_BROKER_LISTENER_CONFIG] = own
        return config

    # ---- lifecycle

    def start(self, timeout_s: float = START_TIMEOUT_S) -> FaultCluster:
        """Start every node that is not running (on the spawner thread) and wait until each one listens."""
        self._spawner.submit(super().start, timeout_s).result()
        return self

    def start_node(self, node_id: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start one node (on the spawner thread) and wait until it listens."""
        self._spawner.submit(self.node(node_id).start, timeout_s).result()

    def close(self, timeout_s: float = 20.0) -> dict[int, int | None]:
        """Stop every node, then the proxies. Never raises."""
        try:
            return super().close(timeout_s)
        finally:
            with contextlib.suppress(Exception):
                self.mesh.close()
            self._spawner.shutdown(wait=False)

    def __enter__(self) -> FaultCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def heal(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Undo every fault: heal every link, resume paused nodes, start stopped ones and wait for them."""
        self.mesh.heal_all()
        for node in self.nodes.values():
            node.resume()
        self.start(timeout_s)

    # ---- views

    @property
    def ids(self) -> list[int]:
        return sorted(self.nodes)

    def others(self, *node_ids: int) -> list[int]:
        return [n for n in self.ids if n not in node_ids]

    def available(self) -> list[int]:
        """Nodes that run and are not paused (they may still be cut off)."""
        return [n for n, node in sorted(self.nodes.items()) if node.is_running and not node.paused]

    def agreed_leader_among(self, node_ids: Iterable[int]) -> QuorumInfo | None:
        """The leader's view if every node of `node_ids` answers DescribeQuorum naming the same leader and
        epoch, and that leader is one of them and answers as leader; None otherwise."""
        views: dict[int, QuorumInfo] = {}
        for node_id in node_ids:
            try:
                views[node_id] = self.describe_quorum(node_id, 2.0)
            except QuorumError:
                return None
        if not views or len({(v.leader_id, v.leader_epoch) for v in views.values()}) != 1:
            return None
        leader = views.get(next(iter(views.values())).leader_id)
        return leader if leader is not None and leader.from_leader else None

    def current_controller(self) -> int | None:
        """The leader of the highest epoch any available node reports (no agreement needed: during a
        partition an isolated old leader may still believe in itself); None if no node names one."""
        best: tuple[int, int] | None = None
        for view in self.quorum_views(1.0).values():
            if isinstance(view, QuorumInfo) and view.has_leader:
                candidate = (view.leader_epoch, view.leader_id)
                best = candidate if best is None or candidate > best else best
        return None if best is None else best[1]

    def metadata(self, topics: Iterable[str] | None = None, prefer: int | None = None,
                 timeout_s: float = 2.0) -> Any:
        """A Metadata answer on the CLIENT listener, from `prefer` (default: the current controller, whose
        image is the freshest) or else the first available node that answers. Raises OSError if none does."""
        order = self.available()
        first = prefer if prefer is not None else self.current_controller()
        if first in order:
            order.remove(first)
            order.insert(0, first)
        error: Exception | None = None
        wanted = None if topics is None else list(topics)
        for node_id in order:
            address = self.node(node_id).kafka_address
            try:
                return metadata_at(str(address), wanted, timeout_s)
            except Exception as exc:
                error = exc
        raise OSError(f"no node answered Metadata: {error}")

    def partition_leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader id (-1 if none) of `topic`, as `metadata` answers; empty if unknown."""
        for found in self.metadata([topic]).topics:
            if found.name == topic and not int(getattr(found.error_code, "value", found.error_code)):
                return {int(p.partition_index): int(p.leader_id) for p in found.partitions}
        return {}

    def wait_stable(self, timeout_s: float = 60.0, topic: str | None = None) -> QuorumInfo:
        """Wait until every node agrees on a controller and (with `topic`) every partition has a live leader."""
        deadline = time.monotonic() + timeout_s
        leader = self.active_controller(timeout_s)
        if topic is not None:
            def led() -> bool:
                leaders = self.partition_leaders(topic)
                return bool(leaders) and all(node in self.nodes for node in leaders.values())

            self.wait_until(led, max(1.0, deadline - time.monotonic()), f"every partition of {topic} to have a leader")
        return leader
