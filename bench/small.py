"""Small requests: produce requests per second when every request carries a single record.

For each record size (default 100 B and 1000 B), PRODUCERS confluent-kafka processes (default 3) send
into one fresh 1-partition topic for the run's duration with linger.ms=0, batch.num.messages=1 and
acks=1, each keeping at most WINDOW records outstanding (librdkafka still caps in-flight requests per
connection at 5). Since a batch holds one record and the topic one partition, each produce request
carries exactly one record, so records/s is requests/s. This is what per-request overhead costs.

The rate is records acknowledged divided by the time from the first worker's start to the last
worker's flush. The topic is then read back with kcat: a count different from the acknowledged one
fails the run.

Run from the repository root:  python -m bench.small [--target moldau|tansu|both] [--quick]
"""

from __future__ import annotations

import argparse
from functools import partial

from bench.common import (
    Broker,
    Case,
    check_delivered,
    fresh_topic,
    parse_sizes,
    repeats,
    run_cases,
    run_workers,
    scenario_main,
    span_seconds,
    verify_count,
    worker_command,
)
from bench.tables import Measurements, Table, TargetResult, build_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--producers", type=int, default=3, help="producer processes")
    parser.add_argument("--window", type=int, default=10, help="records outstanding per producer at most")
    parser.add_argument("--duration", type=float, help="seconds of load per run (default 5, quick 4)")


def duration(args: argparse.Namespace) -> float:
    """Seconds of load per run."""
    return float(args.duration or (4 if args.quick else 5))


def produce(broker: Broker, topic: str, args: argparse.Namespace, size: int) -> tuple[int, float]:
    """Records acknowledged by all producers, and the seconds they took."""
    limit = duration(args) + 60
    command = worker_command(
        "small", bootstrap=broker.bootstrap, topic=topic, size=size, acks=1, window=args.window,
        duration=duration(args), timeout=limit,
    )  # fmt: skip
    results = run_workers([command] * args.producers, limit + 30)
    check_delivered(results)
    return sum(r["count"] for r in results), span_seconds(results)


def one_run(broker: Broker, _sink: TargetResult, args: argparse.Namespace, size: int) -> Measurements:
    """One run into a fresh topic, checked by reading it back."""
    with fresh_topic(broker.bootstrap, f"small-{size}", 1) as topic:
        records, seconds = produce(broker, topic, args, size)
        verify_count(broker.bootstrap, topic, records, 120)
    return {f"{size} B requests/s": records / seconds}


def cases(args: argparse.Namespace) -> list[Case]:
    """One case per record size."""
    return [
        Case(f"small requests {size} B", partial(one_run, args=args, size=size)) for size in parse_sizes(args.sizes)
    ]


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Table]:
    """Measure every target; one table for all record sizes. There is no raw limit here."""
    results = run_cases(targets, cases(args), repeats(args))
    title = (
        f"small requests, one record each, {args.producers} producers, {duration(args):.0f} s per size, "
        f"median of {repeats(args)}"
    )
    return [build_table(title, results, {})]


def main() -> None:
    scenario_main("small", __doc__, add_arguments, run)


if __name__ == "__main__":
    main()
