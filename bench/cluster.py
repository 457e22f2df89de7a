"""Multi-node figures: controller failover and metadata propagation, on local clusters of real processes.

The clusters are `tests.support.cluster.LocalCluster`s (the same node configuration as `moldau cluster start`):
combined broker+controller nodes on free loopback ports, each in a fresh temporary directory.

* **Controller failover.** Start 3 nodes, wait until the controllers agree on a leader (DescribeQuorum, API
  key 55, sent to each CONTROLLER listener), SIGKILL the leader, and time from the kill until (1) the two
  survivors agree on a new leader in a higher epoch and (2) a Metadata request to a surviving broker
  succeeds. A fresh cluster per run; min/median/max over ``--repeat`` runs. Baseline: the election timeout
  T (``controller.quorum.election.timeout.ms``, Kafka's default 1000 ms; Kafka draws each timeout from
  [T, 2T)). A failover cannot beat T: the survivors first have to notice that the leader is gone.
* **Metadata propagation.** Wait until every broker lists every broker (they all registered), create a
  topic of ``--partitions`` (1,000) partitions through broker 1 (confluent-kafka AdminClient), and time
  until every broker's own Metadata answer shows all of them with a leader. Baseline in the same run: the
  same on a 1-node cluster; ratio = 3-node / 1-node.

A measurement that fails (no agreement, a timeout) is reported with its reason under the table instead of a
figure.

Run from the repository root:  python -m bench.cluster [--quick] [--repeat R] [--only failover,propagation]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench.common import (
    BenchError,
    add_override_option,
    exit_on_sigterm,
    first_line,
    note,
    scratch_dir,
    wait_registered,
    waited,
)
from bench.tables import Table, render, save_results
from tests.support.cluster import LocalCluster, QuorumError, QuorumInfo, metadata_at

ELECTION_TIMEOUT = "controller.quorum.election.timeout.ms"
KAFKA_ELECTION_TIMEOUT_MS = 1000
SCENARIOS = ("failover", "propagation")
FAILOVER_LABELS = ["failover s", "election timeout s"]
PROPAGATION_LABELS = ["3 nodes", "1 node"]


# --------------------------------------------------------------------------- arguments


def parse_args() -> argparse.Namespace:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one run per measurement")
    parser.add_argument("--repeat", type=int, help="runs per measurement (default 3, quick 1)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="failover, propagation or both (comma list)")
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the propagation topic")
    parser.add_argument("--agree-timeout", type=float, default=30.0,
                        help="seconds to wait for the controllers to agree / the brokers to register (default 30)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds one measurement may take (default 120)")
    add_override_option(parser, f"a server config for every node (repeatable), e.g. {ELECTION_TIMEOUT}=500")
    parser.add_argument("--no-save", action="store_true", help="do not write JSON under bench/results/")
    args = parser.parse_args()
    args.only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in args.only if name not in SCENARIOS]
    if unknown or not args.only:
        parser.error(f"--only: unknown scenario {unknown}; choose from {', '.join(SCENARIOS)}")
    args.overrides = dict(args.override)
    args.repeat = int(args.repeat or (1 if args.quick else 3))
    return args


def election_timeout_ms(overrides: dict[str, str]) -> tuple[int, str]:
    """T and where it comes from: an --override, Moldau's default once it knows the config, or Kafka's."""
    if ELECTION_TIMEOUT in overrides:
        return int(overrides[ELECTION_TIMEOUT]), "set with --override"
    from moldau.config import BROKER_CONFIGS

    definition = BROKER_CONFIGS.get(ELECTION_TIMEOUT)
    if definition is not None and definition.default is not None:
        return int(definition.default), "Moldau's default"
    return KAFKA_ELECTION_TIMEOUT_MS, "Kafka's default; Moldau does not know this config yet"


# --------------------------------------------------------------------------- helpers


def _metadata_ok(address: str) -> bool:
    try:
        response = metadata_at(address, [], timeout_s=2.0)
    except (OSError, ConnectionError):
        return False
    return len(response.brokers) > 0


# --------------------------------------------------------------------------- failover


def _new_leader(cluster: LocalCluster, old: QuorumInfo) -> QuorumInfo | None:
    found = cluster.agreed_leader()
    if found is None or found.leader_id == old.leader_id or found.leader_epoch <= old.leader_epoch:
        return None
    return found


def failover_once(base: Path, args: argparse.Namespace) -> tuple[float, str]:
    """Seconds from SIGKILL of the active controller until a new one is agreed and a survivor serves Metadata."""
    with LocalCluster(base, 3, overrides=args.overrides) as cluster:
        old = waited(lambda: cluster.active_controller(args.agree_timeout), "before the kill")
        cluster.node(old.leader_id).kill()
        began = time.perf_counter()
        new = waited(lambda: cluster.wait_until(lambda: _new_leader(cluster, old), args.timeout,
                                                 f"a leader other than node {old.leader_id}"), "after the kill")
        survivor = next(n for n in cluster.brokers if n.is_running and n.kafka_address is not None)
        address = str(survivor.kafka_address)
        waited(lambda: cluster.wait_until(lambda: _metadata_ok(address), args.timeout,
                                           f"Metadata from broker {survivor.node_id}"), "after the election")
        seconds = time.perf_counter() - began
    return seconds, f"leader {old.leader_id} (epoch {old.leader_epoch}) -> {new.leader_id} (epoch {new.leader_epoch})"


def measure_failover(args: argparse.Namespace) -> Table:
    timeout_ms, source = election_timeout_ms(args.overrides)
    table = Table(f"controller failover, 3 combined nodes, SIGKILL of the active controller, {args.repeat} runs "
                  "(lower is better)")
    samples: list[float] = []
    for run in range(args.repeat):
        note(f"failover run {run + 1}/{args.repeat}")
        try:
            with scratch_dir("cluster") as base:
                seconds, change = failover_once(base, args)
        except (BenchError, RuntimeError, OSError, QuorumError) as exc:
            table.notes.append(f"run {run + 1}: FAILED: {first_line(exc)}")
            note(f"FAILED: {first_line(exc)}")
            break  # the same cause would fail every further run
        samples.append(seconds)
        note(f"{seconds:.3f} s, {change}")
    t = timeout_ms / 1000
    for name, value, baseline in _spread(samples, (t, 1.5 * t, 2 * t)):
        table.row(name).values.update({FAILOVER_LABELS[0]: value, FAILOVER_LABELS[1]: baseline})
    table.notes.insert(0, f"election timeout T = {timeout_ms} ms ({ELECTION_TIMEOUT}, {source}); each timeout is "
                          f"drawn from [T, 2T) = [{timeout_ms}, {2 * timeout_ms}) ms, so no failover beats T. "
                          "Baseline column: T, 1.5T, 2T for min, median, max.")
    return table


def _spread(samples: list[float], baselines: tuple[float, float, float]) -> list[tuple[str, float | None, float]]:
    if not samples:
        return [(name, None, base) for name, base in zip(("min", "median", "max"), baselines, strict=True)]
    values = (min(samples), statistics.median(samples), max(samples))
    return list(zip(("min", "median", "max"), values, baselines, strict=True))


# --------------------------------------------------------------------------- metadata propagation


def _create_topic(bootstrap: str, topic: str, partitions: int, timeout_s: float) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout_s,
                                  request_timeout=timeout_s)
    try:
        futures[topic].result(timeout=timeout_s)
    except Exception as exc:
        raise BenchError(f"CreateTopics of {topic} ({partitions} partitions) failed: {exc}") from exc


def _complete(address: str, topic: str, partitions: int) -> bool:
    """True if this broker's Metadata shows every partition of `topic` with a leader."""
    try:
        response = metadata_at(address, [topic], timeout_s=10.0)
    except (OSError, ConnectionError):
        return False
    for answer in response.topics:
        if answer.name == topic and int(getattr(answer.error_code, "value", answer.error_code)) == 0:
            led = [p for p in answer.partitions if int(p.leader_id) >= 0]
            return len(answer.partitions) == partitions and len(led) == partitions
    return False


def propagation_once(base: Path, nodes: int, args: argparse.Namespace) -> tuple[float, float]:
    """(CreateTopics answered, all partitions led on every broker), in seconds from the request."""
    with LocalCluster(base, nodes, overrides=args.overrides) as cluster:
        wait_registered(cluster, args.agree_timeout)
        topic = f"propagation-{time.monotonic_ns() % 10**8}"
        first = cluster.brokers[0]
        began = time.perf_counter()
        _create_topic(str(first.kafka_address), topic, args.partitions, args.timeout)
        created = time.perf_counter() - began
        pending = {n.node_id: str(n.kafka_address) for n in cluster.brokers}

        def all_brokers() -> bool:
            for node_id, address in list(pending.items()):
                if _complete(address, topic, args.partitions):
                    del pending[node_id]
            return not pending

        waited(lambda: cluster.wait_until(all_brokers, args.timeout, lambda: (
            f"all {args.partitions} partitions of {topic} with a leader on brokers {sorted(pending)}"),
            interval_s=0.02), "propagation")
        return created, time.perf_counter() - began


def measure_propagation(args: argparse.Namespace) -> Table:
    table = Table(f"metadata propagation, a {args.partitions}-partition topic created through broker 1, "
                  f"median of {args.repeat} (lower is better)")
    for label, nodes in zip(PROPAGATION_LABELS, (3, 1), strict=True):
        created, visible = [], []
        for run in range(args.repeat):
            note(f"propagation {label} run {run + 1}/{args.repeat}")
            try:
                with scratch_dir("cluster") as base:
                    answered, everywhere = propagation_once(base, nodes, args)
            except (BenchError, RuntimeError, OSError) as exc:
                table.notes.append(f"{label}: run {run + 1}: FAILED: {first_line(exc)}")
                note(f"FAILED: {first_line(exc)}")
                break
            created.append(answered)
            visible.append(everywhere)
            note(f"CreateTopics {answered:.3f} s, on every broker {everywhere:.3f} s")
        table.row("CreateTopics answered s").values[label] = statistics.median(created) if created else None
        table.row("all partitions led on every broker s").values[label] = (
            statistics.median(visible) if visible else None)
    return table


# --------------------------------------------------------------------------- main


def main() -> None:
    args = parse_args()
    tables: list[tuple[Table, list[str]]] = []
    if "failover" in args.only:
        tables.append((measure_failover(args), FAILOVER_LABELS))
        print(render(*tables[-1]), flush=True)
    if "propagation" in args.only:
        tables.append((measure_propagation(args), PROPAGATION_LABELS))
        print(render(*tables[-1]), flush=True)
    if not args.no_save:
        labels = [label for _, names in tables for label in names]
        path = save_results("cluster", labels, [table for table, _ in tables], {"overrides": args.overrides})
        print(f"\nresults written to {path}")


if __name__ == "__main__":
    main()
