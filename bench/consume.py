"""Consume throughput: records/s and MB/s a broker serves to clients reading a topic from the beginning.

For each record size (default 100 B and 1000 B) and a 1- and a 4-partition topic, N records are first
loaded with kcat (untimed, acks=1). Then two readers run one after the other, both without consumer
groups:

* kcat (C, librdkafka) ``-C -o beginning -e``, timed from process start to exit; it prints one byte
  per record, which is counted;
* one confluent-kafka process assigned every partition from the beginning (queued.min.messages=1000000
  so that the client prefetches; other settings at their defaults), timed from its first to its last
  consume() call, stopping once it has N records.

A reader that got a different number of records than were loaded is reported as failed. "best MB/s"
is also shown as a ratio of the "loopback, discard" raw limit measured at the start of the same run.

Run from the repository root:  python -m bench.consume [--target moldau|tansu|both] [--quick]
"""

from __future__ import annotations

import argparse
from functools import partial
from pathlib import Path

from bench.common import (
    BenchError,
    Broker,
    Case,
    attempt,
    fresh_topic,
    line_files,
    parse_sizes,
    repeats,
    run_cases,
    run_timed,
    run_workers,
    scenario_main,
    span_seconds,
    worker_command,
)
from bench.produce import BATCHING
from bench.tables import Measurements, Table, TargetResult, best_rate, raw_note, size_tables

PARTITION_COUNTS = (1, 4)
READERS = ("kcat", "python")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--mb", type=int, help="MB of record values per topic (default 200, quick 100)")
    parser.add_argument("--time-limit", type=float, default=120.0, help="seconds allowed per run")


def record_count(args: argparse.Namespace, size: int) -> int:
    """Records loaded per topic for ``size``-byte values."""
    return max(1, (args.mb or (100 if args.quick else 200)) * 1_000_000 // size)


def load(broker: Broker, topic: str, lines: Path, partitions: int, limit: float) -> None:
    """Fill the topic from the file, spread over its partitions (untimed)."""
    spread = ["-p", "0"] if partitions == 1 else ["-X", "sticky.partitioning.linger.ms=0"]
    cmd = ["kcat", "-P", "-q", "-b", broker.bootstrap, "-t", topic, *spread, *BATCHING, "-X", "acks=1"]
    run_timed([*cmd, "-l", str(lines)], limit)


def kcat_read(broker: Broker, topic: str, records: int, limit: float) -> float:
    """Seconds kcat takes to read the whole topic; fails unless it got ``records``."""
    cmd = ["kcat", "-C", "-q", "-b", broker.bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", "."]
    seconds, out = run_timed(cmd, limit)
    if len(out) != records:
        raise BenchError(f"kcat read {len(out)} records, {records} were loaded")
    return seconds


def python_read(broker: Broker, topic: str, partitions: int, records: int, limit: float) -> float:
    """Seconds one confluent-kafka consumer takes to read ``records``; fails if it got fewer."""
    command = worker_command(
        "consume", bootstrap=broker.bootstrap, topic=topic, expect=records, timeout=limit,
        partitions=",".join(str(p) for p in range(partitions)),
    )  # fmt: skip
    (result,) = run_workers([command], limit + 30)
    if result["count"] != records or result["error"]:
        raise BenchError(f"consumer got {result['count']} of {records} records {result['error']}".strip())
    return span_seconds([result])


def figures(prefix: str, records: int, size: int, seconds: float) -> Measurements:
    """records/s and MB/s of one read."""
    return {f"{prefix} rec/s": records / seconds, f"{prefix} MB/s": records * size / seconds / 1e6}


def read_figures(
    reader: str, broker: Broker, topic: str, size: int, partitions: int, records: int, limit: float
) -> Measurements:
    """Read the whole topic with one reader and return its figures."""
    if reader == "kcat":
        seconds = kcat_read(broker, topic, records, limit)
    else:
        seconds = python_read(broker, topic, partitions, records, limit)
    return figures(f"{size} B {partitions}p {reader}", records, size, seconds)


def one_topic(broker: Broker, sink: TargetResult, args: argparse.Namespace, size: int, partitions: int) -> Measurements:
    """Load one topic, read it with both readers (each figure lands in ``sink``), drop it."""
    records, prefix = record_count(args, size), f"{size} B {partitions}p"
    with fresh_topic(broker.bootstrap, f"consume-{size}-{partitions}", partitions) as topic:
        load(broker, topic, args.lines[size], partitions, args.time_limit)
        for reader in READERS:
            read = partial(read_figures, reader, broker, topic, size, partitions, records, args.time_limit)
            attempt(sink, f"{prefix} {reader}", read)
    return {f"{prefix} best MB/s": best_rate(sink.values)}


def cases(args: argparse.Namespace) -> list[Case]:
    """One case per record size and partition count."""
    return [
        Case(f"consume {size} B {partitions}p", partial(one_topic, args=args, size=size, partitions=partitions))
        for size in parse_sizes(args.sizes)
        for partitions in PARTITION_COUNTS
    ]


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Table]:
    """Measure every target; one table per record size."""
    sizes = parse_sizes(args.sizes)
    with line_files("consume", {size: record_count(args, size) for size in sizes}) as args.lines:
        results = run_cases(targets, cases(args), repeats(args))
    titles = {size: f"consume, {size} B records, {record_count(args, size):,} per topic, median of {repeats(args)}"
              for size in sizes}
    baselines = {f"{p}p best MB/s": limits["discard"] for p in PARTITION_COUNTS}
    return size_tables(titles, results, baselines, raw_note(limits, "discard"))


def main() -> None:
    scenario_main("consume", __doc__, add_arguments, run, raw_limits=True)


if __name__ == "__main__":
    main()
