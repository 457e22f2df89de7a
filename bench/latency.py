"""End-to-end latency: time from a producer's send call to a consumer receiving the record, at fixed rates.

For each record size (default 100 B and 1000 B) and rate (default 1000 and 10000 records/s), into a
fresh 1-partition topic:

* one confluent-kafka consumer process, assigned the partition at its end offset (no group), polls;
* one confluent-kafka producer process (acks=1, linger.ms=0) sends records at the fixed rate for the
  run's duration, each value starting with ``time.time_ns()`` taken just before the send call;
* the consumer takes ``time.time_ns()`` when each batch of records reaches it and records the
  difference (both processes share one machine clock).

The first second of records is left out as warm-up. Reports p50, p99, p99.9 and max in ms, and the
rate the producer actually achieved ("sent/s": records over the time from first to last send call; if
it falls short of the target the producer could not keep up on this machine). A run whose
consumer did not receive every record sent is reported as failed. The consumer uses fetch.wait.max.ms=500
(Kafka's default; ``--fetch-wait-ms`` changes it), so a broker that does not answer a waiting fetch as
soon as data arrives shows it here.

Run from the repository root:  python -m bench.latency [--target moldau|tansu|both] [--quick]
"""

from __future__ import annotations

import argparse
from functools import partial

from bench.common import (
    Broker,
    Case,
    check_latency_run,
    fresh_topic,
    parse_sizes,
    repeats,
    run_cases,
    run_workers,
    scenario_main,
    span_seconds,
    worker_command,
)
from bench.tables import Measurements, Table, TargetResult, size_tables

PERCENTILES = ("p50", "p99", "p99.9", "max")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--rates", default="1000,10000", help="records per second, comma separated")
    parser.add_argument("--fetch-wait-ms", type=int, default=500, help="consumer fetch.wait.max.ms")
    parser.add_argument("--duration", type=float, help="seconds of load per run (default 6, quick 4)")


def duration(args: argparse.Namespace) -> float:
    """Seconds of load per run."""
    return float(args.duration or (4 if args.quick else 6))


def commands(broker: Broker, topic: str, args: argparse.Namespace, size: int, rate: int) -> list[list[str]]:
    """Consumer first, then producer."""
    total, limit = int(rate * duration(args)), duration(args) + 30
    common = {"bootstrap": broker.bootstrap, "topic": topic, "timeout": limit}
    consumer = worker_command("latency-consume", expect=total, warmup=rate, fetch_wait_ms=args.fetch_wait_ms, **common)
    producer = worker_command("latency-produce", rate=rate, duration=duration(args), size=size, **common)
    return [consumer, producer]


def one_run(broker: Broker, _sink: TargetResult, args: argparse.Namespace, size: int, rate: int) -> Measurements:
    """One fixed-rate run in a fresh topic."""
    with fresh_topic(broker.bootstrap, f"latency-{size}-{rate}", 1) as topic:
        consumed, produced = run_workers(commands(broker, topic, args, size, rate), duration(args) + 60)
    check_latency_run(consumed, produced)
    figures = {f"{size} B {rate}/s {name} ms": consumed[name] for name in PERCENTILES}
    return {**figures, f"{size} B {rate}/s sent/s": produced["count"] / span_seconds([produced])}


def cases(args: argparse.Namespace) -> list[Case]:
    """One case per record size and rate."""
    return [
        Case(f"latency {size} B {rate}/s", partial(one_run, args=args, size=size, rate=rate))
        for size in parse_sizes(args.sizes)
        for rate in parse_sizes(args.rates)
    ]


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Table]:
    """Measure every target; one table per record size. Lower is better; there is no raw limit here."""
    results = run_cases(targets, cases(args), repeats(args))
    titles = {
        size: f"end-to-end latency, {size} B records, {duration(args):.0f} s per rate, "
        f"median of {repeats(args)} (lower is better)"
        for size in parse_sizes(args.sizes)
    }
    return size_tables(titles, results, {})


def main() -> None:
    scenario_main("latency", __doc__, add_arguments, run)


if __name__ == "__main__":
    main()
