"""Transactions: transactional produce throughput against idempotent produce, measured side by side.

For each record size (``--sizes``, default 100 B and 1000 B), three configurations write into a fresh topic of
``--partitions`` (4) partitions, one after the other in each of ``--rounds`` rounds, in alternating order:

* **idempotent** (the baseline): ``--producers`` (2) confluent-kafka processes with enable.idempotence=true,
  acks=all and the batching of ``bench/produce.py`` (linger.ms=5, batch.size=1000000, no compression);
* **txn 10**: the same producers, each with its own transactional.id, committing every 10 records;
* **txn 10000**: the same, committing every 10,000 records.

The producers are the ``txn-produce`` worker of ``bench/workers.py``: within a transaction the worker produces
its records, flushes them, then calls commit_transaction, whose duration (EndTxn: the coordinator writes the
commit to ``__transaction_state`` and the markers to every partition of the transaction) is recorded per
transaction. Throughput is timed from the first worker's start to the last worker's end; before it starts, each
producer has its producer id and has written one warm-up record (in a transaction of its own when
transactional). The idempotent and txn 10000 runs write ``--mb`` MB of values (default 100, quick 10; per
producer a multiple of 10,000 records); the txn 10 runs write ``--small-txns`` transactions per producer
(default 1000, quick 200), since each costs a few round trips. After every run the topic is read back with kcat
at ``isolation.level=read_committed`` and the records counted: a run that lost or duplicated records fails. The
partitions' end offsets minus the records (warm-up ones included) give the control records (transaction
markers) in the log.

Reported per configuration: records/s, MB/s and the ratio of records/s to the idempotent baseline (from the
medians over rounds; every round's figures are printed under the table), and for the transactional ones the
transactions/s, commit_transaction p50/p99 in ms (all of a run's transactions pooled, median over rounds) and
the markers per transaction.

By default this runs against one Moldau node (``python -m moldau server``, the benchmarks' default command, on a
free port in a fresh temporary directory). ``--cluster`` runs the same on three combined broker+controller
nodes (the cluster of ``bench/replication.py``, its short liveness timings) with replication factor 3 and
min.insync.replicas=2. Every setting used is printed. At the end the server logs are searched for errors.

Run from the repository root:  python -m bench.transactions [--quick] [--cluster]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench import replication
from bench.common import (
    base_parser,
    check_delivered,
    consumer_config,
    create_topic,
    delete_topic,
    kcat_version,
    parse_sizes,
    run_workers,
    running_broker,
    scratch_dir,
    span_seconds,
    unique_topic,
    verify_count,
    wait_registered,
    worker_command,
)
from bench.tables import Table, render, save_results
from bench.workers import THROUGHPUT_BATCHING, percentile
from tests.support.cluster import LocalCluster

# (label, records per transaction (0: not transactional), acks); the idempotent baseline first.
CONFIGS = (("idempotent", 0, "all"), ("txn 10", 10, "all"), ("txn 10000", 10_000, "all"))
BASELINE = CONFIGS[0][0]
SMALL_TXN = CONFIGS[1][1]
LARGE_TXN = CONFIGS[2][1]
READ_COMMITTED = ["-X", "isolation.level=read_committed"]
TXN_SETTINGS = (
    "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr", "transaction.partition.verification.enable", "transaction.max.timeout.ms",
)  # fmt: skip


def parse_args() -> argparse.Namespace:
    parser = base_parser(__doc__)
    parser.set_defaults(target="moldau")
    parser.add_argument("--mb", type=int, help="MB of values per idempotent and txn 10000 run (default 100, quick 10)")
    parser.add_argument("--small-txns", type=int, help="transactions per producer in a txn 10 run "
                                                        "(default 1000, quick 200)")  # fmt: skip
    parser.add_argument("--producers", type=int, default=2, help="confluent-kafka producer processes")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of each run's topic")
    parser.add_argument("--cluster", action="store_true", help="three nodes, replication factor 3, instead of one")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds one run may take")
    args = parser.parse_args()
    if args.target != "moldau":
        parser.error("--target: only moldau (this scenario compares configurations of one broker)")
    args.rounds = int(args.repeat or (1 if args.quick else 3))
    args.mb = int(args.mb or (10 if args.quick else 100))
    args.small_txns = int(args.small_txns or (200 if args.quick else 1000))
    return args


def record_count(args: argparse.Namespace, size: int, txn_records: int) -> int:
    """Records of one run: ``--small-txns`` transactions of 10 per producer, else ``--mb`` MB of values."""
    producers, mb, small_txns = int(args.producers), int(args.mb), int(args.small_txns)
    if txn_records == SMALL_TXN:
        return producers * small_txns * SMALL_TXN
    return producers * max(1, mb * 1_000_000 // size // producers // LARGE_TXN) * LARGE_TXN


# --------------------------------------------------------------------------- where the runs go


@dataclass
class Target:
    """The broker(s) under test: where to connect, how to make and drop a topic, what to print."""

    bootstrap: str
    create: Callable[[str], None]
    delete: Callable[[str], None]
    settings: dict[str, str]
    logs: Callable[[], list[str]]


@contextlib.contextmanager
def single_node(args: argparse.Namespace) -> Iterator[Target]:
    """One Moldau node with its defaults (``bench.common.running_broker``)."""
    with running_broker("moldau", "moldau") as broker:
        yield Target(
            broker.bootstrap,
            lambda topic: create_topic(broker.bootstrap, topic, args.partitions),
            lambda topic: delete_topic(broker.bootstrap, topic),
            {"nodes": "1", "replication.factor": "1", **replication.settings_of({}, TXN_SETTINGS)},
            lambda: replication.file_problems("node 1", broker.log),
        )


@contextlib.contextmanager
def three_nodes(args: argparse.Namespace) -> Iterator[Target]:
    """Three combined nodes with ``bench/replication.py``'s timings; topics of replication factor 3."""
    overrides = dict(replication.FAST)
    settings = replication.settings_of(overrides, (*replication.SHOWN_SETTINGS, *TXN_SETTINGS))
    with scratch_dir("transactions") as base, LocalCluster(base, 3, overrides=overrides) as cluster:
        cluster.active_controller(60)
        wait_registered(cluster, 60)
        yield Target(
            cluster.bootstrap,
            lambda topic: replication.create_topic(cluster, topic, args.partitions, 3, args.time_limit),
            lambda topic: replication.delete_topic(cluster, topic),
            {"nodes": "3", "replication.factor": "3", "min.insync.replicas": str(replication.MIN_ISR), **settings},
            lambda: replication.log_problems(cluster),
        )


# --------------------------------------------------------------------------- one run


def control_records(bootstrap: str, topic: str, partitions: int, records: int) -> int:
    """Offsets in the topic's partitions not taken by records: the transaction markers."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(consumer_config(bootstrap))
    try:
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)]
    finally:
        consumer.close()
    return int(sum(ends)) - records


def produce_once(target: Target, args: argparse.Namespace, size: int, txn_records: int, acks: str) -> dict[str, float]:
    """One run of one configuration into a fresh topic; records counted back (read_committed)."""
    records = record_count(args, size, txn_records)
    topic = unique_topic(f"txn{txn_records}-{size}")
    target.create(topic)
    try:
        common = {"bootstrap": target.bootstrap, "topic": topic, "size": size, "acks": acks, "timeout": args.time_limit}
        per_producer = {"count": records // args.producers, "txn_records": txn_records}
        commands = [
            worker_command("txn-produce", transactional_id=f"bench-{uuid.uuid4().hex[:12]}", **common, **per_producer)
            for _ in range(args.producers)
        ]
        results = run_workers(commands, args.time_limit + 30)
        check_delivered(results)
        seconds = span_seconds(results)
        warmup = sum(r["warmup"] for r in results)
        verify_count(target.bootstrap, topic, records + warmup, args.time_limit, READ_COMMITTED)
        # Each warm-up transaction wrote one record to one partition, hence one marker.
        markers = control_records(target.bootstrap, topic, args.partitions, records + warmup)
        markers -= warmup if txn_records else 0
    finally:
        target.delete(topic)
    return figures(records, size, seconds, sorted(ns for r in results for ns in r["commit_ns"]), markers)


def figures(records: int, size: int, seconds: float, commits: list[int], markers: int) -> dict[str, float]:
    """The figures of one run; the commit figures only for transactional runs."""
    found = {"records/s": records / seconds, "MB/s": records * size / seconds / 1e6}
    if commits:
        found["transactions/s"] = len(commits) / seconds
        found["commit p50 ms"] = percentile(commits, 0.5)
        found["commit p99 ms"] = percentile(commits, 0.99)
        found["markers/transaction"] = markers / len(commits)
    return found


def describe(found: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:,.2f}" for name, value in found.items())


# --------------------------------------------------------------------------- tables


def size_table(args: argparse.Namespace, target: Target, size: int) -> Table:
    """All rounds of the three configurations for one record size."""
    runs, problems = replication.alternating_rounds(
        CONFIGS, args.rounds, f"{size} B", functools.partial(produce_once, target, args, size), describe
    )
    counts = ", ".join(f"{label} {record_count(args, size, txn):,}" for label, txn, _ in CONFIGS)
    table = Table(
        f"{'3 nodes RF3' if args.cluster else '1 node'}, {size} B records, {args.producers} producers, "
        f"{args.partitions} partitions, median of {args.rounds} (records per run: {counts})"
    )
    for metric in ("records/s", "MB/s", "transactions/s", "commit p50 ms", "commit p99 ms", "markers/transaction"):
        for label, _, _ in CONFIGS:
            values = [run[metric] for run in runs[label] if metric in run]
            table.row(metric).values[label] = statistics.median(values) if values else None
    rates = table.row("records/s").values
    for label, _, _ in CONFIGS:
        top, bottom = rates.get(label), rates.get(BASELINE)
        table.row(f"records/s / {BASELINE}").values[label] = top / bottom if top and bottom else None
    table.notes.append("every round, records/s: " + "; ".join(
        f"{label} " + ", ".join(f"{run['records/s']:,.0f}" for run in runs[label]) for label, _, _ in CONFIGS
    ))  # fmt: skip
    table.notes += problems
    return table


def settings_lines(args: argparse.Namespace, target: Target) -> list[str]:
    """Every setting of the run: brokers, producers, amounts."""
    producer = {"enable.idempotence": "true", "acks": "all", "compression.codec": "none", **THROUGHPUT_BATCHING}
    return [
        "brokers: " + ", ".join(f"{k}={v}" for k, v in target.settings.items()),
        "producers: " + ", ".join(f"{k}={v}" for k, v in producer.items()) + ", transactional.id per process "
        "and run (transactional configurations), commit_transaction after flush()",
        f"run: sizes={args.sizes} producers={args.producers} partitions={args.partitions} rounds={args.rounds} "
        f"mb={args.mb} small_txns={args.small_txns} time_limit={args.time_limit:.0f}s; "
        f"records read back with kcat {' '.join(READ_COMMITTED)} ({kcat_version()})",
    ]


def main() -> None:
    args = parse_args()
    began = time.monotonic()
    labels = [label for label, _, _ in CONFIGS]
    tables: list[Table] = []
    start = three_nodes if args.cluster else single_node
    with start(args) as target:
        settings = settings_lines(args, target)
        for line in settings:
            print(line, flush=True)
        for size in parse_sizes(args.sizes):
            tables.append(size_table(args, target, size))
            print(render(tables[-1], labels), flush=True)
        logs = target.logs()
    print("\n== server.log errors and tracebacks" + ("" if logs else ": none"))
    for line in logs:
        print(f"   {line}")
    print(f"\nwhole run: {time.monotonic() - began:.0f} s")
    if not args.no_save:
        extra: dict[str, Any] = {"settings": settings, "server_log_problems": logs}
        path = save_results("transactions", labels, tables, extra)
        print(f"results written to {path}")


if __name__ == "__main__":
    main()
