"""Raw-protocol load: broker capacity measured by a load generator that is not the bottleneck.

The client-library scenarios (``bench/produce.py``, ``consume.py``, ``small.py``) measure a broker together with
librdkafka's or kafka-python's own costs. This driver takes the client out: ``--processes`` processes, each with
``--connections`` TCP connections (one thread each), send requests pre-encoded by ``bench/raw_requests.py``
(a Produce v9 of one valid uncompressed record batch, or Fetch v12 requests at fixed offsets) with up to
``--in-flight`` requests outstanding per connection, and read the answers. The loop writes a 12-byte prefix and
the pre-encoded bytes, reads a response frame into a reused buffer, and looks at two fields only: the
correlation id and the partition's error code (at a fixed position). No record is decoded or encoded.

* ``--mode produce``: every connection sends the same batch (``--batch-bytes`` of ``--value-bytes`` values, no
  producer id, so the broker appends each copy) to one partition, connections spread over the partitions
  round robin, each to its partition's leader. Afterwards the topic's end offsets must add up to the records
  of every acknowledged request (checked with a confluent-kafka consumer), else the run is refused. The broker's
  CPU time per GB of requests it received is printed too: on a shared machine it moves far less than MB/s.
* ``--mode fetch``: the topic is first filled with ``--fill-mb`` MB of such batches (acks=1), then every
  connection fetches them in a loop, cycling over the batches' offsets (``--fetch-bytes`` per request, whole
  batches), discarding what it gets. A response without a whole batch counts as an error. On a fresh node this
  runs twice, with ``fetch.zero.copy.enable`` on (sendfile) and off (copying), each on a node of its own
  (``--zero-copy on|off`` for one of them), and also prints the broker's CPU time per GB sent.
* ``--mode commit``: every connection commits offsets of its own partition to one group (OffsetCommit v8, a
  "simple" commit of generation -1), alternating between two offsets; ``--in-flight 1`` on one connection is a
  synchronous committer. A single node only (it must be the group's coordinator).

On a single node (a fresh one, or ``--bootstrap`` with ``--broker-pid``) produce and commit also print the broker's
CPU time per answered request: on a shared machine the request rate follows what else runs, the CPU per request
much less.

Requests/s and MB/s (10^6 bytes of record batches sent or received per second) are counted over ``--seconds``
after ``--warmup`` seconds, and printed beside the raw limit of this machine measured in the same run
(``bench/rawlimit.py``: loopback discard and loopback file append) as ratios; produce is also divided by "file
append, kept pages" (appends into files that are kept, as a log keeps its segments, so into pages nobody freed
just before) and, with more than one connection, by "file append, in the driver's shape" (the driver's number of
sender processes and connections sending to one receiver: on a machine with few cores the senders take CPU the
receiver would otherwise have). With two fetch runs, the limit is measured before and after them and their mean
is the baseline.

By default a fresh single Moldau node is started (``--nodes 3`` starts a 3-node cluster, as
``bench/replication.py`` does); ``--bootstrap`` uses a running broker or cluster instead. The topic is fresh
(``--partitions``, ``--replication-factor``, min.insync.replicas=2 when replicated). A single node's CPU time is
read from ``/proc``: of the node started here, or with ``--bootstrap`` of ``--broker-pid``.

Run from the repository root, for example:
    python -m bench.raw_driver --mode produce --batch-bytes 1048576 --acks 1
    python -m bench.raw_driver --mode produce --batch-bytes 100 --value-bytes 100 --in-flight 8   # small requests
    python -m bench.raw_driver --mode fetch
    python -m bench.raw_driver --mode commit --processes 1 --connections 1 --in-flight 1  # one synchronous committer
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import socket
import statistics
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Any

from bench import raw_requests
from bench.common import (
    BenchError,
    add_override_option,
    create_topic,
    exit_on_sigterm,
    note,
    running_broker,
    scratch_dir,
    unique_topic,
    wait_registered,
)
from bench.raw_requests import Encoded
from bench.rawlimit import raw_limits

_SIZE = struct.Struct(">i")
_ERROR = struct.Struct(">h")
MB = 1e6
MIB = 2**20


# --------------------------------------------------------------------------- one connection's loop


@dataclass(slots=True)
class Target:
    """What one connection sends: to which node, which requests (cycled), and where to find the error code."""

    host: str
    port: int
    requests: list[Encoded]
    error_at: int
    payload_bytes: int  # record bytes per request (produce); responses are counted instead for fetch
    min_response: int = 0  # a fetch response shorter than this holds no whole batch


@dataclass(slots=True)
class Counts:
    requests: int = 0  # answered within the measured window
    payload: int = 0  # record bytes sent (produce) or response bytes received (fetch) within it
    answered: int = 0  # every answered request, warm-up and drain included (for the end-offset check)
    received: int = 0  # every response byte, warm-up and drain included (for the broker's CPU per byte)
    errors: int = 0
    first_error: str = ""
    latencies_us: list[int] = field(default_factory=list)


def _read_frame(sock: socket.socket, buffer: memoryview) -> int:
    """Read one response frame into ``buffer``; returns its size."""
    got = 0
    while got < 4:
        n = sock.recv_into(buffer[got:4])
        if not n:
            raise ConnectionError("broker closed the connection")
        got += n
    size = int(_SIZE.unpack_from(buffer)[0])
    if size > len(buffer):
        raise ConnectionError(f"response of {size} bytes exceeds the buffer")
    got = 0
    while got < size:
        n = sock.recv_into(buffer[got:size])
        if not n:
            raise ConnectionError("broker closed the connection")
        got += n
    return size


def _send(sock: socket.socket, request: Encoded, correlation_id: int) -> None:
    prefix = request.prefix(correlation_id)
    sent = sock.sendmsg([prefix, request.rest])
    total = len(prefix) + len(request.rest)
    if sent < total:  # a blocking socket interrupted mid-write; finish it
        rest = memoryview(prefix + request.rest)[sent:]
        sock.sendall(rest)


def connection_loop(target: Target, in_flight: int, start_at: float, measure_from: float, stop_at: float,
                    buffer_bytes: int, out: Counts) -> None:
    """Keep ``in_flight`` requests outstanding on one connection until ``stop_at`` (time.time()), then drain."""
    buffer = memoryview(bytearray(buffer_bytes))
    requests, count = target.requests, len(target.requests)
    with socket.create_connection((target.host, target.port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while time.time() < start_at:
            time.sleep(0.001)
        sent_at: dict[int, float] = {}
        next_id = 0
        for _ in range(in_flight):
            sent_at[next_id] = time.perf_counter()
            _send(sock, requests[next_id % count], next_id)
            next_id += 1
        while sent_at:
            size = _read_frame(sock, buffer)
            now, done = time.time(), time.perf_counter()
            cid = raw_requests.correlation_of(buffer)
            started = sent_at.pop(cid, None)
            if started is None:
                raise ConnectionError(f"unexpected correlation id {cid}")
            out.answered += 1
            out.received += size
            error = _ERROR.unpack_from(buffer, target.error_at)[0] if size > target.error_at + 1 else -1
            if error != 0 or size < target.min_response:
                out.errors += 1
                out.first_error = out.first_error or f"error code {error}, response of {size} bytes"
            elif measure_from <= now <= stop_at:
                out.requests += 1
                out.payload += target.payload_bytes or size
                out.latencies_us.append(int((done - started) * 1e6))
            if now < stop_at:
                sent_at[next_id] = time.perf_counter()
                _send(sock, requests[next_id % count], next_id)
                next_id += 1


# --------------------------------------------------------------------------- worker processes


def _worker(targets: list[Target], in_flight: int, buffer_bytes: int, ready: Queue[Any], go: Event,
            times: Queue[tuple[float, float, float]], out: Queue[Any]) -> None:
    """One load process: a thread per connection, all started at the times the parent hands out."""
    ready.put(os.getpid())
    go.wait()
    start_at, measure_from, stop_at = times.get()
    counts = [Counts() for _ in targets]
    errors: list[str] = []

    def run(target: Target, counted: Counts) -> None:
        try:
            connection_loop(target, in_flight, start_at, measure_from, stop_at, buffer_bytes, counted)
        except (OSError, ConnectionError) as exc:
            errors.append(f"{target.host}:{target.port}: {exc}")

    threads = [threading.Thread(target=run, args=(t, c)) for t, c in zip(targets, counts, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies = sorted(lat for c in counts for lat in c.latencies_us)
    out.put({
        "requests": sum(c.requests for c in counts), "payload": sum(c.payload for c in counts),
        "answered": sum(c.answered for c in counts), "received": sum(c.received for c in counts),
        "errors": sum(c.errors for c in counts) + len(errors),
        "first_error": next((c.first_error for c in counts if c.first_error), "") or (errors[0] if errors else ""),
        "latencies_us": latencies[:: max(1, len(latencies) // 20_000)],  # a sample is enough for percentiles
    })


def run_load(assignments: list[list[Target]], in_flight: int, warmup: float, seconds: float,
             buffer_bytes: int) -> list[dict[str, Any]]:
    """Start one process per assignment, release them together, and collect their counts."""
    ctx = mp.get_context("fork")
    ready: Queue[Any] = ctx.Queue()
    times: Queue[tuple[float, float, float]] = ctx.Queue()
    out: Queue[Any] = ctx.Queue()
    go = ctx.Event()
    procs = [ctx.Process(target=_worker, args=(targets, in_flight, buffer_bytes, ready, go, times, out))
             for targets in assignments]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=60)
        start_at = time.time() + 0.5  # every process has connected and is waiting by then
        for _ in procs:
            times.put((start_at, start_at + warmup, start_at + warmup + seconds))
        go.set()
        return [out.get(timeout=warmup + seconds + 120) for _ in procs]
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()


# --------------------------------------------------------------------------- topic and leaders


def leaders(bootstrap: str, topic: str) -> dict[int, tuple[str, int]]:
    """Partition -> (host, port) of its leader."""
    from confluent_kafka.admin import AdminClient

    meta = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(topic, timeout=30)
    brokers = {b.id: (str(b.host), b.port) for b in meta.brokers.values()}  # the stubs type host as None
    return {p.id: brokers[p.leader] for p in meta.topics[topic].partitions.values()}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> int:
    """Sum of the partitions' end offsets (high watermarks)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-driver-unused", "log_level": 3})
    try:
        return sum(int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1])
                   for p in range(partitions))
    finally:
        consumer.close()


def make_topic(bootstrap: str, args: argparse.Namespace) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = unique_topic("raw")
    if args.replication_factor == 1:
        create_topic(bootstrap, topic, args.partitions)
        return topic
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    config = {"min.insync.replicas": "2"}
    admin.create_topics([NewTopic(topic, args.partitions, args.replication_factor, config=config)],
                        operation_timeout=30)[topic].result(timeout=60)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # every partition led, with its full ISR
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == args.partitions and all(
                p.leader >= 0 and len(p.isrs) == args.replication_factor for p in meta.partitions.values()):
            return topic
        time.sleep(0.1)
    raise BenchError(f"topic {topic} did not get its leaders and full ISRs")


# --------------------------------------------------------------------------- the two modes


def spread(targets: list[Target], processes: int, connections: int) -> list[list[Target]]:
    """``processes`` lists of ``connections`` targets, dealt round robin from ``targets``."""
    pool = [targets[i % len(targets)] for i in range(processes * connections)]
    return [pool[i * connections:(i + 1) * connections] for i in range(processes)]


def produce_targets(bootstrap: str, topic: str, args: argparse.Namespace, acks: int) -> tuple[list[Target], int]:
    """One target per partition, and the records in each request."""
    records = raw_requests.records_for(args.batch_bytes, args.value_bytes)
    batch = raw_requests.record_batch(records, args.value_bytes)
    where = raw_requests.error_position(raw_requests.PRODUCE_KEY, topic)
    targets = [Target(host, port, [raw_requests.produce(topic, p, batch, acks)], where, len(batch))
               for p, (host, port) in sorted(leaders(bootstrap, topic).items())]
    return targets, records


def measure_produce(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    acks = -1 if args.acks == "all" else int(args.acks)
    targets, records = produce_targets(bootstrap, topic, args, acks)
    before = end_offsets(bootstrap, topic, args.partitions)
    cpu_before = cpu_times(args.broker_pid) if args.broker_pid else (0.0, 0.0)
    nodes_before = {node: cpu_times(pid) for node, pid in getattr(args, "node_pids", {}).items()}
    results = run_load(spread(targets, args.processes, args.connections), args.in_flight, args.warmup,
                       args.seconds, 64 * 1024)
    cpu_after = cpu_times(args.broker_pid) if args.broker_pid else (0.0, 0.0)
    nodes_after = {node: cpu_times(pid) for node, pid in getattr(args, "node_pids", {}).items()}
    answered = sum(r["answered"] for r in results)
    errors = sum(r["errors"] for r in results)
    after = end_offsets(bootstrap, topic, args.partitions)
    if errors == 0 and after - before != answered * records:
        raise BenchError(f"end offsets moved by {after - before}, but {answered} requests of {records} records "
                         "were acknowledged")
    figures = summarise(results, args.seconds, f"records/request {records}, batch {targets[0].payload_bytes} B")
    if args.broker_pid and answered:
        # Over every answered request, warm-up and drain included: what the broker spends per request and per GB
        # received, whatever else the machine runs (the rate moves with the load of a shared machine; these much
        # less).
        figures["broker_cpu_us_per_request"] = (sum(cpu_after) - sum(cpu_before)) * 1e6 / answered
        received = answered * targets[0].requests[0].wire_bytes
        user, system = (after - before for after, before in zip(cpu_after, cpu_before, strict=True))
        figures["broker_cpu_ms_per_gb"] = (user * 1000 / (received / 1e9), system * 1000 / (received / 1e9))
    if nodes_before and answered:
        # A cluster on one host: the CPU each node spent per GB the clients produced (replication included), the
        # measure of what replication costs that does not depend on how the nodes share this machine's cores.
        produced_gb = answered * targets[0].requests[0].wire_bytes / 1e9
        figures["node_cpu_ms_per_gb"] = {
            node: tuple((after - before) * 1000 / produced_gb
                        for after, before in zip(nodes_after[node], nodes_before[node], strict=True))
            for node in nodes_before}
    return figures


def measure_commit(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    """Offset commits to the node at ``bootstrap`` (the coordinator of every group on a single node)."""
    host, _, port = bootstrap.rpartition(":")
    group = f"{topic}-committers"
    where = raw_requests.error_position(raw_requests.OFFSET_COMMIT_KEY, topic)
    targets = [Target(host, int(port), [raw_requests.offset_commit(group, topic, p, offset) for offset in (1, 2)],
                      where, 0) for p in range(args.partitions)]
    for target in targets:
        _await_coordinator(target)
    cpu_before = cpu_times(args.broker_pid) if args.broker_pid else (0.0, 0.0)
    results = run_load(spread(targets, args.processes, args.connections), args.in_flight, args.warmup,
                       args.seconds, 64 * 1024)
    cpu_after = cpu_times(args.broker_pid) if args.broker_pid else (0.0, 0.0)
    figures = summarise(results, args.seconds, f"group {group}")
    answered = sum(r["answered"] for r in results)
    if args.broker_pid and answered:
        figures["broker_cpu_us_per_request"] = (sum(cpu_after) - sum(cpu_before)) * 1e6 / answered
    return figures


# The coordinator's answers while the group's __consumer_offsets partition is created or loaded on a fresh node.
_COORDINATOR_NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def _await_coordinator(target: Target, timeout_s: float = 30.0) -> None:
    """Send the target's first commit until the coordinator accepts it, before the measured load starts."""
    deadline = time.monotonic() + timeout_s
    buffer = memoryview(bytearray(64 * 1024))
    with socket.create_connection((target.host, target.port)) as sock:
        while True:
            code = _answer_code(sock, target, 0, buffer)
            if code == 0:
                return
            if code not in _COORDINATOR_NOT_READY or time.monotonic() > deadline:
                raise BenchError(f"the group coordinator did not accept a commit: error code {code}")
            time.sleep(0.2)


def _answer_code(sock: socket.socket, target: Target, correlation_id: int, buffer: memoryview) -> int:
    """Send the target's first request and read the answer: its partition's error code, or -1 when the answer is
    too short to hold one."""
    _send(sock, target.requests[0], correlation_id)
    size = _read_frame(sock, buffer)
    return int(_ERROR.unpack_from(buffer, target.error_at)[0]) if size > target.error_at else -1


def fill(bootstrap: str, topic: str, args: argparse.Namespace) -> tuple[int, int, int]:
    """Write ``--fill-mb`` MB into the topic, the same number of batches in each partition; returns (batches per
    partition, records per batch, batch bytes)."""
    targets, records = produce_targets(bootstrap, topic, args, 1)
    batch_bytes = targets[0].payload_bytes
    per_partition = max(1, int(args.fill_mb * MB) // batch_bytes // args.partitions)
    for target in targets:
        with socket.create_connection((target.host, target.port)) as sock:
            buffer = memoryview(bytearray(64 * 1024))
            for i in range(per_partition):
                if _answer_code(sock, target, i, buffer) != 0:
                    raise BenchError("filling the topic failed: the broker refused a batch")
    return per_partition, records, batch_bytes


def measure_fetch(bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    note(f"filling {topic} with {args.fill_mb} MB")
    batches, records, batch_bytes = fill(bootstrap, topic, args)
    per_fetch = max(1, args.fetch_bytes // batch_bytes)
    max_bytes = per_fetch * batch_bytes
    where = raw_requests.error_position(raw_requests.FETCH_KEY, topic)
    targets = []
    for p, (host, port) in sorted(leaders(bootstrap, topic).items()):
        offsets = range(0, batches * records - per_fetch * records + 1, per_fetch * records)
        requests = [raw_requests.fetch(topic, p, offset, max_bytes) for offset in offsets]
        targets.append(Target(host, port, requests, where, 0, min_response=batch_bytes))
    cpu_before = cpu_times(args.broker_pid) if args.broker_pid else (0.0, 0.0)
    results = run_load(spread(targets, args.processes, args.connections), args.in_flight, args.warmup,
                       args.seconds, max_bytes + 64 * 1024)
    figures = summarise(results, args.seconds, f"{batches} batches of {batch_bytes} B per partition, "
                                               f"{per_fetch} per fetch")
    if args.broker_pid:
        received = sum(r["received"] for r in results)
        user, system = (after - before for after, before in zip(cpu_times(args.broker_pid), cpu_before, strict=True))
        figures["broker_cpu_ms_per_gb"] = (user * 1000 / (received / 1e9), system * 1000 / (received / 1e9))
    return figures


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rpartition(")")[2].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def summarise(results: list[dict[str, Any]], seconds: float, detail: str) -> dict[str, Any]:
    errors = sum(r["errors"] for r in results)
    if errors:
        first = next(r["first_error"] for r in results if r["first_error"])
        raise BenchError(f"{errors} failed requests, first: {first}")
    latencies = sorted(lat for r in results for lat in r["latencies_us"])
    if not latencies:
        raise BenchError("no request was answered within the measured window")
    return {
        "requests_s": sum(r["requests"] for r in results) / seconds,
        "mb_s": sum(r["payload"] for r in results) / seconds / MB,
        "p50_ms": statistics.median(latencies) / 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1000,
        "detail": detail,
    }


# --------------------------------------------------------------------------- command line


def parse_args() -> argparse.Namespace:
    exit_on_sigterm()
    return build_parser().parse_args()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("produce", "fetch", "commit"), default="produce")
    parser.add_argument("--processes", type=int, default=2, help="load processes")
    parser.add_argument("--connections", type=int, default=2, help="connections (threads) per process")
    parser.add_argument("--in-flight", type=int, default=2, help="requests outstanding per connection")
    parser.add_argument("--batch-bytes", type=int, default=MIB, help="record batch size of a Produce request")
    parser.add_argument("--value-bytes", type=int, default=1000, help="record value size")
    parser.add_argument("--acks", choices=("1", "all"), default="1",
                        help="Produce acks (not 0: its requests have no responses to count)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of load before measuring")
    parser.add_argument("--topic", help="use this existing topic instead of a fresh one")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--replication-factor", type=int, default=1)
    parser.add_argument("--fetch-bytes", type=int, default=MIB, help="bytes per Fetch (whole batches, at least one)")
    parser.add_argument("--fill-mb", type=int, default=256, help="MB written before a fetch run")
    parser.add_argument("--bootstrap", help="a running broker or cluster (default: start a fresh one)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes of the fresh cluster (1 or 3)")
    parser.add_argument("--raw-mb", type=int, default=1024, help="MiB moved per raw-limit figure (0: skip)")
    add_override_option(parser, "a server config for the nodes started (repeatable)")
    parser.add_argument("--zero-copy", choices=("both", "on", "off"), default="both",
                        help="fetch from a fresh node: with fetch.zero.copy.enable on, off, or both one after the "
                             "other (default), each against the same raw limit")
    parser.add_argument("--broker-pid", type=int, default=None,
                        help="with --bootstrap: the broker's process id (a single node), to print its CPU time per "
                             "request and per GB received (a node the driver starts itself is measured without it)")
    return parser


@contextlib.contextmanager
def broker(args: argparse.Namespace, extra: dict[str, str] | None = None) -> Iterator[str]:
    """The bootstrap address of the broker or cluster to measure; a single fresh node's pid goes in
    ``args.broker_pid``."""
    overrides = {**dict(args.override), **(extra or {})}
    if args.bootstrap:
        yield args.bootstrap
    elif args.nodes == 1:
        with running_broker("moldau", "moldau", overrides=overrides) as one:
            args.broker_pid = one.proc.pid
            try:
                yield one.bootstrap
            finally:
                args.broker_pid = None
    else:
        from tests.support.cluster import LocalCluster
        from tests.support.replicated import FAST_FAILOVER

        settings = {**FAST_FAILOVER, **overrides}
        with scratch_dir("raw-cluster") as base, LocalCluster(base, args.nodes, overrides=settings) as cluster:
            cluster.active_controller(60)
            wait_registered(cluster, 60)
            args.node_pids = {node_id: node.pid for node_id, node in cluster.nodes.items() if node.pid is not None}
            try:
                yield cluster.bootstrap
            finally:
                args.node_pids = {}


def main() -> None:
    args = parse_args()
    limits = {"discard": 0.0, "append": 0.0}
    if args.raw_mb:
        note(f"raw limit: moving {args.raw_mb} MiB over loopback, twice per figure")
        limits = raw_limits(args.raw_mb, repeat=2, kept=args.mode == "produce", shape=limit_shape(args))
    runs: list[tuple[str, dict[str, str]]] = [("", {})]
    if args.mode == "fetch" and not args.bootstrap:
        settings = ("on", "off") if args.zero_copy == "both" else (args.zero_copy,)
        runs = [(f"zero-copy {on}", {"fetch.zero.copy.enable": str(on == "on").lower()}) for on in settings]
    reports = []
    for label, extra in runs:
        with broker(args, extra) as bootstrap:
            topic = args.topic or make_topic(bootstrap, args)
            note(f"{args.mode} {label} on {topic}: {args.processes} processes x {args.connections} connections, "
                 f"{args.in_flight} in flight each")
            measure = {"produce": measure_produce, "fetch": measure_fetch, "commit": measure_commit}[args.mode]
            figures = measure(bootstrap, topic, args)
        reports.append((label, figures))
    if args.raw_mb and len(runs) > 1:
        limits = bracketing_limits(args, limits)
    for label, figures in reports:
        print_report(args, figures, limits, label)
    if len(reports) == 2:
        print(f"zero-copy on / off: {reports[0][1]['mb_s'] / reports[1][1]['mb_s']:.2f}x MB/s")


def limit_shape(args: argparse.Namespace) -> tuple[int, int] | None:
    """For produce with more than one connection, the raw limit is also measured with the driver's senders
    (`bench/rawlimit.py`, "in the driver's shape"): on a machine with few cores they take CPU from the receiver."""
    if args.mode != "produce" or args.processes * args.connections == 1:
        return None
    return args.processes, args.connections


def bracketing_limits(args: argparse.Namespace, before: dict[str, float]) -> dict[str, float]:
    """On a busy machine the raw limit drifts during a long run: measured again after it, the mean of the two
    is the baseline (both are printed)."""
    note(f"raw limit again: moving {args.raw_mb} MiB over loopback, twice per figure")
    after = raw_limits(args.raw_mb, repeat=2, kept="append_kept" in before,
                       shape=limit_shape(args) if "append_shaped" in before else None)
    for name in before:
        print(f"raw limit {name}: {before[name]:,.0f} MB/s before, {after[name]:,.0f} MB/s after")
    return {name: (before[name] + after[name]) / 2 for name in before}


def print_report(args: argparse.Namespace, figures: dict[str, Any], limits: dict[str, float], label: str = "") -> None:
    what = {"produce": f"produce acks={args.acks}", "commit": "commit"}.get(args.mode, f"fetch {label}".strip())
    print(f"== raw driver: {what}, {args.processes} processes x {args.connections} connections x "
          f"{args.in_flight} in flight, {args.seconds:.0f} s ({figures['detail']})")
    print(f"requests/s            {figures['requests_s']:12,.0f}")
    print(f"MB/s                  {figures['mb_s']:12,.1f}")
    print(f"request p50 / p99 ms  {figures['p50_ms']:6.2f} / {figures['p99_ms']:.2f}")
    if "broker_cpu_ms_per_gb" in figures:
        user, system = figures["broker_cpu_ms_per_gb"]
        print(f"broker CPU ms per GB  {user + system:12,.0f}   (user {user:,.0f}, system {system:,.0f})")
    if "broker_cpu_us_per_request" in figures:
        print(f"broker CPU us/request {figures['broker_cpu_us_per_request']:12,.1f}")
    if "node_cpu_ms_per_gb" in figures:
        per_node = figures["node_cpu_ms_per_gb"]
        system = sum(ms[1] for ms in per_node.values())
        print(f"cluster CPU ms per GB {sum(map(sum, per_node.values())):12,.0f}   (system {system:,.0f}; "
              + ", ".join(f"node {node} {sum(ms):,.0f}" for node, ms in sorted(per_node.items())) + ")")
    for name, label in (("discard", "loopback, discard"), ("append", "loopback, file append"),
                        ("append_kept", "file append, kept pages"), ("append_shaped", "append, driver's shape")):
        if limits.get(name):
            print(f"raw limit {label + ':':23}{limits[name]:8,.0f} MB/s   ratio {figures['mb_s'] / limits[name]:.3f}")


# --------------------------------------------------------------------------- as a scenario of bench/run_all.py

# (metric, options): the figures recorded in docs/benchmarks.md, each on its own fresh topic.
SCENARIO_CASES = (
    ("produce 1 MiB acks=1", {"mode": "produce", "acks": "1"}),
    ("produce 1 MiB acks=all", {"mode": "produce", "acks": "all"}),
    ("produce 1 record", {"mode": "produce", "batch_bytes": 100, "value_bytes": 100, "in_flight": 8}),
    ("fetch 1 MiB", {"mode": "fetch"}),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of this driver when run by ``bench/run_all.py`` (the rest take their defaults)."""
    parser.add_argument("--seconds", type=float, help="measured seconds per case (default 10, quick 4)")


def scenario_case(what: str, options: dict[str, Any], seconds: float) -> Any:
    from bench.common import Case

    def measure(target: Any, _sink: Any) -> dict[str, float | None]:
        args = build_parser().parse_args([])
        vars(args).update(options, seconds=seconds, warmup=1.0, fill_mb=128)
        topic = make_topic(target.bootstrap, args)
        figures = measure_produce(target.bootstrap, topic, args) if args.mode == "produce" else \
            measure_fetch(target.bootstrap, topic, args)
        return {f"{what} requests/s": figures["requests_s"], f"{what} MB/s": figures["mb_s"]}

    return Case(f"raw {what}", measure)


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Any]:
    """Every case of ``SCENARIO_CASES`` on every target; produce MB/s against loopback + file append, fetch MB/s
    against loopback discard."""
    from bench.common import repeats, run_cases
    from bench.tables import build_table, raw_note

    seconds = float(args.seconds or (4 if args.quick else 10))
    results = run_cases(targets, [scenario_case(w, o, seconds) for w, o in SCENARIO_CASES], repeats(args))
    baselines = {f"{what} MB/s": limits["discard" if options["mode"] == "fetch" else "append"]
                 for what, options in SCENARIO_CASES}
    table = build_table(f"raw-protocol driver (bench/raw_driver.py defaults: 2 processes x 2 connections), "
                        f"{seconds:.0f} s per case, median of {repeats(args)}", results, baselines)
    table.notes += [raw_note(limits, "append") + " (produce)", raw_note(limits, "discard") + " (fetch)"]
    return [table]


if __name__ == "__main__":
    main()
