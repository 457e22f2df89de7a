"""Segment rolls under load: does a partition rolling its segments pause the requests of every other client?

One single-node Moldau broker. A *steady* producer writes one 64 KiB batch every 10 ms (acks=1, one request in
flight) to its own single-partition topic and records each request's latency. Beside it, a *bulk* producer
writes 1 MiB batches at ``--mbps`` MB/s (paced, acks=1) into another topic, in two kinds of phase of
``--seconds`` each, alternating ``--rounds`` times:

* **rolls**: the bulk topic has ``segment.bytes`` = ``--segment-mb`` MiB (128 by default: at 200 MB/s a roll
  every 0.7 s), so the periodic pass makes a rolled segment durable (fsync) every second or so;
* **no rolls** (the baseline): a new bulk topic each phase, with ``segment.bytes`` at its largest (2 GiB), which
  the phase does not fill, so nothing rolls; the same bytes are appended at the same rate.

The two kinds take turns going first (no rolls first in odd rounds, rolls first in even ones): on this machine
the second phase of a pair ran with a median 1.6-1.8 times the first's whichever kind it was, so a fixed order
would charge that to one kind. Use an even ``--rounds``.

The steady producer's latency p50/p99/p99.9/max, and how many of its requests took over 10 ms, are printed for
both kinds (the pooled samples of each, the first second of every phase left out), with the ratios rolls / no
rolls.

Run from the repository root, for example:
    python -m bench.roll_latency
    python -m bench.roll_latency --mbps 64 --rounds 2
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from bench.bytes_scale import Node, SteadyProducer, one_node
from bench.common import BenchError, add_override_option, create_topic, exit_on_sigterm, note
from bench.raw_driver import MIB

STEADY_TOPIC = "roll-latency-steady"
LARGEST_SEGMENT_BYTES = 2**31 - 1
STEADY_BATCH_BYTES = 64 * 1024
STEADY_EVERY_S = 0.01
SETTLE_S = 1.0  # left out at the start of each phase


@dataclass
class Phase:
    """One phase's steady latencies (seconds), after SETTLE_S."""

    rolls: bool
    latencies: list[float] = field(default_factory=list)


def run_phase(node: Node, bulk_topic: str, rolls: bool, args: argparse.Namespace) -> Phase:
    steady = SteadyProducer(node, STEADY_TOPIC, STEADY_BATCH_BYTES, STEADY_EVERY_S)
    bulk = SteadyProducer(node, bulk_topic, MIB, MIB / (args.mbps * 1e6))
    try:
        for producer in (steady, bulk):
            producer.start()
        started = time.monotonic()
        time.sleep(args.seconds)
    finally:
        for producer in (steady, bulk):
            producer.stop()
    errors = [producer.error for producer in (steady, bulk) if producer.error]
    if errors:
        raise BenchError("; ".join(errors))
    return Phase(rolls, [latency for sent, latency in steady.samples if sent >= started + SETTLE_S])


def summary(latencies: list[float], slow_ms: float = 10.0) -> dict[str, float]:
    """n, p50, p99, p99.9 and max in ms of `latencies` (seconds), and how many (`slow`) took over `slow_ms`."""
    ordered = sorted(latencies)
    if not ordered:
        raise BenchError("no steady Produce answered")
    n = len(ordered)

    def at(fraction: float) -> float:
        return ordered[min(n - 1, int(n * fraction))] * 1000

    return {"n": n, "p50": at(0.5), "p99": at(0.99), "p99.9": at(0.999), "max": ordered[-1] * 1000,
            "slow": sum(1 for latency in ordered if latency * 1000 > slow_ms)}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mbps", type=float, default=200.0, help="the bulk producer's rate, MB/s")
    parser.add_argument("--segment-mb", type=int, default=128, help="segment.bytes of the rolling bulk topic, MiB")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=4, help="pairs of phases, each kind first in half of them")
    parser.add_argument("--data-dir", default=None, help="where the broker's data go (default: a temporary dir)")
    add_override_option(parser, "a server config (repeatable)")
    return parser


def main() -> None:
    exit_on_sigterm()
    args = build_parser().parse_args()
    if args.mbps * args.seconds * 1e6 >= LARGEST_SEGMENT_BYTES:
        raise SystemExit("--mbps x --seconds would fill a 2 GiB segment: the baseline would roll")
    phases = []
    with one_node("roll", dict(args.override), args.data_dir, kill=True) as node:
        create_topic(node.bootstrap, STEADY_TOPIC, 1)
        create_topic(node.bootstrap, "roll-latency-rolls", 1,
                     config={"segment.bytes": str(args.segment_mb * MIB)})
        for round_ in range(args.rounds):
            baseline_topic = f"roll-latency-no-rolls-{round_}"
            create_topic(node.bootstrap, baseline_topic, 1, config={"segment.bytes": str(LARGEST_SEGMENT_BYTES)})
            pair = [(baseline_topic, False), ("roll-latency-rolls", True)]
            for topic, rolls in pair if round_ % 2 == 0 else reversed(pair):
                note(f"round {round_ + 1}: {'rolls' if rolls else 'no rolls'}")
                phases.append(run_phase(node, topic, rolls, args))
    report(args, phases)


def report(args: argparse.Namespace, phases: list[Phase]) -> None:
    kinds = {rolls: summary([latency for phase in phases if phase.rolls == rolls for latency in phase.latencies])
             for rolls in (False, True)}
    print(f"== steady produce (64 KiB every 10 ms, acks=1) beside {args.mbps:.0f} MB/s of 1 MiB batches, "
          f"{args.rounds} x {args.seconds:.0f} s each way; rolls: segments of {args.segment_mb} MiB")
    print(f"{'':14} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9} {'max ms':>8} {'>10 ms':>7}")
    for rolls, label in ((False, "no rolls"), (True, "rolls")):
        s = kinds[rolls]
        print(f"{label:14} {s['n']:6.0f} {s['p50']:8.2f} {s['p99']:8.2f} {s['p99.9']:9.2f} {s['max']:8.1f} "
              f"{s['slow']:7.0f}")
    base, rolled = kinds[False], kinds[True]
    print(f"{'rolls/no rolls':14} {'':6} {rolled['p50'] / base['p50']:8.2f} {rolled['p99'] / base['p99']:8.2f} "
          f"{rolled['p99.9'] / base['p99.9']:9.2f} {rolled['max'] / base['max']:8.2f}")


if __name__ == "__main__":
    main()
