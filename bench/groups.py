"""Consumer groups: how fast a group settles and recovers, and how fast offsets can be committed.

Membership. MEMBERS confluent-kafka consumers (default 10), each in its own process, subscribe to one
fresh topic of PARTITIONS partitions (default 100). Every process first builds its consumer and says
``ready``; the driver then tells all of them to subscribe. Each prints its whole assignment with a
wall-clock stamp on every rebalance callback. Reported:

- "join s": from the first ``subscribe`` until the moment every partition is owned by exactly one
  member and every member owns at least one;
- "recover s": one member then closes (leaving the group); from that moment until the remaining
  members again own every partition exactly once.

This runs with ``group.protocol=classic`` (the range assignor, eager rebalancing), on Moldau with
``group.initial.rebalance.delay.ms=0`` and, in a separate row, with Kafka's default 3000; and with
``group.protocol=consumer`` (KIP-848) on brokers that advertise ConsumerGroupHeartbeat (API key 68),
"not available" on the others. Tansu runs with its own defaults.

Commits. WRITERS processes (1 and 4 by default) assign themselves one partition each and commit
offsets of one shared group synchronously (``commit(asynchronous=False)``), one after the other, for
DURATION seconds: commits/s, summed over the processes.

Everything is bounded: a group that does not settle within --limit seconds is reported as a failure.

Run from the repository root:  python -m bench.groups [--target moldau|tansu|both] [--quick]
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from bench.common import (
    BROKER_COMMANDS,
    REPO,
    BenchError,
    Broker,
    Case,
    fresh_topic,
    moldau_command,
    note,
    repeats,
    run_cases,
    run_workers,
    scenario_main,
    span_seconds,
    stop_process,
    unique_topic,
)
from bench.tables import Measurements, Table, TargetResult, build_table

CONSUMER_GROUP_HEARTBEAT = 68
# Moldau with no wait before an empty group's first rebalance; the plain "moldau" kind keeps Kafka's 3000 ms.
NO_DELAY_KIND = "moldau-delay0"
# KIP-848 members learn a new assignment on their next heartbeat, so the broker's heartbeat interval bounds
# how fast a consumer group settles; --consumer-heartbeat-ms sets it (Kafka's default is 5000 ms).
BROKER_OVERRIDES: dict[str, str] = {"group.initial.rebalance.delay.ms": "0"}
BROKER_COMMANDS[NO_DELAY_KIND] = lambda port, data_dir: [
    *moldau_command(port, data_dir),
    *(arg for key, value in BROKER_OVERRIDES.items() for arg in ("--override", f"{key}={value}")),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this scenario."""
    parser.add_argument("--members", type=int, default=10, help="consumer processes in the group")
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the group's topic")
    parser.add_argument("--writers", default="1,4", help="committing processes, comma separated counts")
    parser.add_argument("--duration", type=float, help="seconds of commits per run (default 5, quick 3)")
    parser.add_argument("--limit", type=float, default=60, help="seconds a group may take to settle")
    parser.add_argument(
        "--consumer-heartbeat-ms", type=int,
        help="Moldau's group.consumer.heartbeat.interval.ms for KIP-848 groups (default: Kafka's, 5000)",
    )
    parser.add_argument(
        "--heartbeat-ms", type=int, help="classic members' heartbeat.interval.ms (default: the client's, 3000)"
    )


def duration(args: argparse.Namespace) -> float:
    """Seconds of commits per run."""
    return float(args.duration or (3 if args.quick else 5))


# --------------------------------------------------------------------------- broker capabilities


def api_keys(port: int) -> set[int]:
    """The API keys a broker advertises in its ApiVersions v0 response (empty if it cannot be read)."""
    client_id = b"bench"
    request = struct.pack(">hhih", 18, 0, 1, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(struct.pack(">i", len(request)) + request)
            body = _read_frame(conn)
    except OSError:
        return set()
    _correlation, error, count = struct.unpack_from(">ihi", body)
    if error:
        return set()
    return {struct.unpack_from(">h", body, 10 + 6 * i)[0] for i in range(count)}


def _read_frame(conn: socket.socket) -> bytes:
    """One size-prefixed response."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = conn.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data[4:]


# --------------------------------------------------------------------------- group members (driver side)


@dataclass
class Group:
    """The member processes of one group and the assignments they last reported."""

    procs: list[subprocess.Popen[str]]
    owned: dict[int, set[int]] = field(default_factory=dict)
    last_event: float = 0.0
    # Members that left: their last reports (their own revocation) must not count.
    gone: set[int] = field(default_factory=set)

    def read(self, deadline: float) -> None:
        """Apply every report that arrives before ``deadline`` (returns after the first batch)."""
        live = {p.stdout: i for i, p in enumerate(self.procs) if p.stdout and i not in self.gone}
        ready, _, _ = select.select(list(live), [], [], max(0.0, deadline - time.time()))
        for stream in ready:
            line = stream.readline()
            if not line:
                # The process exited: it owns nothing any more.
                self.gone.add(live[stream])
                self.owned.pop(live[stream], None)
            elif line.startswith("{"):
                event = json.loads(line)
                self.owned[live[stream]] = set(event["partitions"])
                self.last_event = max(self.last_event, event["t"])

    def complete(self, members: set[int], partitions: int) -> bool:
        """True when ``members`` (all non-empty) own each of ``partitions`` exactly once."""
        sets = [self.owned.get(m, set()) for m in members]
        union = set().union(*sets)
        return all(sets) and sum(map(len, sets)) == partitions and union == set(range(partitions))

    def wait_complete(self, members: set[int], partitions: int, limit: float) -> float:
        """Wall-clock stamp of the report that completed the assignment."""
        deadline = time.time() + limit
        while not self.complete(members, partitions):
            if time.time() >= deadline:
                owned = sum(len(self.owned.get(m, ())) for m in members)
                raise BenchError(f"not settled after {limit:.0f} s ({owned}/{partitions} partitions owned)")
            self.read(deadline)
        return self.last_event

    def say(self, index: int, word: str) -> None:
        stdin = self.procs[index].stdin
        assert stdin is not None
        stdin.write(word + "\n")
        stdin.flush()


def member_command(
    broker: Broker, group: str, topic: str, protocol: str, name: str, args: argparse.Namespace
) -> list[str]:
    """Command line of one group member process."""
    heartbeat = ["--heartbeat-ms", str(args.heartbeat_ms)] if args.heartbeat_ms and protocol == "classic" else []
    return [
        sys.executable, "-m", "bench.groups", "member", "--bootstrap", broker.bootstrap, "--group", group,
        "--topic", topic, "--protocol", protocol, "--name", name, "--limit", str(args.limit * 3), *heartbeat,
    ]  # fmt: skip


@contextmanager
def started_group(commands: list[list[str]]) -> Iterator[Group]:
    """Start the member processes and wait until each has built its consumer; stop them all after."""
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO) for cmd in commands
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise BenchError(f"member did not start (exit {proc.poll()})")
        yield Group(procs)
    finally:
        for proc in procs:
            stop_process(proc, grace=5)


def membership(broker: Broker, sink: TargetResult, args: argparse.Namespace, protocol: str, tag: str) -> Measurements:
    """Join and recovery times of one group on a fresh topic."""
    if protocol == "consumer" and CONSUMER_GROUP_HEARTBEAT not in api_keys(broker.port):
        sink.problems.append(f"{tag}: not available (no ConsumerGroupHeartbeat, API key 68)")
        return {f"{tag}: join s": None, f"{tag}: recover s": None}
    group = unique_topic("bench-group")
    names = [f"member-{i}" for i in range(args.members)]
    with (
        fresh_topic(broker.bootstrap, "groups", args.partitions) as topic,
        started_group([member_command(broker, group, topic, protocol, n, args) for n in names]) as grp,
    ):
        return _join_and_recover(grp, args, tag)


def _join_and_recover(grp: Group, args: argparse.Namespace, tag: str) -> Measurements:
    everyone = set(range(args.members))
    start = time.time()
    for index in everyone:
        grp.say(index, "subscribe")
    joined = grp.wait_complete(everyone, args.partitions, args.limit) - start
    note(f"{tag}: stable after {joined:.2f} s; member-0 leaves")
    leave = time.time()
    grp.say(0, "close")
    grp.gone.add(0)
    grp.owned.pop(0, None)
    grp.last_event = leave
    recovered = grp.wait_complete(everyone - {0}, args.partitions, args.limit) - leave
    return {f"{tag}: join s": joined, f"{tag}: recover s": recovered}


# --------------------------------------------------------------------------- commits (driver side)


def commit_rate(broker: Broker, _sink: TargetResult, args: argparse.Namespace, writers: int) -> Measurements:
    """Synchronous commits per second of ``writers`` processes committing to one group."""
    group = unique_topic("bench-commits")
    with fresh_topic(broker.bootstrap, "commits", writers) as topic:
        commands = [
            [
                sys.executable, "-m", "bench.groups", "committer", "--bootstrap", broker.bootstrap, "--group", group,
                "--topic", topic, "--partition", str(p), "--duration", str(duration(args)),
            ]
            for p in range(writers)
        ]  # fmt: skip
        results = run_workers(commands, duration(args) + 60)
    errors = [r["error"] for r in results if r["error"]]
    if errors:
        raise BenchError(f"commit failed: {errors[0]}")
    return {f"{writers} writer(s): commits/s": sum(r["count"] for r in results) / span_seconds(results)}


# --------------------------------------------------------------------------- member and committer processes


def run_member(argv: list[str]) -> None:
    """A group member: build the consumer, subscribe when told, report every assignment change."""
    from confluent_kafka import Consumer

    opts = _process_parser("member").parse_args(argv)
    config: dict[str, Any] = {
        "bootstrap.servers": opts.bootstrap,
        "group.id": opts.group,
        "client.id": opts.name,
        "group.protocol": opts.protocol,
        "enable.auto.commit": False,
        "log_level": 3,
    }
    if opts.heartbeat_ms:
        config["heartbeat.interval.ms"] = opts.heartbeat_ms
    consumer = Consumer(config)
    owned: set[int] = set()

    def report_change(added: list[Any], removed: list[Any]) -> None:
        # Eager rebalances hand over the whole assignment, incremental ones only the change.
        owned.difference_update(tp.partition for tp in removed)
        owned.update(tp.partition for tp in added)
        print(json.dumps({"t": time.time(), "partitions": sorted(owned)}), flush=True)

    print("ready", flush=True)
    sys.stdin.readline()
    consumer.subscribe(
        [opts.topic],
        on_assign=lambda _c, tps: report_change(tps, []),
        on_revoke=lambda _c, tps: report_change([], tps),
        on_lost=lambda _c, tps: report_change([], tps),
    )
    _poll_until_told(consumer, opts.limit)
    consumer.close()


def _poll_until_told(consumer: Any, limit: float) -> None:
    """Serve the consumer until a line arrives on stdin (or the time limit passes)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        consumer.poll(0.05)
        if select.select([sys.stdin], [], [], 0)[0]:
            return


def run_committer(argv: list[str]) -> None:
    """Commit ever larger offsets of one partition synchronously until the duration is over."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    opts = _process_parser("committer").parse_args(argv)
    consumer = Consumer({"bootstrap.servers": opts.bootstrap, "group.id": opts.group, "enable.auto.commit": False})
    # Assigned, not subscribed: these are a tool's "simple" commits, so no group join is timed.
    consumer.assign([TopicPartition(opts.topic, opts.partition, 0)])
    consumer.commit(offsets=[TopicPartition(opts.topic, opts.partition, 0)], asynchronous=False)
    print("ready", flush=True)
    sys.stdin.readline()
    count, error, start = 0, "", time.time_ns()
    stop = time.monotonic() + opts.duration
    while time.monotonic() < stop and not error:
        try:
            consumer.commit(offsets=[TopicPartition(opts.topic, opts.partition, count + 1)], asynchronous=False)
            count += 1
        except KafkaException as exc:
            error = str(exc)
    print(json.dumps({"start_ns": start, "end_ns": time.time_ns(), "count": count, "error": error}), flush=True)
    consumer.close()


def _process_parser(role: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"bench.groups {role}")
    for name in ("--bootstrap", "--group", "--topic"):
        parser.add_argument(name, required=True)
    parser.add_argument("--protocol", default="classic")
    parser.add_argument("--name", default="member")
    parser.add_argument("--limit", type=float, default=300)
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--heartbeat-ms", type=int)
    return parser


# --------------------------------------------------------------------------- scenario


def _no_delay(targets: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The same targets with every Moldau started without the initial rebalance delay."""
    return [(label, NO_DELAY_KIND if kind == "moldau" else kind) for label, kind in targets]


def cases(args: argparse.Namespace) -> list[Case]:
    """Membership with both protocols, then commit rates."""
    found = [
        Case("group join, classic", partial(membership, args=args, protocol="classic", tag="classic")),
        Case("group join, consumer", partial(membership, args=args, protocol="consumer", tag="consumer (KIP-848)")),
    ]
    for writers in (int(w) for w in args.writers.split(",") if w.strip()):
        found.append(Case(f"commits, {writers} writer(s)", partial(commit_rate, args=args, writers=writers)))
    return found


def run(args: argparse.Namespace, targets: list[tuple[str, str]], _limits: dict[str, float]) -> list[Table]:
    """Measure every target; one table for membership, one for commits."""
    if args.consumer_heartbeat_ms:
        BROKER_OVERRIDES["group.consumer.heartbeat.interval.ms"] = str(args.consumer_heartbeat_ms)
    results = run_cases(_no_delay(targets), cases(args), repeats(args))
    _add_default_delay(args, targets, results)
    head = f"{args.members} members, {args.partitions} partitions, median of {repeats(args)}; seconds, lower is better"
    membership_table = build_table(f"consumer group membership, {head}", results, {}, prefix="")
    commits = Table(f"synchronous offset commits, {duration(args):.0f} s per run, median of {repeats(args)}")
    for row in list(membership_table.rows):
        if row.metric.endswith("commits/s"):
            membership_table.rows.remove(row)
            commits.rows.append(row)
    # A broker lacking an API says so once per round; once is enough.
    notes = list(dict.fromkeys(membership_table.notes))
    commits.notes = [n for n in notes if "commits" in n]
    membership_table.notes = [n for n in notes if "commits" not in n]
    return [membership_table, commits] if commits.rows else [membership_table]


def _add_default_delay(
    args: argparse.Namespace, targets: list[tuple[str, str]], results: dict[str, TargetResult]
) -> None:
    """The classic join on Moldau with Kafka's default initial rebalance delay (3000 ms)."""
    moldau = [(label, kind) for label, kind in targets if kind == "moldau"]
    if not moldau:
        return
    case = Case(
        "group join, classic, delay 3000", partial(membership, args=args, protocol="classic", tag="classic, delay 3000")
    )
    extra = run_cases(moldau, [case], repeats(args))
    for label, result in extra.items():
        results[label].values.update(result.values)
        results[label].problems += result.problems


def main() -> None:
    if sys.argv[1:2] == ["member"]:
        run_member(sys.argv[2:])
        return
    if sys.argv[1:2] == ["committer"]:
        run_committer(sys.argv[2:])
        return
    scenario_main("groups", __doc__, add_arguments, run)


if __name__ == "__main__":
    main()
