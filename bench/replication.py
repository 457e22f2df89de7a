"""Replication: what replicas cost, and how soon writes succeed again after a partition's leader dies.

Everything runs on one cluster of 3 combined broker+controller nodes (``tests.support.cluster.LocalCluster``,
the node configuration of ``moldau cluster start``) on free loopback ports, in a fresh temporary directory.
The nodes run with short liveness timings, as in the cluster tests (``FAST`` below: heartbeat every 300 ms,
fenced after 2.5 s of silence); every setting used is printed. The load generators are confluent-kafka
clients in other processes than the nodes.

* **Produce throughput.** Into a fresh topic of ``--partitions`` (3: one leader per broker) partitions, the
  configurations "RF1 acks=1" (replication factor 1), "RF3 acks=1" and "RF3 acks=all" (replication factor 3,
  min.insync.replicas=2) are measured one after the other in each round, in alternating order, with the
  producers of ``bench/produce.py`` (``--producers`` confluent-kafka processes, linger.ms=5,
  batch.size=1000000, no compression) sharing ``--mb`` MB of values. Timed from the first worker's start to
  the last worker's flush; every run's records are read back with kcat and counted. Median over
  ``--rounds``. Ratio column: RF3 acks=all / RF1 acks=1 (Kafka's published figure is about 0.5).
* **End-to-end latency**, RF3 acks=all against RF1 acks=1, as ``bench/latency.py`` measures it: one producer
  process at ``--rate`` records/s for ``--duration`` s into a 1-partition topic, each value stamped with the
  wall clock just before the send call, and one consumer process (the ``latency-consume`` worker of
  ``bench/workers.py``: assigned, no group, fetch.wait.max.ms=500) taking the difference on receipt. The
  first second is warm-up. The producer is that of ``bench/latency.py`` (linger.ms=0) with at most 5
  requests in flight per connection (``max.in.flight.requests.per.connection=5``, the limit of an idempotent
  producer and Kafka's default), in both configurations: with librdkafka's default of 1,000,000 every record
  becomes its own request, and since a broker answers one connection's requests one at a time and an acks=all
  request waits for the followers, an acks=all producer at linger.ms=0 then falls behind as soon as the rate
  exceeds 1 / (replication round trip). With 5 in flight, records that wait are batched into the next
  request. A consumer sees a record only once the high watermark passes it, so with RF3 that includes the
  followers' fetch round trip.
* **Leader failover.** Into a fresh RF3 topic (min.insync.replicas=2) of ``--partitions`` partitions, an
  idempotent acks=all producer (linger.ms=0, otherwise client defaults) sends a record every 1 ms
  (``--failover-rate``), round robin over the partitions, noting each send and acknowledgement time. After
  ``--warmup`` s, the leader of one partition is SIGKILLed: for ``broker`` a partition led by a node that is
  not the active controller, for ``controller`` one led by the active controller (the controller quorum
  fails over too). For that partition it measures: from the kill to the first acknowledgement of a record
  sent after the kill ("kill -> resumed"), from the last acknowledgement before the kill to that one ("ack
  gap"), the longest gap between consecutive acknowledgements ("longest gap"), and from the kill until a
  surviving broker's Metadata names a new leader ("new leader"). The node is then restarted, the ISRs are
  waited for until full and leadership is moved back to the preferred replicas (ElectLeaders) before the
  next run. ``--repeat`` runs per victim; min/median/max, against ``broker.session.timeout.ms``, after which
  the controller fences a silent broker. ``--victims stopped`` (not run by default) stops the leader with
  SIGTERM instead, a controlled shutdown as in a rolling restart: its leaderships move while it still answers,
  and its NOT_LEADER_OR_FOLLOWER answers name the new leader (KIP-951). Then, unless ``--default-timeout-runs 0``,
  the same on a fresh cluster with Moldau's default liveness timings.

At the end every node's ``server.log`` is searched for errors and tracebacks; they are printed under the
tables. ``--keep DIR`` puts the clusters' directories (logs and data) under DIR and leaves them there.

Run from the repository root:  python -m bench.replication [--quick] [--repeat R] [--only throughput,...]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from bench.common import (
    BenchError,
    add_override_option,
    alternating,
    check_delivered,
    check_latency_run,
    exit_on_sigterm,
    first_line,
    note,
    parse_sizes,
    run_workers,
    scratch_dir,
    span_seconds,
    unique_topic,
    verify_count,
    wait_registered,
    waited,
    worker_command,
)
from bench.tables import Table, render, save_results
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.replicated import FAST_FAILOVER

T = TypeVar("T")
SCENARIOS = ("throughput", "latency", "failover")
# Liveness timings of the cluster tests.
FAST = FAST_FAILOVER
SHOWN_SETTINGS = (
    "broker.heartbeat.interval.ms", "broker.session.timeout.ms", "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms", "replica.lag.time.max.ms", "replica.fetch.wait.max.ms",
    "replica.fetch.backoff.ms",
)  # fmt: skip
SESSION_TIMEOUT = "broker.session.timeout.ms"
MIN_ISR = 2
# (label, replication factor, acks); the first two are the ratio column of the tables.
THROUGHPUT_CONFIGS = (("RF3 acks=all", 3, "all"), ("RF1 acks=1", 1, "1"), ("RF3 acks=1", 3, "1"))
LATENCY_CONFIGS = THROUGHPUT_CONFIGS[:2]
VICTIMS = ("broker", "controller", "stopped")
DEFAULT_VICTIMS = ("broker", "controller")
FAILOVER_LABELS = ["median", "session timeout", "min", "max"]  # ratio column: median / session timeout
ERROR_LINE = re.compile(r"Traceback|\bERROR\b|\bCRITICAL\b|Exception|Error:")


# --------------------------------------------------------------------------- arguments


def parse_args() -> argparse.Namespace:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, one round each (about 1.5 minutes)")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="comma list of " + ", ".join(SCENARIOS))
    parser.add_argument("--sizes", default="100,1000", help="record value sizes in bytes (throughput)")
    parser.add_argument("--mb", type=int, help="MB of values per throughput run (default 40, quick 15)")
    parser.add_argument("--producers", type=int, default=2, help="confluent-kafka producer processes (throughput)")
    parser.add_argument("--partitions", type=int, default=3, help="partitions of the throughput and failover topics")
    parser.add_argument("--rounds", type=int, help="rounds of throughput and latency (default 3, quick 1)")
    parser.add_argument("--latency-sizes", default="1000", help="record value sizes in bytes (latency)")
    parser.add_argument("--rate", type=int, default=1000, help="records/s of the latency producer")
    parser.add_argument("--duration", type=float, help="seconds of latency load per run (default 10, quick 5)")
    parser.add_argument("--repeat", type=int, help="failover runs per victim (default 3, quick 1)")
    parser.add_argument("--victims", default=",".join(DEFAULT_VICTIMS), help="comma list of " + ", ".join(VICTIMS))
    parser.add_argument("--failover-rate", type=int, default=1000, help="records/s of the failover producer")
    parser.add_argument("--warmup", type=float, default=1.5, help="seconds of failover load before the kill")
    parser.add_argument("--default-timeout-runs", type=int, help="failover runs with Moldau's default timings "
                                                                   "(default 1, quick 0)")
    add_override_option(parser, "a server config for every node (repeatable); wins over the short timings")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds one run may take")
    parser.add_argument("--keep", type=Path, help="keep the clusters' directories (logs, data) under this one")
    parser.add_argument("--no-save", action="store_true", help="do not write JSON under bench/results/")
    args = parser.parse_args()
    args.only = _choices(parser, "--only", args.only, SCENARIOS)
    args.victims = _choices(parser, "--victims", args.victims, VICTIMS)
    args.overrides = dict(args.override)
    args.rounds = int(args.rounds or (1 if args.quick else 3))
    args.repeat = int(args.repeat or (1 if args.quick else 3))
    args.mb = int(args.mb or (15 if args.quick else 40))
    args.duration = float(args.duration or (5 if args.quick else 10))
    if args.default_timeout_runs is None:
        args.default_timeout_runs = 0 if args.quick else 1
    return args


def _choices(parser: argparse.ArgumentParser, option: str, value: str, allowed: tuple[str, ...]) -> list[str]:
    chosen = [name.strip() for name in value.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in allowed]
    if unknown or not chosen:
        parser.error(f"{option}: unknown {unknown}; choose from {', '.join(allowed)}")
    return chosen


def settings_of(overrides: dict[str, str], names: tuple[str, ...] = SHOWN_SETTINGS) -> dict[str, str]:
    """The settings ``names`` (default: liveness and replication) the nodes run with: overrides, else defaults."""
    from moldau.config import BROKER_CONFIGS

    shown = {}
    for name in names:
        definition = BROKER_CONFIGS.get(name)
        shown[name] = overrides.get(name, str(definition.default) if definition is not None else "?")
    return shown


def settings_note(overrides: dict[str, str]) -> str:
    return "node settings: " + ", ".join(f"{k}={v}" for k, v in settings_of(overrides).items())


# --------------------------------------------------------------------------- the cluster


def running_brokers(cluster: LocalCluster) -> list[str]:
    return [str(n.kafka_address) for n in cluster.brokers if n.is_running and n.kafka_address is not None]


def partitions_at(address: str, topic: str) -> dict[int, Any]:
    """Partition index -> Metadata partition (leader_id, replica_nodes, isr_nodes) as this broker sees it."""
    meta = metadata_at(address, [topic], timeout_s=5.0)
    return {int(p.partition_index): p for t in meta.topics if t.name == topic for p in t.partitions}


def wait_settled(cluster: LocalCluster, topic: str, partitions: int, replicas: int, timeout_s: float) -> None:
    """Until every running broker sees every partition of `topic` led, with all `replicas` in its ISR."""

    def settled() -> bool:
        for address in running_brokers(cluster):
            seen = partitions_at(address, topic)
            if len(seen) != partitions:
                return False
            if any(int(p.leader_id) < 0 or len(p.isr_nodes) != replicas for p in seen.values()):
                return False
        return True

    waited(lambda: cluster.wait_until(settled, timeout_s, f"{topic}: every partition led with a full ISR",
                                       interval_s=0.05), "topic")


def admin(cluster: LocalCluster) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.bootstrap, "log_level": 3})


def create_topic(cluster: LocalCluster, topic: str, partitions: int, replicas: int, timeout_s: float) -> None:
    """Create `topic` (min.insync.replicas=2 when replicated) and wait until it is led with full ISRs everywhere."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    config = {"min.insync.replicas": str(MIN_ISR)} if replicas > 1 else {}
    client = admin(cluster)  # kept referenced until the answer: a destroyed client fails its futures
    futures = client.create_topics([NewTopic(topic, partitions, replicas, config=config)],
                                   operation_timeout=30, request_timeout=30)
    try:
        futures[topic].result(timeout=60)
    except Exception as exc:
        raise BenchError(f"CreateTopics {topic} failed: {exc}") from exc
    wait_settled(cluster, topic, partitions, replicas, timeout_s)


def delete_topic(cluster: LocalCluster, topic: str) -> None:
    client = admin(cluster)
    with contextlib.suppress(Exception):
        client.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)


def elect_preferred(cluster: LocalCluster, topic: str, partitions: int, timeout_s: float) -> None:
    """Move leadership back to each partition's first replica, so that every failover run starts balanced."""
    from confluent_kafka import ElectionType, TopicPartition

    wanted = [TopicPartition(topic, p) for p in range(partitions)]
    client = admin(cluster)
    with contextlib.suppress(Exception):  # "election not needed" is an error too
        client.elect_leaders(ElectionType.PREFERRED, wanted).result(timeout=30)

    def preferred() -> bool:
        return all(all(int(p.leader_id) == int(p.replica_nodes[0]) for p in partitions_at(a, topic).values())
                   for a in running_brokers(cluster))

    waited(lambda: cluster.wait_until(preferred, timeout_s, f"{topic}: preferred leaders", interval_s=0.1),
            "preferred election")


# --------------------------------------------------------------------------- throughput


def produce_once(cluster: LocalCluster, args: argparse.Namespace, size: int, replicas: int, acks: str) -> float:
    """Seconds the producer processes take to send the run's records into a fresh topic; count verified."""
    records = max(args.producers, args.mb * 1_000_000 // size // args.producers * args.producers)
    topic = unique_topic(f"rf{replicas}-{size}")
    create_topic(cluster, topic, args.partitions, replicas, args.time_limit)
    try:
        command = worker_command("produce", bootstrap=cluster.bootstrap, topic=topic,
                                 count=records // args.producers, size=size, acks=acks, timeout=args.time_limit)
        results = run_workers([command] * args.producers, args.time_limit + 30)
        check_delivered(results)
        seconds = span_seconds(results)
        verify_count(cluster.bootstrap, topic, records, args.time_limit)
    finally:
        delete_topic(cluster, topic)
    return float(records / seconds)


def alternating_rounds(configs: tuple[tuple[str, int, str], ...], rounds: int, what: str,
                       once: Callable[[int, str], T], describe: Callable[[T], str]
                       ) -> tuple[dict[str, list[T]], list[str]]:
    """Run `once(replicas, acks)` for each (label, replicas, acks) in every round, in alternating order so that
    neither configuration always runs on a fresher machine. Returns each label's results and the failures."""
    results: dict[str, list[T]] = {label: [] for label, _, _ in configs}
    problems: list[str] = []
    for round_, (label, replicas, acks) in alternating(configs, rounds):
        note(f"{what} {label} [round {round_ + 1}/{rounds}]")
        try:
            result = once(replicas, acks)
        except (BenchError, RuntimeError, OSError, TimeoutError) as exc:
            problems.append(f"{label} round {round_ + 1}: FAILED: {first_line(exc)}")
            note(problems[-1])
            continue
        results[label].append(result)
        note(describe(result))
    return results, problems


def _describe_rate(rate: float, size: int) -> str:
    return f"{rate:,.0f} records/s, {rate * size / 1e6:.1f} MB/s"


def _describe_figures(figures: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in figures.items())


def measure_throughput(cluster: LocalCluster, args: argparse.Namespace) -> list[Table]:
    tables = []
    for size in parse_sizes(args.sizes):
        samples, problems = alternating_rounds(
            THROUGHPUT_CONFIGS, args.rounds, f"throughput {size} B",
            functools.partial(produce_once, cluster, args, size),
            functools.partial(_describe_rate, size=size))
        table = Table(f"produce throughput, {size} B records, {args.mb} MB per run, {args.partitions} partitions, "
                      f"{args.producers} producer processes, median of {args.rounds}")
        for label, _, _ in THROUGHPUT_CONFIGS:
            median = statistics.median(samples[label]) if samples[label] else None
            table.row("records/s").values[label] = median
            table.row("MB/s").values[label] = None if median is None else median * size / 1e6
        middle = _ratio(table.row("records/s").values, "RF3 acks=1", "RF1 acks=1")
        table.notes.append(f"RF3 acks=1 / RF1 acks=1: {middle}; all runs (records/s): " + "; ".join(
            f"{label} " + ", ".join(f"{v:,.0f}" for v in values) for label, values in samples.items()))
        table.notes += problems
        tables.append(table)
    return tables


def _ratio(values: dict[str, float | None], numerator: str, denominator: str) -> str:
    top, bottom = values.get(numerator), values.get(denominator)
    return f"{top / bottom:.2f}" if top and bottom else "-"


# --------------------------------------------------------------------------- latency


def latency_once(cluster: LocalCluster, args: argparse.Namespace, size: int, replicas: int,
                 acks: str) -> dict[str, float]:
    topic = unique_topic(f"latency-rf{replicas}-{size}")
    create_topic(cluster, topic, 1, replicas, args.time_limit)
    total, limit = int(args.rate * args.duration), args.duration + 30
    common = {"bootstrap": cluster.bootstrap, "topic": topic, "timeout": limit}
    try:
        consumer = worker_command("latency-consume", expect=total, warmup=args.rate, fetch_wait_ms=500, **common)
        producer = worker_command("latency-produce", rate=args.rate, duration=args.duration, size=size, acks=acks,
                                  **common)
        producer[2:4] = ["bench.replication", LATENCY_PRODUCER]  # the same worker, 5 requests in flight
        consumed, produced = run_workers([consumer, producer], args.duration + 60)
    finally:
        delete_topic(cluster, topic)
    check_latency_run(consumed, produced)
    figures = {name: float(consumed[name]) for name in ("p50", "p99", "p99.9", "max")}
    figures["sent/s"] = produced["count"] / span_seconds([produced])
    return figures


def measure_latency(cluster: LocalCluster, args: argparse.Namespace) -> list[Table]:
    tables = []
    for size in parse_sizes(args.latency_sizes):
        runs, problems = alternating_rounds(
            LATENCY_CONFIGS, args.rounds, f"latency {size} B", functools.partial(latency_once, cluster, args, size),
            _describe_figures)
        samples = {label: {name: [run[name] for run in figures] for name in (figures[0] if figures else {})}
                   for label, figures in runs.items()}
        table = Table(f"end-to-end latency, {size} B records, {args.rate:,}/s for {args.duration:.0f} s, 1 partition, "
                      f"median of {args.rounds} (ms; lower is better)")
        for label, _, _ in LATENCY_CONFIGS:
            for name in ("p50", "p99", "p99.9", "max", "sent/s"):
                values = samples[label].get(name, [])
                metric = name if name == "sent/s" else f"{name} ms"
                table.row(metric).values[label] = statistics.median(values) if values else None
        table.notes += problems
        tables.append(table)
    return tables


LATENCY_PRODUCER = "latency-producer-worker"
IN_FLIGHT = 5


def run_latency_producer(argv: list[str]) -> None:
    """``bench.workers``' latency producer with at most IN_FLIGHT requests in flight per connection."""
    from bench import workers

    args = workers.parser().parse_args(argv)
    counter = workers.ErrorCounter()
    producer = workers.make_producer(args, counter, **{
        "linger.ms": 0, "max.in.flight.requests.per.connection": IN_FLIGHT})
    total = int(args.rate * args.duration)
    workers.announce_and_wait()
    start, sent = time.time_ns(), 0
    while sent < total:
        due = min(total, int((time.time_ns() - start) * args.rate / 1e9) + 1)
        for _ in range(due - sent):
            workers.produce_blocking(producer, args.topic, workers.stamped(args.size))
        sent = due
        producer.poll(0)
        time.sleep(0.0002)
    last_send = time.time_ns()
    left = producer.flush(args.timeout)
    workers.finish(start_ns=start, end_ns=last_send, count=sent, errors=counter.errors + left,
                   error=counter.first_error or (f"{left} records not acknowledged" if left else ""))


# --------------------------------------------------------------------------- failover


@dataclass
class SteadyWriter:
    """An idempotent acks=all producer in a thread: `rate` records/s round robin over the partitions.

    Notes each record's partition, send time and acknowledgement time (monotonic ns; -1 until acknowledged).
    """

    bootstrap: str
    topic: str
    partitions: int
    rate: int
    sent_ns: list[int] = field(default_factory=list)
    partition_of: list[int] = field(default_factory=list)
    acked_ns: list[int] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _producer: Any = None

    def __enter__(self) -> SteadyWriter:
        from confluent_kafka import Producer

        self._producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 0, "log_level": 3})
        self._producer.list_topics(self.topic, timeout=30)
        self._thread = threading.Thread(target=self._run, name="steady-writer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        value = b"x" * 100
        start, sent = time.monotonic_ns(), 0
        while not self._stop.is_set():
            due = int((time.monotonic_ns() - start) * self.rate / 1e9) + 1
            while sent < due:
                partition = sent % self.partitions
                self.sent_ns.append(time.monotonic_ns())
                self.partition_of.append(partition)
                self.acked_ns.append(-1)
                self._producer.produce(self.topic, value, partition=partition, on_delivery=self._callback(sent))
                sent += 1
            self._producer.poll(0)
            time.sleep(0.0002)

    def _callback(self, index: int) -> Any:
        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                self.acked_ns[index] = time.monotonic_ns()
            else:
                self.failed.append(str(err))

        return delivered

    def stop(self) -> None:
        if self._thread is not None and not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._producer.flush(60)

    def first_ack_after(self, partition: int, after_ns: int) -> int | None:
        """Acknowledgement time of the first record of `partition` sent after `after_ns` that is acknowledged."""
        acks = [a for s, p, a in zip(list(self.sent_ns), list(self.partition_of), list(self.acked_ns), strict=False)
                if p == partition and s > after_ns and a >= 0]
        return min(acks) if acks else None


@dataclass
class FailoverRun:
    victim: int
    partition: int
    was_controller: bool
    resumed_s: float
    ack_gap_s: float | None
    longest_gap_s: float
    longest_gap_any_s: float
    new_leader_s: float | None
    acked: int
    failed: int


def _longest_gap(times: list[int]) -> float:
    ordered = sorted(times)
    return max((b - a for a, b in itertools.pairwise(ordered)), default=0) / 1e9


def pick_victim(cluster: LocalCluster, topic: str, kind: str) -> tuple[int, int, bool]:
    """(node to kill, partition it leads, whether it is the active controller) for a victim of `kind`."""
    controller = cluster.active_controller(30).leader_id
    leaders = {p: int(meta.leader_id) for p, meta in partitions_at(running_brokers(cluster)[0], topic).items()}
    for partition, leader in sorted(leaders.items()):
        if (leader == controller) == (kind == "controller"):  # "stopped": a broker that is not the controller
            return leader, partition, leader == controller
    raise BenchError(f"no partition led by {'the' if kind == 'controller' else 'a non-'}active controller "
                     f"(controller {controller}, leaders {leaders})")


def failover_once(cluster: LocalCluster, args: argparse.Namespace, topic: str, kind: str) -> FailoverRun:
    victim, partition, was_controller = pick_victim(cluster, topic, kind)
    survivor = next(str(n.kafka_address) for n in cluster.brokers if n.node_id != victim)
    limit = args.time_limit
    with SteadyWriter(cluster.bootstrap, topic, args.partitions, args.failover_rate) as writer:
        time.sleep(args.warmup)
        killed_ns = time.monotonic_ns()
        if kind == "stopped":
            cluster.node(victim).send_term()  # controlled shutdown: leaderships move while it still answers
        else:
            cluster.node(victim).kill()
        new_leader_ns: int | None = None
        resumed_ns: int | None = None
        deadline = time.monotonic() + limit
        while (new_leader_ns is None or resumed_ns is None) and time.monotonic() < deadline:
            if new_leader_ns is None:
                with contextlib.suppress(OSError, ConnectionError):
                    leader = int(partitions_at(survivor, topic)[partition].leader_id)
                    if leader not in (victim, -1):
                        new_leader_ns = time.monotonic_ns()
            if resumed_ns is None:
                resumed_ns = writer.first_ack_after(partition, killed_ns)
            time.sleep(0.02)
        time.sleep(1.0)  # a little steady load after recovery, so that later stalls show in the gaps
        writer.stop()
    if kind == "stopped":
        cluster.node(victim).stop()  # waits for the shutdown to finish
    if resumed_ns is None:
        raise BenchError(f"partition {partition}: no record sent after the kill acknowledged within {limit:.0f} s")
    mine = [a for p, a in zip(writer.partition_of, writer.acked_ns, strict=True) if p == partition and a >= 0]
    before = [a for a in mine if a < killed_ns]
    every = [a for a in writer.acked_ns if a >= 0]
    return FailoverRun(
        victim=victim, partition=partition, was_controller=was_controller,
        resumed_s=(resumed_ns - killed_ns) / 1e9,
        ack_gap_s=(resumed_ns - max(before)) / 1e9 if before else None,
        longest_gap_s=_longest_gap(mine), longest_gap_any_s=_longest_gap(every),
        new_leader_s=None if new_leader_ns is None else (new_leader_ns - killed_ns) / 1e9,
        acked=len(every), failed=len(writer.failed),
    )  # fmt: skip


def recover(cluster: LocalCluster, topic: str, args: argparse.Namespace) -> None:
    """Restart every stopped node; wait for full ISRs, then preferred leaders."""
    for node in cluster.nodes.values():
        if not node.is_running:
            node.start()
    wait_registered(cluster, args.time_limit)
    wait_settled(cluster, topic, args.partitions, 3, args.time_limit)
    elect_preferred(cluster, topic, args.partitions, args.time_limit)


def failover_runs(cluster: LocalCluster, args: argparse.Namespace, kinds: list[str],
                  repeat: int) -> tuple[dict[str, list[FailoverRun]], list[str]]:
    topic = unique_topic("failover")
    create_topic(cluster, topic, args.partitions, 3, args.time_limit)
    runs: dict[str, list[FailoverRun]] = {kind: [] for kind in kinds}
    problems: list[str] = []
    for number in range(repeat):
        for kind in kinds:
            note(f"failover, victim {kind} [run {number + 1}/{repeat}]")
            try:
                run = failover_once(cluster, args, topic, kind)
            except (BenchError, RuntimeError, OSError) as exc:
                problems.append(f"victim {kind} run {number + 1}: FAILED: {first_line(exc)}")
                note(problems[-1])
            else:
                runs[kind].append(run)
                note(describe_run(run))
            recover(cluster, topic, args)
    return runs, problems


def describe_run(run: FailoverRun) -> str:
    new = "-" if run.new_leader_s is None else f"{run.new_leader_s:.3f}"
    gap = "- (no acknowledgement before the kill)" if run.ack_gap_s is None else f"{run.ack_gap_s:.3f} s"
    role = ", also the active controller" if run.was_controller else ""
    return (f"killed node {run.victim} (leader of partition {run.partition}{role}): new leader {new} s, "
            f"resumed {run.resumed_s:.3f} s, ack gap {gap}, longest gap {run.longest_gap_s:.3f} s "
            f"(any partition {run.longest_gap_any_s:.3f} s), {run.acked} acked, {run.failed} failed")


def failover_table(title: str, runs: dict[str, list[FailoverRun]], problems: list[str],
                   overrides: dict[str, str]) -> Table:
    session_s = int(settings_of(overrides)[SESSION_TIMEOUT]) / 1000
    table = Table(title)
    metrics = (("new leader", "new_leader_s"), ("kill -> resumed", "resumed_s"), ("ack gap", "ack_gap_s"),
               ("longest gap", "longest_gap_s"), ("longest gap, any partition", "longest_gap_any_s"))
    for kind, done in runs.items():
        for label, attribute in metrics:
            values = [v for v in (getattr(run, attribute) for run in done) if v is not None]
            row = table.row(f"victim {kind}: {label} s")
            row.values.update({"median": statistics.median(values) if values else None, "session timeout": session_s,
                               "min": min(values, default=None), "max": max(values, default=None)})
        table.notes += [f"victim {kind} run {i + 1}: {describe_run(run)}" for i, run in enumerate(done)]
    table.notes.insert(0, settings_note(overrides))
    table.notes += problems
    return table


def measure_failover(cluster: LocalCluster, args: argparse.Namespace, overrides: dict[str, str]) -> Table:
    try:
        runs, problems = failover_runs(cluster, args, args.victims, args.repeat)
    except (BenchError, RuntimeError, OSError) as exc:
        runs, problems = {}, [f"FAILED: {first_line(exc)}"]
    title = (f"leader failover, RF3 acks=all idempotent producer, {args.failover_rate:,} records/s over "
             f"{args.partitions} partitions, {args.repeat} runs per victim (seconds; lower is better)")
    return failover_table(title, runs, problems, overrides)


def measure_default_failover(args: argparse.Namespace) -> tuple[Table, list[str]]:
    overrides = dict(args.overrides)
    with scratch_dir("replication-defaults", args.keep) as base, LocalCluster(base, 3, overrides=overrides) as cluster:
        try:
            cluster.active_controller(60)
            wait_registered(cluster, 60)
            runs, problems = failover_runs(cluster, args, ["broker"], args.default_timeout_runs)
        except (BenchError, RuntimeError, OSError) as exc:
            runs, problems = {}, [f"FAILED: {first_line(exc)}"]
        logs = log_problems(cluster)
    title = (f"leader failover with Moldau's default timings, {args.default_timeout_runs} run(s) "
             "(seconds; lower is better)")
    return failover_table(title, runs, problems, overrides), logs


# --------------------------------------------------------------------------- server logs


def log_problems(cluster: LocalCluster, limit: int = 40) -> list[str]:
    """Error and traceback lines of every node's server.log (with the lines of each traceback), at most `limit`."""
    found: list[str] = []
    for node in cluster.nodes.values():
        found += file_problems(f"node {node.node_id}", node.log_path, max(0, limit - len(found)))
    return found


def file_problems(name: str, path: Path, limit: int = 40) -> list[str]:
    """Error and traceback lines of one log file (with the lines of each traceback), at most `limit`, and a count."""
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found: list[str] = []
    index, hits = 0, 0
    while index < len(lines):
        if ERROR_LINE.search(lines[index]):
            hits += 1
            block = [lines[index]]
            while index + 1 < len(lines) and (lines[index + 1].startswith((" ", "\t")) or
                                              lines[index].startswith("Traceback")):
                index += 1
                block.append(lines[index])
            if len(found) < limit:
                found.append(f"{name}: " + "\n      ".join(block))
        index += 1
    if hits:
        found.append(f"{name}: {hits} error or traceback line(s) in {path.name}")
    return found


# --------------------------------------------------------------------------- main


def main() -> None:
    args = parse_args()
    began = time.monotonic()
    overrides = {**FAST, **args.overrides}
    results: list[tuple[Table, list[str]]] = []
    config_labels = [label for label, _, _ in THROUGHPUT_CONFIGS]
    logs: list[str] = []
    note(settings_note(overrides))
    with scratch_dir("replication", args.keep) as base, LocalCluster(base, 3, overrides=overrides) as cluster:
        cluster.active_controller(60)
        wait_registered(cluster, 60)
        if "throughput" in args.only:
            for table in measure_throughput(cluster, args):
                results.append((table, config_labels))
                print(render(table, config_labels), flush=True)
        if "latency" in args.only:
            for table in measure_latency(cluster, args):
                results.append((table, config_labels[:2]))
                print(render(table, config_labels[:2]), flush=True)
        if "failover" in args.only:
            results.append((measure_failover(cluster, args, overrides), FAILOVER_LABELS))
            print(render(*results[-1]), flush=True)
        logs += log_problems(cluster)
    if "failover" in args.only and args.default_timeout_runs > 0:
        table, default_logs = measure_default_failover(args)
        results.append((table, FAILOVER_LABELS))
        print(render(*results[-1]), flush=True)
        logs += [f"(default timings) {line}" for line in default_logs]
    print("\n== server.log errors and tracebacks" + ("" if logs else ": none"))
    for line in logs:
        print(f"   {line}")
    print(f"\nwhole run: {time.monotonic() - began:.0f} s")
    if not args.no_save:
        labels = sorted({label for _, names in results for label in names})
        path = save_results("replication", labels, [table for table, _ in results],
                            {"overrides": overrides, "server_log_problems": logs})
        print(f"results written to {path}")


if __name__ == "__main__":
    if sys.argv[1:2] == [LATENCY_PRODUCER]:
        run_latency_producer(["latency-produce", *sys.argv[2:]])
    else:
        main()
