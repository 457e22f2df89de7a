"""A seeded, deterministic simulation of Connect's incremental cooperative assignor (KIP-415) driving a group
of workers.

One `random.Random(seed)` drives: workers that join, leave, crash (their work vanishes with them) and restart
under a new member id; connectors created, deleted and given a new task count; and the clock, which moves on
so that scheduled rebalances fire. Every rebalance the leader runs `assign` on what each live member runs; the
members stop what is revoked and start what is assigned. A member that had something revoked rejoins at once
(a follow-up round), and every member rejoins when the scheduled delay ends, as Kafka's workers do.

Checked after every round (`AssertionError` names the invariant):
- exclusive: no connector or task runs on two live members;
- sticky: a member only loses configured work it held above its balanced share (`floor(total / members)`);
- held back: work of a departed member is not handed out before the scheduled delay ends.
Checked whenever the group settles (no more events, the delay has passed, no revocation pending):
- complete: every configured connector and task runs on exactly one member;
- balanced: connector counts and task counts differ by at most one between members.

Replay one seed: `python -m tests.sim.connect_assignor_simulation --seed N`.
"""

from __future__ import annotations

import argparse
import random
from dataclasses import dataclass, field

from moldau.connect.distributed.assignor import AssignorState, Decision, assign
from moldau.connect.distributed.protocol import Allocation

MAX_DELAY_MS = 3000
MAX_ROUNDS_TO_SETTLE = 8


@dataclass
class Worker:
    member_id: str
    running: Allocation = field(default_factory=Allocation)


class AssignorSimulation:
    def __init__(self, seed: int, steps: int = 60) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.steps = steps
        self.now_ms = 0
        self.next_id = 0
        self.workers: dict[str, Worker] = {}
        self.connectors: dict[str, int] = {}
        self.state = AssignorState()
        self.rejoin_at: int | None = None
        self.departed_at: dict[tuple[str, int] | str, int] = {}
        self.stats = {"rounds": 0, "revocations": 0, "delays": 0, "settled": 0, "crashes": 0}

    def fail(self, invariant: str, detail: str) -> None:
        raise AssertionError(f"seed {self.seed}: {invariant} violated at {self.now_ms} ms: {detail}")

    # --- the world -----------------------------------------------------------------------------------

    def configured(self) -> Allocation:
        return Allocation.of(self.connectors, ((c, t) for c, n in self.connectors.items() for t in range(n)))

    def add_worker(self) -> None:
        self.next_id += 1
        member = f"worker-{self.next_id:03d}"
        self.workers[member] = Worker(member)

    def remove_worker(self, crash: bool) -> None:
        if len(self.workers) <= 1:
            return
        member = self.rng.choice(sorted(self.workers))
        del self.workers[member]
        self.stats["crashes"] += crash

    def change_config(self) -> None:
        choice = self.rng.random()
        if choice < 0.5 or not self.connectors:
            self.connectors[f"conn-{self.rng.randrange(1000):03d}"] = self.rng.randint(1, 6)
        elif choice < 0.75:
            del self.connectors[self.rng.choice(sorted(self.connectors))]
        else:
            self.connectors[self.rng.choice(sorted(self.connectors))] = self.rng.randint(1, 6)

    # --- rebalancing ---------------------------------------------------------------------------------

    def round(self) -> bool:
        """One rebalance; True if a follow-up is needed at once (something was revoked)."""
        self.stats["rounds"] += 1
        members = {m: w.running for m, w in self.workers.items()}
        configured = self.configured()
        decisions, state = assign(members, configured, self.now_ms, MAX_DELAY_MS, self.state)
        self.check_sticky(members, configured, decisions, state.lost)
        for member, decision in decisions.items():
            worker = self.workers[member]
            worker.running = (worker.running - decision.revoked) | decision.assigned
        self.check_held_back(state)
        self.state = state
        self.check_exclusive()
        delays = {d.delay_ms for d in decisions.values()}
        if delays != {0}:
            self.stats["delays"] += 1
            self.rejoin_at = self.now_ms + max(delays)
        revoked = any(d.revoked for d in decisions.values())
        self.stats["revocations"] += revoked
        return revoked

    def rebalance(self) -> None:
        for _ in range(MAX_ROUNDS_TO_SETTLE):
            if not self.round():
                return
        self.fail("convergence", "revocations did not stop")

    def settle(self) -> None:
        """Let the delay pass and rebalance until nothing changes; then everything runs, balanced."""
        for _ in range(MAX_ROUNDS_TO_SETTLE):
            if self.rejoin_at is not None:
                self.now_ms = max(self.now_ms, self.rejoin_at)
                self.rejoin_at = None
            self.rebalance()
            if self.rejoin_at is None:
                break
        self.check_complete()
        self.check_balanced()
        self.stats["settled"] += 1

    # --- invariants ----------------------------------------------------------------------------------

    def check_exclusive(self) -> None:
        seen: dict[object, str] = {}
        for member, worker in sorted(self.workers.items()):
            for unit in [*worker.running.connectors, *worker.running.tasks]:
                if unit in seen:
                    self.fail("exclusive", f"{unit} runs on {seen[unit]} and {member}")
                seen[unit] = member

    def check_sticky(self, members: dict[str, Allocation], configured: Allocation, decisions: dict[str, Decision],
                     held_back: Allocation) -> None:
        for kind in ("connectors", "tasks"):
            total = len(getattr(configured, kind)) - len(getattr(held_back, kind))
            floor = total // len(members)
            for member, decision in decisions.items():
                held = getattr(members[member], kind) & getattr(configured, kind)
                lost = getattr(decision.revoked, kind) & getattr(configured, kind)
                if lost and len(held) - len(lost) < floor:
                    self.fail("sticky", f"{member} held {len(held)} {kind}, lost {len(lost)}, share {floor}")

    def check_held_back(self, state: AssignorState) -> None:
        if state.deadline_ms is not None and state.deadline_ms - self.now_ms > MAX_DELAY_MS:
            self.fail("held back", f"deadline {state.deadline_ms} beyond the maximum delay")
        running = Allocation()
        for worker in self.workers.values():
            running = running | worker.running
        if state.lost.connectors & running.connectors or state.lost.tasks & running.tasks:
            self.fail("held back", "work held back for a departed member was handed out")

    def check_complete(self) -> None:
        configured = self.configured()
        running = Allocation()
        for worker in self.workers.values():
            running = running | worker.running
        if running != configured:
            self.fail("complete", f"missing {configured - running}, extra {running - configured}")

    def check_balanced(self) -> None:
        for kind in ("connectors", "tasks"):
            counts = [len(getattr(w.running, kind)) for w in self.workers.values()]
            if max(counts) - min(counts) > 1:
                self.fail("balanced", f"{kind} counts {counts}")

    # --- the run -------------------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        for _ in range(self.rng.randint(1, 4)):
            self.add_worker()
        for _ in range(self.rng.randint(0, 5)):
            self.change_config()
        self.settle()
        for _ in range(self.steps):
            event = self.rng.random()
            if event < 0.2:
                self.add_worker()
            elif event < 0.3:
                self.remove_worker(crash=False)
            elif event < 0.45:
                self.remove_worker(crash=True)
            elif event < 0.75:
                self.change_config()
            else:
                self.now_ms += self.rng.randint(1, 2 * MAX_DELAY_MS)
            if self.rejoin_at is not None and self.now_ms >= self.rejoin_at:
                self.rejoin_at = None
            self.rebalance()
            if self.rng.random() < 0.15:
                self.settle()
        self.settle()
        return self.stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, required=True)
    print(AssignorSimulation(parser.parse_args().seed).run())


if __name__ == "__main__":
    main()
