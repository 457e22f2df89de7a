"""Creating many partitions under load: does a large CreateTopics pause the requests of every other client?

One single-node Moldau broker. A *steady* producer writes one small batch every 10 ms (acks=1, one request in
flight) to its own single-partition topic and records each request's latency. The run has two kinds of phase,
alternating ``--rounds`` times:

* **idle** (the baseline): ``--seconds`` of the steady producer alone;
* **create**: one CreateTopics of a topic with ``--partitions`` partitions, sent at the start of the phase; the
  phase lasts until every new partition answers ListOffsets without an error, then ``--seconds`` more.

Printed: the steady producer's latency p50/p99/max and how many of its requests took over 50 ms in each kind
of phase (pooled over the rounds), with the ratios create / idle, and the seconds from CreateTopics until every
partition was ready.

Run from the repository root, for example:
    python -m bench.create_latency
    python -m bench.create_latency --partitions 10000 --rounds 1
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

from bench.bytes_scale import Node, SteadyProducer, one_node
from bench.common import BenchError, add_override_option, create_topic, exit_on_sigterm, note
from bench.partitions import leaders_of, list_offsets_request, metadata_request, offsets_errors, timed_round_trip
from bench.roll_latency import summary
from tests.support.raw_client import RawClient

STEADY_TOPIC = "create-latency-steady"
STEADY_BATCH_BYTES = 1024
STEADY_EVERY_S = 0.01
SLOW_MS = 50.0
READY_TIMEOUT_S = 600.0


@dataclass
class Phase:
    creates: bool
    latencies: list[float] = field(default_factory=list)
    ready_s: float = 0.0


def new_partitions_ready(node: Node, topic: str, partitions: int) -> bool:
    """Metadata names a leader for every partition of `topic` and ListOffsets of all of them has no error."""
    try:
        with RawClient(node.bootstrap, timeout_s=60) as client:
            _, meta = timed_round_trip(client, metadata_request())
            if leaders_of(meta).get(topic, 0) < partitions:
                return False
            _, offsets = timed_round_trip(client, list_offsets_request({topic: partitions}))
            return offsets_errors(offsets) == 0
    except (OSError, ConnectionError):
        return False


def create_and_wait(node: Node, topic: str, partitions: int) -> float:
    """Send one CreateTopics and return the seconds until every partition is ready."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 4})
    started = time.perf_counter()
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=300, request_timeout=300)
    futures[topic].result(timeout=READY_TIMEOUT_S)
    while not new_partitions_ready(node, topic, partitions):
        if time.perf_counter() - started > READY_TIMEOUT_S:
            raise BenchError(f"{topic}: not every partition ready after {READY_TIMEOUT_S:.0f} s")
        time.sleep(0.05)
    return time.perf_counter() - started


def run_phase(node: Node, creates: bool, round_no: int, args: argparse.Namespace) -> Phase:
    steady = SteadyProducer(node, STEADY_TOPIC, STEADY_BATCH_BYTES, STEADY_EVERY_S)
    steady.start()
    phase = Phase(creates)
    try:
        time.sleep(0.5)  # the steady producer is sending before anything is measured
        started = time.monotonic()
        if creates:
            phase.ready_s = create_and_wait(node, f"create-latency-{round_no}", args.partitions)
        time.sleep(args.seconds)
    finally:
        steady.stop()
    if steady.error:
        raise BenchError(f"steady producer: {steady.error}")
    phase.latencies = [latency for sent, latency in steady.samples if sent >= started]
    return phase


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    idle = summary([v for p in phases if not p.creates for v in p.latencies], SLOW_MS)
    create = summary([v for p in phases if p.creates for v in p.latencies], SLOW_MS)
    ready = [round(p.ready_s, 2) for p in phases if p.creates]
    print(f"== steady produce ({STEADY_BATCH_BYTES} B every {STEADY_EVERY_S * 1000:.0f} ms, acks=1) beside one "
          f"CreateTopics of {args.partitions} partitions, {args.rounds} round(s)")
    print(f"{'':<16}{'n':>7}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>10}{f'>{SLOW_MS:.0f} ms':>9}")
    for label, row in (("idle", idle), ("create", create)):
        print(f"{label:<16}{row['n']:>7.0f}{row['p50']:>9.2f}{row['p99']:>9.2f}{row['max']:>10.1f}{row['slow']:>9.0f}")
    ratios = [create[k] / idle[k] if idle[k] else float("nan") for k in ("p50", "p99", "max")]
    print(f"{'create/idle':<16}{'':>7}{ratios[0]:>9.2f}{ratios[1]:>9.2f}{ratios[2]:>10.2f}")
    print(f"seconds from CreateTopics until every partition was ready: {ready}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=2000, help="partitions of each created topic")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4.0, help="idle phase, and time kept after creation")
    add_override_option(parser, "a server config (repeatable)")
    return parser


def main() -> None:
    exit_on_sigterm()
    args = build_parser().parse_args()
    phases: list[Phase] = []
    with one_node("create", dict(args.override)) as node:
        create_topic(node.bootstrap, STEADY_TOPIC, 1)
        for round_no in range(1, args.rounds + 1):
            for creates in (False, True):
                note(f"round {round_no}: {'create' if creates else 'idle'}")
                phases.append(run_phase(node, creates, round_no, args))
    report(phases, args)


if __name__ == "__main__":
    main()
