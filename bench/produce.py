"""Produce throughput: records/s and MB/s a broker ingests from clients sending large batches.

For each record size (default 100 B and 1000 B) and acks=1 / acks=all, two load generators run one
after the other, each into a topic created beforehand:

* kcat (C, librdkafka) producing a pre-generated file of N lines (``kcat -P -l``) into a 1-partition
  topic with linger.ms=5, batch.size=1000000, no compression; timed from process start to exit;
* PRODUCERS confluent-kafka processes (same settings) sharing N records over a 4-partition topic; timed
  from the first worker's start to the last worker's flush.

After each run every record is read back with kcat and counted; a run that lost or duplicated records
is reported as failed, not as a figure. "best MB/s" is the better generator, also shown as a ratio of
the "loopback + file append" raw limit measured at the start of the same run (see bench/rawlimit.py).

Run from the repository root:  python -m bench.produce [--target moldau|tansu|both] [--quick]
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from bench.common import (
    Broker,
    Case,
    attempt,
    check_delivered,
    fresh_topic,
    line_files,
    parse_sizes,
    repeats,
    run_cases,
    run_timed,
    run_workers,
    scenario_main,
    span_seconds,
    verify_count,
    worker_command,
)
from bench.tables import Measurements, Table, TargetResult, best_rate, raw_note, size_tables

KCAT_PARTITIONS = 1
PYTHON_PARTITIONS = 4
ACKS = ("1", "all")
GENERATORS = ("kcat", "python")
BATCHING = ["-X", "linger.ms=5", "-X", "batch.size=1000000", "-X", "compression.codec=none", "-z", "none"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--mb", type=int, help="MB of record values per run (default 200, quick 100)")
    parser.add_argument("--producers", type=int, default=2, help="confluent-kafka producer processes")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds allowed per run")


def record_count(args: argparse.Namespace, size: int) -> int:
    """Records per run for ``size``-byte values, a multiple of the producer process count."""
    budget = (args.mb or (100 if args.quick else 200)) * 1_000_000
    return int(max(args.producers, budget // size // args.producers * args.producers))


def kcat_seconds(broker: Broker, topic: str, lines: Path, acks: str, limit: float) -> float:
    """Seconds kcat takes to produce the file's lines to partition 0."""
    cmd = ["kcat", "-P", "-q", "-b", broker.bootstrap, "-t", topic, "-p", "0", *BATCHING]
    return run_timed([*cmd, "-X", f"acks={acks}", "-l", str(lines)], limit)[0]


def python_seconds(broker: Broker, topic: str, args: argparse.Namespace, size: int, acks: str) -> float:
    """Seconds ``args.producers`` processes take to produce the run's records together."""
    per_process = record_count(args, size) // args.producers
    command = worker_command(
        "produce", bootstrap=broker.bootstrap, topic=topic, count=per_process, size=size, acks=acks,
        timeout=args.time_limit,
    )  # fmt: skip
    results = run_workers([command] * args.producers, args.time_limit + 30)
    check_delivered(results)
    return span_seconds(results)


def figures(prefix: str, records: int, size: int, seconds: float) -> Measurements:
    """records/s and MB/s of one run."""
    return {f"{prefix} rec/s": records / seconds, f"{prefix} MB/s": records * size / seconds / 1e6}


def one_generator(broker: Broker, args: argparse.Namespace, size: int, acks: str, kind: str) -> Measurements:
    """Produce with one generator into a fresh topic, check the count, return its figures."""
    records = record_count(args, size)
    partitions = KCAT_PARTITIONS if kind == "kcat" else PYTHON_PARTITIONS
    with fresh_topic(broker.bootstrap, f"produce-{size}-{kind}", partitions) as topic:
        if kind == "kcat":
            seconds = kcat_seconds(broker, topic, args.lines[size], acks, args.time_limit)
        else:
            seconds = python_seconds(broker, topic, args, size, acks)
        verify_count(broker.bootstrap, topic, records, args.time_limit)
    label = f"kcat {partitions}p" if kind == "kcat" else f"{args.producers}x python {partitions}p"
    return figures(f"{size} B acks={acks} {label}", records, size, seconds)


def both_generators(broker: Broker, sink: TargetResult, args: argparse.Namespace, size: int, acks: str) -> Measurements:
    """Both generators one after the other, then the better one's MB/s."""
    for kind in GENERATORS:
        attempt(sink, f"{size} B acks={acks} {kind}", partial(one_generator, broker, args, size, acks, kind))
    return {f"{size} B acks={acks} best MB/s": best_rate(sink.values)}


def cases(args: argparse.Namespace) -> list[Case]:
    """One case per record size and acks setting."""
    return [
        Case(f"produce {size} B acks={acks}", partial(both_generators, args=args, size=size, acks=acks))
        for size in parse_sizes(args.sizes)
        for acks in ACKS
    ]


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Table]:
    """Measure every target; one table per record size."""
    sizes = parse_sizes(args.sizes)
    with line_files("produce", {size: record_count(args, size) for size in sizes}) as args.lines:
        results = run_cases(targets, cases(args), repeats(args))
    titles = {size: f"produce, {size} B records, {record_count(args, size):,} per run, median of {repeats(args)}"
              for size in sizes}
    baselines = {f"acks={a} best MB/s": limits["append"] for a in ACKS}
    return size_tables(titles, results, baselines, raw_note(limits, "append"))


def main() -> None:
    scenario_main("produce", __doc__, add_arguments, run, raw_limits=True)


if __name__ == "__main__":
    main()
