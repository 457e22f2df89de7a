"""The leader's incremental cooperative assignor (KIP-415), as a pure function: no I/O, the time passed in.

Each rebalance the leader knows every member and what it runs (from their metadata), every configured connector
and task, and what it decided last time (`AssignorState`). It decides, per member, what to *revoke* and what to
*add*; members keep everything else running. The rules:

- connectors and tasks no longer configured, or held by two members, are revoked;
- a member above its balanced share (`floor` or `ceil` of total/members, only `total % members` members at
  `ceil`) gives back its surplus, and nothing else is ever revoked;
- revoked work is not handed out in the same round (its old owner may still be stopping it): the owner rejoins
  once it has stopped it, and the next round assigns it;
- work of a member that vanished since the last round stays unassigned until `scheduled.rebalance.max.delay.ms`
  after the loss was first seen (so a worker that restarts quickly gets it back without moving anything else),
  and every member is told to rejoin when the delay ends; then it goes to the least loaded members;
- new work goes to the least loaded members, ties broken by member id, so the result is deterministic.

Connectors and tasks are balanced separately, as Kafka does. `eager=True` is the eager protocol: members have
stopped everything before joining, so everything is handed out afresh and nothing is revoked or delayed.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from moldau.connect.distributed.protocol import Allocation

__all__ = ["AssignorState", "Decision", "assign"]

U = TypeVar("U", bound=Hashable)


@dataclass(frozen=True)
class AssignorState:
    """What the leader remembers between rounds."""

    previous: Mapping[str, Allocation] = field(default_factory=dict)
    lost: Allocation = field(default_factory=Allocation)
    deadline_ms: int | None = None


@dataclass(frozen=True)
class Decision:
    """One member's part of a round: what it starts, what it stops, and when everyone should rejoin."""

    assigned: Allocation
    revoked: Allocation
    delay_ms: int = 0


def assign(members: Mapping[str, Allocation], configured: Allocation, now_ms: int, max_delay_ms: int,
           state: AssignorState, eager: bool = False) -> tuple[dict[str, Decision], AssignorState]:
    """Decide a round for `members` (member id -> what it runs now). Returns each member's decision and the
    state to pass to the next round."""
    if not members:
        return {}, AssignorState()
    held, revoked = _held(members, configured, eager)
    running = _union(held.values())
    lost, deadline = _lost(members, configured, running, now_ms, max_delay_ms, state)
    held_back = lost if deadline is not None else Allocation()
    unassigned = configured - running - held_back
    connectors = _balance({m: a.connectors for m, a in held.items()}, unassigned.connectors)
    tasks = _balance({m: a.tasks for m, a in held.items()}, unassigned.tasks)
    delay = 0 if deadline is None else deadline - now_ms
    decisions: dict[str, Decision] = {}
    previous: dict[str, Allocation] = {}
    for member in members:
        give_back = revoked[member] | Allocation(connectors[1][member], tasks[1][member])
        added = Allocation(connectors[0][member], tasks[0][member])
        decisions[member] = Decision(added, give_back, delay)
        previous[member] = held[member] - give_back | added
    return decisions, AssignorState(previous, held_back, deadline)


def _held(members: Mapping[str, Allocation], configured: Allocation,
          eager: bool) -> tuple[dict[str, Allocation], dict[str, Allocation]]:
    """What each member keeps before balancing, and what it must give back at once (unconfigured or held twice)."""
    held: dict[str, Allocation] = {}
    revoked: dict[str, Allocation] = {}
    seen = Allocation()
    for member in sorted(members):
        current = Allocation() if eager else members[member]
        keep = Allocation(current.connectors & configured.connectors - seen.connectors,
                          current.tasks & configured.tasks - seen.tasks)
        held[member], revoked[member] = keep, current - keep
        seen = seen | keep
    return held, revoked


def _lost(members: Mapping[str, Allocation], configured: Allocation, running: Allocation, now_ms: int,
          max_delay_ms: int, state: AssignorState) -> tuple[Allocation, int | None]:
    """Work of departed members that nobody runs, and until when it stays unassigned (None: hand it out now)."""
    departed = [a for m, a in state.previous.items() if m not in members]
    lost = _union([state.lost, *departed])
    lost = Allocation(lost.connectors & configured.connectors - running.connectors,
                      lost.tasks & configured.tasks - running.tasks)
    if not lost or max_delay_ms <= 0:
        return lost, None
    deadline = state.deadline_ms if state.deadline_ms is not None else now_ms + max_delay_ms
    return lost, deadline if now_ms < deadline else None


def _balance(held: Mapping[str, frozenset[U]], unassigned: frozenset[U]) -> tuple[dict[str, frozenset[U]],
                                                                                  dict[str, frozenset[U]]]:
    """(added, revoked) per member: the surplus above each member's share is revoked, then the unassigned units
    go one by one to the least loaded member."""
    total = sum(len(units) for units in held.values()) + len(unassigned)
    floor, extra = divmod(total, len(held))
    revoked: dict[str, frozenset[U]] = {}
    load: dict[str, int] = {}
    by_load = sorted(held, key=lambda m: (-len(held[m]), m))
    for member in by_load:
        cap = floor + 1 if extra > 0 else floor
        if len(held[member]) > floor and extra > 0:
            extra -= 1  # the most loaded members keep the `total % members` places at `ceil`
        surplus = sorted(held[member], key=_order)[cap:] if len(held[member]) > cap else []
        revoked[member] = frozenset(surplus)
        load[member] = len(held[member]) - len(surplus)
    added: dict[str, set[U]] = {m: set() for m in held}
    for unit in sorted(unassigned, key=_order):
        member = min(held, key=lambda m: (load[m], m))
        added[member].add(unit)
        load[member] += 1
    return {m: frozenset(a) for m, a in added.items()}, revoked


def _order(unit: Hashable) -> str:
    return repr(unit)


def _union(allocations: Iterable[Allocation]) -> Allocation:
    result = Allocation()
    for allocation in allocations:
        result = result | allocation
    return result
