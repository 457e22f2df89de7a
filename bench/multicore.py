"""Multi-core: the produce capacity of N Moldau nodes on one host against one node, and how many cores they use.

A Moldau node is one Python process with one event loop, so it runs on one core at a time. The ways to use more
cores of one machine are more nodes on it (partition leadership spread over them) or more threads or processes
inside a node. This script measures the first and the in-process costs that decide the second.

**Capacity.** For each N of ``--nodes`` (default 1,2,3): a fresh cluster of N combined nodes
(``tests/support/cluster.py``; one node is a one-node cluster, so every N runs the same KRaft setup), no
registry or console listener. All clusters run at once (an idle one costs every run alike) and take turns
within each of ``--rounds`` rounds (default 3, the median run reported), so that the other load of a shared
machine touches every N alike. Each case has its own topic per cluster, of ``--partitions`` (default 6) with
replication factor 1, whose leaders are spread over the nodes (refused if a node leads none). The load is
``bench/raw_driver.py``'s: ``--processes`` x ``--connections`` connections (default 2 x 3, one per partition),
acks=1, in two cases: 1 MiB batches of 1000 B records (2 in flight per connection) and one 100 B record per
request (8 in flight). For each run: MB/s and requests/s over ``--seconds`` after ``--warmup``, their ratio
to one node, and the CPU seconds (user + system, ``/proc/PID/stat``) of the node processes, of the load
generator's processes, and of the whole machine (``/proc/stat``) over the same wall time, as cores (CPU
seconds / wall seconds). The raw limit of the machine (``bench/rawlimit.py``, loopback + file append) is
measured before and after the runs; their mean is the baseline of the ``/raw`` columns.

**In-process costs** (``--no-in-process`` skips them): the CPU time of the per-batch work that could move to
another thread, for one 1 MiB batch as the driver sends it: its CRC-32C (``crc32c``), ``zlib.crc32`` for
comparison, the record walk (``moldau._records``) and the append to a file (``os.pwritev``, as a segment
writes), each timed alone (best of 5); then one call on a 64 MiB batch runs in a thread while this one counts
loop iterations (median of 3, the GIL's switch interval at 50 ms): "Python's pace beside it" near 0 means the
call holds the GIL (no Python runs meanwhile, so a thread could not overlap it with the event loop), well above
0 that it releases it.

Run from the repository root:  python -m bench.multicore [--nodes 1,2,3] [--seconds 6] [--quick]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bench import raw_driver, raw_requests
from bench.common import BenchError, base_parser, note, scratch_dir, wait_registered
from bench.proc_cpu import CpuTime, MachineTime, machine_cpu, process_cpu
from bench.rawlimit import raw_limits
from bench.tables import Table, raw_note, render, save_results
from moldau.protocol.record_batch import BATCH_HEADER_SIZE

MB = 1e6
MIB = 2**20

# (label, raw driver options): the two request shapes measured at every N.
CASES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("1 MiB batches", {"batch_bytes": MIB, "value_bytes": 1000, "in_flight": 2}),
    ("one 100 B record", {"batch_bytes": 100, "value_bytes": 100, "in_flight": 8}),
)
# Only what the measurement needs: no schema registry or console listener on any node.
NODE_SETTINGS = {"schema.registry.listeners": "", "console.listeners": ""}
CRC_START = 21  # a v2 batch's CRC-32C covers its bytes from the attributes field to the end


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True, slots=True)
class CpuUse:
    """CPU seconds used over ``wall`` seconds: per node process, by the load generator, by the whole machine."""

    wall: float
    nodes: tuple[CpuTime, ...]
    driver: CpuTime
    machine: MachineTime

    @property
    def node_cores(self) -> float:
        return sum(n.total for n in self.nodes) / self.wall

    @property
    def busiest_node_cores(self) -> float:
        return max(n.total for n in self.nodes) / self.wall

    @property
    def driver_cores(self) -> float:
        return self.driver.total / self.wall

    @property
    def machine_cores(self) -> float:
        return self.machine.busy / self.wall

    @property
    def other_cores(self) -> float:
        """Busy cores not accounted for by the nodes or the driver: the rest of the machine's load."""
        return max(0.0, self.machine_cores - self.node_cores - self.driver_cores)


def children_cpu() -> CpuTime:
    """CPU time of this process's children that have been waited for (the driver's load processes)."""
    times = os.times()
    return CpuTime(times.children_user, times.children_system)


@contextlib.contextmanager
def cpu_watch(pids: list[int], into: list[CpuUse]) -> Iterator[None]:
    """Appends to ``into`` the CPU used by ``pids``, this process's children and the machine within the block."""
    nodes, driver, machine, start = [process_cpu(p) for p in pids], children_cpu(), machine_cpu(), time.monotonic()
    yield
    wall = time.monotonic() - start
    into.append(CpuUse(wall, tuple(process_cpu(p) - n for p, n in zip(pids, nodes, strict=True)),
                       children_cpu() - driver, machine_cpu() - machine))


def spread_leaders(bootstrap: str, topic: str, nodes: int) -> dict[int, tuple[str, int]]:
    """The topic's partition leaders, refusing a placement that leaves a node without one."""
    led = raw_driver.leaders(bootstrap, topic)
    per_node = {address: sum(1 for a in led.values() if a == address) for address in set(led.values())}
    if len(per_node) < nodes:
        raise BenchError(f"{topic}: leaders on {len(per_node)} of {nodes} nodes ({sorted(per_node.values())})")
    return led


@dataclass
class Cluster:
    """A running cluster under measurement: its address, node pids, and one topic per case (made once)."""

    nodes: int
    bootstrap: str
    pids: list[int]
    topics: dict[str, str]


def measure_case(cluster: Cluster, label: str, args: argparse.Namespace) -> dict[str, Any]:
    """One produce run of the raw driver with ``args`` on the case's topic; its figures with the CPU used."""
    bootstrap = cluster.bootstrap
    if label not in cluster.topics:
        cluster.topics[label] = raw_driver.make_topic(bootstrap, args)
        spread_leaders(bootstrap, cluster.topics[label], cluster.nodes)
    topic = cluster.topics[label]
    targets, records = raw_driver.produce_targets(bootstrap, topic, args, 1)
    before = raw_driver.end_offsets(bootstrap, topic, args.partitions)
    used: list[CpuUse] = []
    with cpu_watch(cluster.pids, used):
        results = raw_driver.run_load(raw_driver.spread(targets, args.processes, args.connections), args.in_flight,
                                      args.warmup, args.seconds, 64 * 1024)
    answered = sum(r["answered"] for r in results)
    figures = raw_driver.summarise(results, args.seconds, f"{records} records per request")
    moved = raw_driver.end_offsets(bootstrap, topic, args.partitions) - before
    if moved != answered * records:
        raise BenchError(f"end offsets moved by {moved}, but {answered} requests of {records} were acknowledged")
    return {**figures, "cpu": used[0], "answered": answered, "answered_bytes": answered * targets[0].payload_bytes}


@contextlib.contextmanager
def clusters_of(counts: list[int]) -> Iterator[list[Cluster]]:
    """A fresh cluster of N combined nodes for every N of ``counts``, all running at once (an idle cluster
    costs every run the same), stopped on exit."""
    from tests.support.cluster import LocalCluster

    with contextlib.ExitStack() as stack:
        running = []
        for nodes in counts:
            base = stack.enter_context(scratch_dir(f"multicore-{nodes}"))
            cluster = stack.enter_context(LocalCluster(base, nodes, overrides=NODE_SETTINGS))
            cluster.active_controller(60)
            wait_registered(cluster, 60)
            running.append(Cluster(nodes, cluster.bootstrap, [int(n.pid or 0) for n in cluster.brokers], {}))
        yield running


def driver_args(args: argparse.Namespace, options: dict[str, Any]) -> argparse.Namespace:
    """The raw driver's options for one case, its defaults overridden by this script's load shape."""
    parsed = raw_driver.build_parser().parse_args([])
    vars(parsed).update(processes=args.processes, connections=args.connections, partitions=args.partitions,
                        seconds=args.seconds, warmup=args.warmup, acks="1", replication_factor=1, **options)
    return parsed


def median_run(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median requests/s (its CPU figures belong to it)."""
    ranked = sorted(samples, key=lambda figures: float(figures["requests_s"]))
    return ranked[(len(ranked) - 1) // 2]


def measure_all(args: argparse.Namespace) -> dict[tuple[str, int], dict[str, Any]]:
    """Every case at every N, ``args.rounds`` times; within a round the node counts take turns (their order
    rotates from round to round), so a change in the machine's other load touches every N alike."""
    samples: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with clusters_of(args.node_counts) as clusters:
        for round_no in range(args.rounds):
            order = clusters[round_no % len(clusters):] + clusters[:round_no % len(clusters)]
            for label, options in CASES:
                for cluster in order:
                    note(f"round {round_no + 1}, {node_label(cluster.nodes)}, {label}")
                    figures = measure_case(cluster, label, driver_args(args, options))
                    samples.setdefault((label, cluster.nodes), []).append(figures)
    return {key: median_run(runs) for key, runs in samples.items()}


# --------------------------------------------------------------------------- in-process costs


def _per_call_ms(call: Callable[[], object], repeat: int) -> float:
    """Milliseconds per call, the best of 5 runs of ``repeat`` calls: the call's own cost, not the time another
    process held the core."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            call()
        best = min(best, (time.perf_counter() - start) * 1000 / repeat)
    return best


def python_pace_beside(call: Callable[[], object]) -> float:
    """How fast this thread runs Python while another thread is inside one ``call``, as a share of its pace
    alone: near 0 when the call holds the GIL, well above 0 when it releases it (and a core is free)."""
    def spin(stop: Callable[[], bool]) -> list[float]:
        stamps: list[float] = []
        while not stop():
            stamps.append(time.perf_counter())
        return stamps

    alone_until = time.perf_counter() + 0.02
    alone = spin(lambda: time.perf_counter() >= alone_until)
    window: list[float] = []

    def timed_call() -> None:
        window.append(time.perf_counter())
        call()
        window.append(time.perf_counter())

    # A thread holding the GIL is asked to let go of it only once another has waited the switch interval: made
    # longer than the held calls last (about 1 ms on 64 MiB), no Python runs beside a call that holds the GIL,
    # however the threads happen to be scheduled, while beside one that releases it this thread runs on.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.05)
    try:
        worker = threading.Thread(target=timed_call)
        worker.start()
        beside = spin(lambda: not worker.is_alive())
        worker.join()
    finally:
        sys.setswitchinterval(interval)
    start, end = window
    within = sum(1 for stamp in beside if start <= stamp <= end)
    return (within / (end - start)) / (len(alone) / (alone[-1] - alone[0]))


class FileAppend:
    """Appends of one batch to a file of its own, as a segment's ``pwritev`` does: the file is emptied every
    ``appends_per_file`` appends, so pages are always new (as at a log's end) and the file stays small."""

    def __init__(self, directory: str, batch: bytes, appends_per_file: int = 64) -> None:
        self.appends_per_file = appends_per_file
        self.pieces = [memoryview(batch)[:BATCH_HEADER_SIZE], memoryview(batch)[BATCH_HEADER_SIZE:]]
        self.size = len(batch)
        self.directory = directory
        self.files: dict[int, tuple[int, list[int]]] = {}  # thread id -> (fd, [appends so far])

    def __call__(self) -> None:
        fd, count = self._file()
        if count[0] % self.appends_per_file == 0:
            os.ftruncate(fd, 0)
        os.pwritev(fd, self.pieces, (count[0] % self.appends_per_file) * self.size)
        count[0] += 1

    def _file(self) -> tuple[int, list[int]]:
        key = threading.get_ident()
        if key not in self.files:
            path = os.path.join(self.directory, f"segment-{key}.log")
            self.files[key] = (os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600), [0])
        return self.files[key]

    def close(self) -> None:
        for fd, _ in self.files.values():
            os.close(fd)


def batch_work(append: FileAppend, batch: bytes) -> dict[str, Callable[[], object]]:
    """The calls a broker makes per 1 MiB batch of the driver, that a worker thread could make instead."""
    import crc32c

    from moldau.protocol.record_batch import parse_header
    from moldau.protocol.record_validation import walk_records

    header = parse_header(batch)
    crc_part = memoryview(batch)[CRC_START:]
    records = memoryview(batch)[BATCH_HEADER_SIZE:]
    return {
        "CRC-32C (crc32c)": lambda: crc32c.crc32c(crc_part),
        "zlib.crc32": lambda: zlib.crc32(crc_part),
        "record walk (moldau._records)": lambda: walk_records(
            records, header.records_count, header.last_offset_delta, True, 2**31 - 1),
        "file append (os.pwritev)": append,
    }


def in_process_costs(repeat: int) -> dict[str, tuple[float, float]]:
    """Per call: (ms per 1 MiB batch, Python's pace beside one call on a 64 MiB batch, median of 3: does it
    release the GIL)."""
    small = raw_requests.record_batch(raw_requests.records_for(MIB, 1000), 1000)
    large = raw_requests.record_batch(raw_requests.records_for(64 * MIB, 1000), 1000)  # long calls: clear answers
    costs = {}
    with scratch_dir("multicore-append") as directory:
        appends = [FileAppend(str(directory), small), FileAppend(str(directory), large, appends_per_file=1)]
        try:
            timed, beside = batch_work(appends[0], small), batch_work(appends[1], large)
            for name, call in timed.items():
                call()
                paces = sorted(python_pace_beside(beside[name]) for _ in range(3))
                costs[name] = (_per_call_ms(call, repeat), paces[1])
        finally:
            for append in appends:
                append.close()
    return costs


# --------------------------------------------------------------------------- tables


def node_label(nodes: int) -> str:
    return f"{nodes} node" + ("s" if nodes > 1 else "")


def capacity_table(runs: dict[tuple[str, int], dict[str, Any]], counts: list[int], append_limit: float,
                   limit_note: str) -> Table:
    table = Table(f"produce capacity, N nodes on one host ({os.cpu_count()} cores), replication factor 1, acks=1",
                  columns=[node_label(n) for n in counts])
    for label, _ in CASES:
        one = runs.get((label, 1))
        for nodes in counts:
            figures, column = runs[label, nodes], node_label(nodes)
            cpu: CpuUse = figures["cpu"]
            table.row(f"{label}: MB/s", append_limit).values[column] = figures["mb_s"]
            table.row(f"{label}: requests/s").values[column] = figures["requests_s"]
            if one is not None:
                table.row(f"{label}: requests/s, x 1 node").values[column] = figures["requests_s"] / one["requests_s"]
            table.row(f"{label}: p99 ms").values[column] = figures["p99_ms"]
            table.row(f"{label}: node cores (all nodes)").values[column] = cpu.node_cores
            table.row(f"{label}: node cores (busiest node)").values[column] = cpu.busiest_node_cores
            table.row(f"{label}: node CPU ms per MB").values[column] = \
                sum(n.total for n in cpu.nodes) * 1000 / (figures["answered_bytes"] / MB)
            table.row(f"{label}: node CPU µs per request").values[column] = \
                sum(n.total for n in cpu.nodes) * 1e6 / figures["answered"]
            table.row(f"{label}: node system CPU share").values[column] = \
                sum(n.system for n in cpu.nodes) / max(1e-9, sum(n.total for n in cpu.nodes))
            table.row(f"{label}: load generator cores").values[column] = cpu.driver_cores
            table.row(f"{label}: other load on the machine, cores").values[column] = cpu.other_cores
    table.notes.append(raw_note({"append": append_limit}, "append") + limit_note)
    table.notes.append("cores = CPU seconds (user + system) / wall seconds of the load, warm-up and drain included")
    cores = os.cpu_count() or 1
    table.notes.append(f"this host has {cores} cores: nodes together can use at most {cores} less the load generator's "
                       "and the rest of the machine's share; a node, one core at most")
    return table


def costs_table(costs: dict[str, tuple[float, float]], runs: dict[tuple[str, int], dict[str, Any]]) -> Table:
    table = Table("per 1 MiB batch: work a second thread could take over", columns=["figure"])
    one = runs.get(("1 MiB batches", 1))
    per_batch = None
    if one is not None:
        per_batch = sum(n.total for n in one["cpu"].nodes) * 1000 / (one["answered_bytes"] / MIB)
        table.row("node CPU ms per 1 MiB batch, whole request (1 node)").values["figure"] = per_batch
    for name, (alone, pace) in costs.items():
        table.row(f"{name}: ms per batch").values["figure"] = alone
        table.row(f"{name}: Python's pace beside it").values["figure"] = pace
        if per_batch:
            table.row(f"{name}: share of the request's CPU").values["figure"] = alone / per_batch
    return table


# --------------------------------------------------------------------------- command line and run_all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", default="1,2,3", help="node counts to measure, comma separated")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of each topic (spread over the nodes)")
    parser.add_argument("--processes", type=int, default=2, help="load processes")
    parser.add_argument("--connections", type=int, default=3, help="connections per load process")
    parser.add_argument("--seconds", type=float, help="measured seconds per run (default 6, quick 3)")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, help="rounds of every run, the median reported (default 3, quick 1)")
    parser.add_argument("--raw-mb", type=int, default=512, help="MiB moved per raw-limit figure")
    parser.add_argument("--no-in-process", action="store_true", help="skip the in-process cost measurements")


def prepare(args: argparse.Namespace) -> None:
    args.node_counts = [int(n) for n in str(args.nodes).split(",") if n.strip()]
    if not args.node_counts or min(args.node_counts) < 1:
        raise SystemExit(f"--nodes: node counts of at least 1, got {args.nodes!r}")
    if args.seconds is None:
        args.seconds = 3.0 if args.quick else 6.0
    if args.rounds is None:
        args.rounds = args.repeat or (1 if args.quick else 3)


def tables_for(args: argparse.Namespace, append_limit: float, runs: dict[tuple[str, int], dict[str, Any]],
               limit_note: str = "") -> list[Table]:
    tables = [capacity_table(runs, args.node_counts, append_limit, limit_note)]
    if not args.no_in_process:
        tables.append(costs_table(in_process_costs(20 if args.quick else 100), runs))
    return tables


def run(args: argparse.Namespace, targets: list[tuple[str, str]], limits: dict[str, float]) -> list[Table]:
    """As a scenario of ``bench/run_all.py``: Moldau only, against the raw limit run_all measured."""
    if not any(kind == "moldau" for _, kind in targets):
        return []
    prepare(args)
    return tables_for(args, limits["append"], measure_all(args))


def main() -> None:
    parser = base_parser(__doc__)
    add_arguments(parser)
    args = parser.parse_args()
    prepare(args)
    note(f"raw limit: moving {args.raw_mb} MiB over loopback, twice per figure")
    before = raw_limits(args.raw_mb, repeat=2)["append"]
    runs = measure_all(args)
    note("raw limit again")
    after = raw_limits(args.raw_mb, repeat=2)["append"]
    print(f"raw limit, loopback + file append: {before:,.0f} MB/s before, {after:,.0f} MB/s after")
    tables = tables_for(args, (before + after) / 2, runs, " (mean of before and after the runs)")
    labels = [node_label(n) for n in args.node_counts]
    for table in tables:
        print(render(table, labels))
    if not args.no_save:
        extra = {"raw_limit_append_mb_s": {"before": before, "after": after}, "cores": os.cpu_count()}
        print(f"\nresults written to {save_results('multicore', labels, tables, extra)}")


if __name__ == "__main__":
    main()
