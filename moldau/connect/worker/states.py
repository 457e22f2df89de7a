"""Connector and task states as Kafka Connect reports them, and the pure rules that move between them.

A connector has a *target state* set by the user (STARTED, PAUSED, STOPPED) and an observed *state*
(UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED, RESTARTING) reported in `/status`; a failed one carries its
trace. No I/O, no clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["State", "Status", "TargetState", "restart_plan", "state_for_target"]


class State(enum.Enum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


class TargetState(enum.Enum):
    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True)
class Status:
    """The observed state of a connector or one task, on a worker."""

    state: State
    worker_id: str
    trace: str | None = None

    def json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"state": self.state.value, "worker_id": self.worker_id}
        if self.trace is not None:
            shown["trace"] = self.trace
        return shown


def state_for_target(target: TargetState) -> State:
    """The state a healthy connector or task reports once it has reached `target`."""
    return {TargetState.STARTED: State.RUNNING, TargetState.PAUSED: State.PAUSED,
            TargetState.STOPPED: State.STOPPED}[target]


@dataclass(frozen=True)
class RestartPlan:
    """What `POST /connectors/{c}/restart` restarts: the connector itself and which task ids."""

    connector: bool
    tasks: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return not self.connector and not self.tasks


def restart_plan(connector: Status, tasks: dict[int, Status], include_tasks: bool, only_failed: bool) -> RestartPlan:
    """Kafka's KIP-745 rules: the connector is restarted unless `only_failed` and it has not failed; tasks
    only with `include_tasks`, and then all of them or (with `only_failed`) the failed ones."""
    restart_connector = not only_failed or connector.state is State.FAILED
    chosen: tuple[int, ...] = ()
    if include_tasks:
        chosen = tuple(sorted(t for t, s in tasks.items() if not only_failed or s.state is State.FAILED))
    return RestartPlan(restart_connector, chosen)
