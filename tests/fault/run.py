"""Run the fault-injection suite once: a proxied cluster, the workload, the nemesis, then the checker.

    python -m tests.fault.run --seed 7 --duration 60 --nodes 3 [--workload txn] [--out DIR]

Starts a `FaultCluster`, creates the workload topic (replication factor 3, min.insync.replicas=2), runs
producers and consumers while the seeded nemesis injects faults for `--duration` seconds, then undoes every
fault (heal, resume, restart), lets the workload run on for `--recovery` seconds, stops it, reads every
partition from offset 0 to its end, and checks the history. `--workload txn` runs transactional producers
instead (`tests/support/txn_workload.py`), adds a read_uncommitted final read and checks the history with
`check_txn` (`tests/support/txn_checker.py`). Prints the seed and a summary, saves
`history.json` and `result.json` into `--out` (default: a new temporary directory, printed), and exits 1 on
a violation, printing the command that reproduces the run.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.support.checker import CheckResult, check
from tests.support.fault_cluster import FaultCluster
from tests.support.nemesis import FAULTS, TARGETS, Nemesis
from tests.support.txn_checker import check_txn
from tests.support.txn_workload import TxnWorkload
from tests.support.workload import History, Workload, create_topic

TOPIC = "fault-workload"
WORKLOADS = ("plain", "txn")
# Few transaction state partitions (Kafka's default is 50), as in the transaction cluster tests: the
# coordinators still move with every fault, and a 2-core machine keeps up.
TXN_SERVER_CONFIGS = {"transaction.state.log.num.partitions": "3"}


@dataclass
class RunConfig:
    seed: int
    duration_s: float = 60.0
    nodes: int = 3
    partitions: int = 3
    producers: int = 2
    consumers: int = 1
    rate: float = 50.0
    interval_s: float = 5.0
    hold_s: tuple[float, float] = (1.5, 4.0)
    recovery_s: float = 5.0
    # Long enough to ride out every fault, as client defaults are (librdkafka's is 300 s): with a timeout shorter
    # than a fault, librdkafka bumps its producer epoch locally and re-sends records whose first attempt may
    # have been written, so a record reported failed can be stored twice (see docs/reliability.md).
    message_timeout_ms: int = 60_000
    faults: tuple[str, ...] = FAULTS
    targets: tuple[str, ...] = TARGETS
    replication_factor: int = 3
    min_insync_replicas: int = 2
    overrides: dict[str, str] = field(default_factory=dict)
    workload: str = "plain"
    # The transactional workload: `txn_rate` transactions per second per producer, of `txn_size` records each,
    # `abort_ratio` of them aborted on purpose; transaction.timeout.ms is message_timeout_ms.
    txn_rate: float = 10.0
    txn_size: int = 4
    abort_ratio: float = 0.2

    @property
    def transactional(self) -> bool:
        return self.workload == "txn"

    def server_configs(self) -> dict[str, str]:
        return {**(TXN_SERVER_CONFIGS if self.transactional else {}), **self.overrides}

    def command(self) -> str:
        """The command line that repeats this run."""
        args = ["python", "-m", "tests.fault.run", "--seed", str(self.seed), "--duration", f"{self.duration_s:g}",
                "--nodes", str(self.nodes), "--partitions", str(self.partitions), "--producers", str(self.producers),
                "--rate", f"{self.rate:g}", "--interval", f"{self.interval_s:g}"]
        if self.transactional:
            args += ["--workload", self.workload, "--txn-rate", f"{self.txn_rate:g}", "--txn-size",
                     str(self.txn_size), "--abort-ratio", f"{self.abort_ratio:g}"]
        if self.message_timeout_ms != RunConfig.message_timeout_ms:
            args += ["--message-timeout", str(self.message_timeout_ms)]
        if self.faults != FAULTS:
            args += ["--faults", ",".join(self.faults)]
        if self.targets != TARGETS:
            args += ["--targets", ",".join(self.targets)]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        return shlex.join(args)


@dataclass
class RunOutcome:
    config: RunConfig
    result: CheckResult
    history: dict[str, Any]
    out: Path
    faults: dict[str, int]
    notes: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        """No violation, and the harness itself worked (no crashed thread, the run reached its end)."""
        return self.result.ok and not self.problems

    def summary(self) -> str:
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items())) or "none"
        lines = [f"seed {self.config.seed}: {self.config.nodes} nodes, {self.config.duration_s:g} s of faults",
                 f"faults injected: {faults}", self.result.summary()]
        lines += [f"note: {note}" for note in self.notes]
        lines += [f"HARNESS PROBLEM: {problem}" for problem in self.problems]
        lines.append(f"history: {self.out / 'history.json'}")
        if not self.ok:
            lines.append(f"reproduce: {self.config.command()}")
        return "\n".join(lines)


def execute(config: RunConfig, out: Path, log: Any = None) -> RunOutcome:
    """One whole run (see the module docstring); the history is saved even if the run breaks."""
    say = log or (lambda text: None)
    out.mkdir(parents=True, exist_ok=True)
    history = History({"config": {**asdict(config), "command": config.command()}, "topic": TOPIC})
    notes: list[str] = []
    nemesis: Nemesis | None = None
    try:
        with FaultCluster(out / "cluster", config.nodes, overrides=config.server_configs()) as cluster:
            history.meta["inter_broker_listener"] = cluster.inter_broker_listener
            cluster.active_controller(60)
            history.event("cluster", action="started", nodes=cluster.ids)
            say(f"cluster of {config.nodes} nodes up in {out / 'cluster'}")
            create_topic(cluster.bootstrap, TOPIC, config.partitions, config.replication_factor,
                         {"min.insync.replicas": str(config.min_insync_replicas)})
            cluster.wait_stable(60, TOPIC)
            history.event("topic", action="created", topic=TOPIC, leaders=cluster.partition_leaders(TOPIC))
            workload = make_workload(config, cluster.bootstrap, history).start()
            try:
                nemesis = Nemesis(cluster, history, config.seed, topic=TOPIC, interval_s=config.interval_s,
                                  hold_s=config.hold_s, faults=config.faults, targets=config.targets).start()
                say(f"workload and nemesis running for {config.duration_s:g} s")
                time.sleep(config.duration_s)
                nemesis.stop()
                cluster.heal()
                history.event("cluster", action="healed")
                try:
                    cluster.wait_stable(60, TOPIC)
                    history.event("cluster", action="stable", leaders=cluster.partition_leaders(TOPIC))
                except AssertionError as exc:
                    notes.append("the cluster did not settle after healing (see the history)")
                    history.event("cluster", action="unstable", error=str(exc)[:2000])
                time.sleep(config.recovery_s)
            finally:
                if nemesis is not None:
                    nemesis.stop()
                say("stopping the workload")
                workload.stop()
            say("final read")
            workload.final_read(60)
            if config.transactional:
                workload.final_read(60, isolation="read_uncommitted")
    except Exception as exc:
        history.event("run-error", error=f"{type(exc).__name__}: {exc}")
    finally:
        recorded = history.as_dict()
        (out / "history.json").write_text(json.dumps(recorded), encoding="utf-8")
    result = check_txn(recorded) if config.transactional else check(recorded)
    problems = [f"the run broke before its end: {e['error'][:1000]}" for e in recorded["events"]
                if e["kind"] == "run-error"]
    problems += [f"a workload thread crashed: {e['thread']}: {e['error']}" for e in recorded["events"]
                 if e["kind"] == "workload-crash"]
    notes += _txn_liveness_notes(recorded)
    if nemesis is not None and nemesis.errors:
        notes.append(f"{nemesis.errors} nemesis actions failed (see the nemesis events)")
    errors = Counter(e["error"].split(",")[0] for e in recorded["events"] if e["kind"] == "client-error")
    if errors:
        notes.append("client errors: " + "; ".join(f"{n}x {text[:120]}" for text, n in errors.most_common(5)))
    faults = dict(nemesis.counts) if nemesis is not None else {}
    outcome = RunOutcome(config, result, recorded, out, faults, notes, problems)
    (out / "result.json").write_text(json.dumps({**result.as_dict(), "seed": config.seed, "faults": faults,
                                                 "notes": notes, "problems": problems,
                                                 "command": config.command()}, indent=1),
                                     encoding="utf-8")
    return outcome


def _txn_liveness_notes(recorded: dict[str, Any]) -> list[str]:
    """Transactions that could not finish although nothing was broken any more: not a safety violation, but a
    transactional id that stays stuck (every retry answered CONCURRENT_TRANSACTIONS, say) is worth a look."""
    healed = [e["t"] for e in recorded["events"] if e["kind"] == "cluster" and e.get("action") == "healed"]
    late = [t["id"] for t in recorded.get("txns", []) if t.get("status") not in ("committed", "aborted")
            and healed and t.get("done_at", float("inf")) > healed[0] + 10]
    unfenced = [e["slot"] for e in recorded["events"] if e["kind"] == "producer" and e.get("action") == "unfenced"]
    notes = []
    if late:
        notes.append(f"transactions still unfinished more than 10 s after healing: {', '.join(late)}")
    if unfenced:
        notes.append(f"transactional slots that could not fence their last producer at the end: {unfenced}")
    return notes


def make_workload(config: RunConfig, bootstrap: str, history: History) -> Workload:
    if config.transactional:
        return TxnWorkload(bootstrap, TOPIC, config.partitions, history, producers=config.producers,
                           consumers=config.consumers, rate=config.txn_rate, txn_size=config.txn_size,
                           abort_ratio=config.abort_ratio, message_timeout_ms=config.message_timeout_ms,
                           transaction_timeout_ms=config.message_timeout_ms, seed=config.seed)
    return Workload(bootstrap, TOPIC, config.partitions, history, producers=config.producers,
                    consumers=config.consumers, rate=config.rate, message_timeout_ms=config.message_timeout_ms)


def parse_args(argv: list[str] | None = None) -> tuple[RunConfig, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m tests.fault.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, help="the nemesis seed (default: random, printed)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults (default 60)")
    parser.add_argument("--nodes", type=int, default=3, help="combined nodes (default 3)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--consumers", type=int, default=1)
    parser.add_argument("--rate", type=float, default=50.0, help="records per second per producer (default 50)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between faults (default 5)")
    parser.add_argument("--workload", choices=WORKLOADS, default="plain",
                        help="plain: idempotent producers (default); txn: transactional producers")
    parser.add_argument("--txn-rate", type=float, default=10.0,
                        help="txn workload: transactions per second per producer (default 10)")
    parser.add_argument("--txn-size", type=int, default=4, help="txn workload: records per transaction (default 4)")
    parser.add_argument("--abort-ratio", type=float, default=0.2,
                        help="txn workload: share of transactions aborted on purpose (default 0.2)")
    parser.add_argument("--message-timeout", type=int, default=60_000, dest="message_timeout_ms",
                        help="the producers' message.timeout.ms (and transaction.timeout.ms; default 60000)")
    parser.add_argument("--recovery", type=float, default=5.0, help="seconds of workload after healing")
    parser.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {','.join(FAULTS)}")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"comma-separated, of {','.join(TARGETS)}")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="a server config for every node (repeatable)")
    parser.add_argument("--out", type=Path, help="directory for the history and the cluster's data and logs")
    args = parser.parse_args(argv)
    overrides = dict(item.split("=", 1) for item in args.override)
    config = RunConfig(
        seed=args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31),
        duration_s=args.duration, nodes=args.nodes, partitions=args.partitions, producers=args.producers,
        consumers=args.consumers, rate=args.rate, interval_s=args.interval, recovery_s=args.recovery,
        faults=tuple(f for f in args.faults.split(",") if f), targets=tuple(t for t in args.targets.split(",") if t),
        message_timeout_ms=args.message_timeout_ms, overrides=overrides, workload=args.workload,
        txn_rate=args.txn_rate, txn_size=args.txn_size, abort_ratio=args.abort_ratio)
    return config, args.out


def main(argv: list[str] | None = None) -> int:
    config, out = parse_args(argv)
    directory = out if out is not None else Path(tempfile.mkdtemp(prefix=f"moldau-fault-{config.seed}-"))
    print(f"seed {config.seed}; history and logs in {directory}", flush=True)
    outcome = execute(config, directory, log=lambda text: print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True))
    print(outcome.summary(), flush=True)
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
