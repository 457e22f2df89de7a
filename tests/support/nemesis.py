"""A seeded nemesis: it injects faults into a `FaultCluster` on a schedule and undoes them later.

Every `interval_s` (the first one after `interval_s`) it draws, from `random.Random(seed)`, a fault and a
target, applies it, and undoes it after a hold time drawn from `hold_s`:

| fault | applied | undone |
|---|---|---|
| kill | SIGKILL the target nodes | start them again |
| pause | SIGSTOP | SIGCONT |
| isolate | cut each target node from every other node, both ways | heal those links |
| partition | cut the target nodes from the rest, both ways | heal |
| one-way | cut the links from the target nodes to the rest, or from the rest to them | heal |

Targets: "leader" (the leader of a random partition of the workload topic, from Metadata), "controller" (the
active controller, from DescribeQuorum), "minority" (a random minority of the nodes), "majority" (a random
majority). Killing or pausing a majority stops the cluster: such a fault starts only once every other fault is
undone, and the next fault waits until it is undone. Other faults may overlap while the nodes they touch
stay a minority; otherwise the older faults are undone first. The same seed draws the same sequence of
choices; which node is "the leader" depends on the run.

Every action goes into the history as a "nemesis" event with its time, fault, target kind and nodes.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.support.fault_cluster import FaultCluster
from tests.support.proxy import Cut
from tests.support.workload import History

FAULTS = ("kill", "pause", "isolate", "partition", "one-way")
TARGETS = ("leader", "controller", "minority", "majority")
PROCESS_FAULTS = ("kill", "pause")
RESTART_TIMEOUT_S = 60.0


@dataclass
class Fault:
    """One applied fault, until undone."""

    number: int
    kind: str
    target: str
    nodes: tuple[int, ...]
    undo_at: float
    cut: Cut | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def stops_majority(self) -> bool:
        return bool(self.detail.get("majority"))


class Nemesis:
    """Injects faults into `cluster` from a background thread (see the module docstring).

    `start()` begins, `stop()` ends the schedule and undoes every fault still applied. `counts` tells how
    many faults of each kind were applied.
    """

    def __init__(self, cluster: FaultCluster, history: History, seed: int, *, topic: str | None = None,
                 interval_s: float = 5.0, hold_s: tuple[float, float] = (1.5, 4.0),
                 faults: Sequence[str] = FAULTS, targets: Sequence[str] = TARGETS) -> None:
        unknown = sorted(set(faults) - set(FAULTS)) + sorted(set(targets) - set(TARGETS))
        if unknown:
            raise ValueError(f"unknown faults or targets: {', '.join(unknown)}")
        self.cluster = cluster
        self.history = history
        self.seed = seed
        self.rng = random.Random(seed)
        self.topic = topic
        self.interval_s = interval_s
        self.hold_s = hold_s
        self.faults = tuple(faults)
        self.targets = tuple(targets)
        self.active: list[Fault] = []
        self.counts: dict[str, int] = {}
        self.errors = 0
        self._numbers = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> Nemesis:
        self.history.event("nemesis", action="schedule", seed=self.seed, interval_s=self.interval_s,
                           hold_s=list(self.hold_s), faults=list(self.faults), targets=list(self.targets))
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the schedule and undo every fault still applied (also if the thread died)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(RESTART_TIMEOUT_S * 2)
        while self.active:
            self._undo(self.active[0])
        self.history.event("nemesis", action="stopped", counts=dict(self.counts))

    def __enter__(self) -> Nemesis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the schedule

    def _run(self) -> None:
        next_fault = time.monotonic() + self.interval_s
        while not self._stop.is_set():
            now = time.monotonic()
            for fault in [f for f in self.active if f.undo_at <= now]:
                self._undo(fault)
            if now >= next_fault and not any(f.stops_majority for f in self.active):
                next_fault = now + self.interval_s
                try:
                    self.step()
                except Exception as exc:  # a fault that cannot be applied is logged, the schedule goes on
                    self.errors += 1
                    self.history.event("nemesis", action="error", error=f"{type(exc).__name__}: {exc}")
            self._stop.wait(0.05)

    def step(self) -> Fault | None:
        """Draw and apply one fault now (the schedule calls this; tests may too)."""
        kind = self.rng.choice(self.faults)
        target = self.rng.choice(self.targets)
        nodes = self._resolve(target)
        size = len(self.cluster.ids)
        majority = kind in PROCESS_FAULTS and len(nodes) > size // 2
        affected = set(nodes) if kind in PROCESS_FAULTS or len(nodes) <= size // 2 else \
            set(self.cluster.ids) - set(nodes)
        # A majority fault runs alone; otherwise undo the oldest faults until the touched nodes are a minority.
        while self.active and (majority or any(f.stops_majority for f in self.active) or
                               len(affected.union(*(self._affected(f) for f in self.active))) > (size - 1) // 2):
            self._undo(self.active[0])
        if kind in PROCESS_FAULTS:
            nodes = tuple(n for n in nodes if n in self.cluster.available())
            if not nodes:
                self.history.event("nemesis", action="skip", fault=kind, target=target, reason="no node available")
                return None
        return self._apply(kind, target, nodes, majority)

    def _affected(self, fault: Fault) -> set[int]:
        return set(fault.detail.get("affected", fault.nodes))

    def _resolve(self, target: str) -> tuple[int, ...]:
        """The nodes a target kind names now (draws from the rng in a fixed pattern whatever the answer)."""
        ids = self.cluster.ids
        size = len(ids)
        minority = sorted(self.rng.sample(ids, self.rng.randint(1, max(1, (size - 1) // 2))))
        majority = sorted(self.rng.sample(ids, size // 2 + 1))
        pick = self.rng.random()
        if target == "minority":
            return tuple(minority)
        if target == "majority":
            return tuple(majority)
        found: int | None = None
        try:
            if target == "controller":
                found = self.cluster.current_controller()
            elif self.topic is not None:
                leaders = sorted((p, leader) for p, leader in self.cluster.partition_leaders(self.topic).items()
                                 if leader in self.cluster.nodes)
                if leaders:
                    found = leaders[int(pick * len(leaders))][1]
        except Exception as exc:
            self.history.event("nemesis", action="lookup-failed", target=target, error=f"{type(exc).__name__}: {exc}")
        return (found,) if found is not None else (minority[0],)

    # ---- applying and undoing

    def _apply(self, kind: str, target: str, nodes: tuple[int, ...], majority: bool) -> Fault:
        self._numbers += 1
        fault = Fault(self._numbers, kind, target, nodes, time.monotonic() + self.rng.uniform(*self.hold_s),
                      detail={"majority": majority})
        rest = [n for n in self.cluster.ids if n not in nodes]
        if kind == "kill":
            for node in nodes:
                self.cluster.node(node).kill()
        elif kind == "pause":
            for node in nodes:
                self.cluster.node(node).pause()
        elif kind == "isolate":
            cuts = [self.cluster.mesh.isolate(node) for node in nodes]
            fault.detail["cuts"] = cuts
        elif kind == "partition":
            fault.cut = self.cluster.mesh.partition(nodes)
        else:  # one-way
            outgoing = self.rng.random() < 0.5
            source, dest = (nodes, rest) if outgoing else (rest, nodes)
            fault.cut = self.cluster.mesh.cut(source, dest, both=False)
            fault.detail["direction"] = "from target" if outgoing else "to target"
        if kind not in PROCESS_FAULTS:
            smaller = nodes if len(nodes) <= len(rest) else tuple(rest)
            fault.detail["affected"] = list(smaller)
        self.active.append(fault)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        described = fault.cut.description if fault.cut is not None else None
        self.history.event("nemesis", action="start", fault=kind, target=target, nodes=list(nodes), id=fault.number,
                           majority=majority, direction=fault.detail.get("direction"), links=described)
        return fault

    def _undo(self, fault: Fault) -> None:
        if fault in self.active:
            self.active.remove(fault)
        error = None
        try:
            if fault.kind == "kill":
                for node in fault.nodes:
                    if not self.cluster.node(node).is_running:
                        self.cluster.start_node(node, RESTART_TIMEOUT_S)
            elif fault.kind == "pause":
                for node in fault.nodes:
                    self.cluster.node(node).resume()
            else:
                for cut in fault.detail.get("cuts", []) + ([fault.cut] if fault.cut is not None else []):
                    self.cluster.mesh.heal(cut)
        except Exception as exc:
            self.errors += 1
            error = f"{type(exc).__name__}: {exc}"
        self.history.event("nemesis", action="end", fault=fault.kind, target=fault.target, nodes=list(fault.nodes),
                           id=fault.number, error=error)
