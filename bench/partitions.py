"""Scale in partitions: what 10,000 idle partitions cost one Moldau node.

Two nodes run side by side, each on a directory of its own: BASE holds only a 1-partition topic ``hot``;
LOADED holds ``hot`` too and then gets the partitions of the layout (``100x100``: 100 topics of 100 partitions;
``1x10000``: one topic of 10,000), created in CreateTopics requests of up to 50 topics each. Measured:

- **create**: seconds from the first CreateTopics request until every partition of the layout is *ready*:
  Metadata (all topics) names a leader for each, and a ListOffsets of all of them answers without an error;
- **RSS per partition**: LOADED's VmRSS 5 s after the creation minus BASE's at the same moment, divided by the
  count (and LOADED's own growth over the creation, divided likewise);
- **idle CPU**: both nodes' CPU time (user + system, /proc/PID/stat) over the same IDLE seconds with no client
  connected, as a share of one core;
- **Metadata** (all topics, v12) and **ListOffsets** (latest offset of every partition of the node, v7): the
  median of 5 round trips on a raw socket, from the request's first byte sent to the response's last byte
  received (decoding the response is not timed; it is checked for errors and leaders);
- **produce beside them**: kcat producing RECORDS x 1000 B to ``hot`` on BASE and on LOADED, REPEAT rounds each,
  the order alternating; records/s and the broker's CPU µs per record (less moved by other load than wall
  time), medians and the LOADED/BASE ratio. Every run is read back and counted;
- **restart**: LOADED stopped with SIGTERM (seconds to exit), started again on the same directory: seconds until
  it answers ApiVersions, and until every partition is ready again; its RSS once ready.

With ``--profile DIR`` and ``py-spy`` on the path, LOADED is sampled for the IDLE seconds (``idle.svg``) and
during one produce run (``produce.svg``), as flame graphs in DIR.

With ``--restarts N`` only the creation and N stops and starts of one node are measured (no BASE node, idle,
round trips or produce runs); each ``--checkout DIR`` runs that node from another checkout, in turn, so that two
commits are compared in one run.

With ``--requests`` one node per ``--checkout`` holds the layout, all running at once: their idle CPU over the same
IDLE seconds, then Metadata and ListOffsets round trips (as above), the nodes taking turns for REPEAT rounds.

Run from the repository root:  python -m bench.partitions [--quick] [--layout 100x100,1x10000] [--idle S]
[--records N] [--repeat N] [--profile DIR] [--restarts N | --requests] [--checkout DIR]...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    BenchError,
    Broker,
    alternating,
    create_topic,
    exit_on_sigterm,
    kcat_version,
    launch_broker,
    line_files,
    note,
    run_timed,
    scratch_dir,
    stop_process,
    unique_topic,
    verify_count,
    wait_ready,
)
from tests.support.raw_client import RawClient

RECORD_BYTES = 1000
TOPICS_PER_REQUEST = 50
TIMED_ROUND_TRIPS = 5
READY_TIMEOUT_S = 600.0
# Idle partitions must not make any broker timer fire more often than a test run would notice; what is measured is
# what the defaults do.
OVERRIDES: dict[str, str] = {}


@dataclass
class Layout:
    topics: int
    partitions: int

    @classmethod
    def parse(cls, spec: str) -> Layout:
        topics, _, partitions = spec.partition("x")
        return cls(int(topics), int(partitions))

    @property
    def total(self) -> int:
        return self.topics * self.partitions

    def __str__(self) -> str:
        return f"{self.topics} topic{'s' if self.topics > 1 else ''} x {self.partitions} partitions"


@dataclass
class Node:
    """A node whose data directory outlives its process, so that it can be restarted on it."""

    label: str
    data_dir: Path
    log: Path
    broker: Broker | None = None
    topics: list[str] = field(default_factory=list)
    checkout: Path | None = None

    def start(self) -> Broker:
        self.broker = launch_broker(self.label, "moldau", self.data_dir, self.log, overrides=OVERRIDES,
                                    checkout=self.checkout)
        return self.broker

    @property
    def running(self) -> Broker:
        assert self.broker is not None
        return self.broker

    def stop(self) -> float:
        """SIGTERM; seconds until the process exited."""
        broker, self.broker = self.running, None
        started = time.perf_counter()
        broker.proc.send_signal(signal.SIGTERM)
        try:
            broker.proc.wait(120)
        except subprocess.TimeoutExpired:
            broker.proc.kill()
            broker.proc.wait()
            raise BenchError(f"{self.label} did not stop within 120 s of SIGTERM") from None
        return time.perf_counter() - started


@contextlib.contextmanager
def node(label: str, tmp: Path, checkout: Path | None = None) -> Iterator[Node]:
    data_dir = tmp / label / "data"
    data_dir.mkdir(parents=True)
    this = Node(label, data_dir, tmp / label / "broker.log", checkout=checkout)
    try:
        yield this
    finally:
        if this.broker is not None:
            stop_process(this.broker.proc, grace=60)


# --------------------------------------------------------------------------- process figures


def rss_mb(broker: Broker) -> float:
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def cpu_seconds(broker: Broker) -> float:
    """The broker's user + system CPU time so far."""
    fields = Path(f"/proc/{broker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(broker: Broker) -> int:
    return len(os.listdir(f"/proc/{broker.proc.pid}/fd"))


# --------------------------------------------------------------------------- requests


def metadata_request() -> Any:
    from kio.schema.metadata.v12.request import MetadataRequest

    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def list_offsets_request(partitions: dict[str, int]) -> Any:
    from kio.schema.list_offsets.v7 import request as lo
    from kio.schema.types import BrokerId, TopicName
    from kio.static.primitive import i8, i32, i64

    topics = tuple(
        lo.ListOffsetsTopic(name=TopicName(topic), partitions=tuple(
            lo.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(-1)) for p in range(count)))
        for topic, count in partitions.items())
    return lo.ListOffsetsRequest(replica_id=BrokerId(-1), isolation_level=i8(0), topics=topics)


def timed_round_trip(client: RawClient, request: Any) -> tuple[float, Any]:
    """Seconds from the first byte sent to the last byte received, and the decoded response."""
    from kio.serial import entity_reader

    from moldau.protocol import codec

    encoded = client.encode(request)
    started = time.perf_counter()
    client.send_raw(encoded)
    frame = client.read_frame()
    seconds = time.perf_counter() - started
    schema = codec.api_schema(request.__api_key__, request.__version__)
    response, _ = entity_reader(schema.response_type)(frame[4 + (1 if schema.flexible_response_header else 0):], 0)
    return seconds, response


def leaders_of(response: Any) -> dict[str, int]:
    """Partitions with a leader, per topic, from a Metadata response."""
    return {str(t.name): sum(1 for p in t.partitions if p.error_code == 0 and p.leader_id >= 0)
            for t in response.topics if t.error_code == 0}


def offsets_errors(response: Any) -> int:
    return sum(1 for t in response.topics for p in t.partitions if p.error_code != 0)


def hosted_partitions(broker: Broker) -> dict[str, int]:
    with RawClient(broker.bootstrap, timeout_s=120) as client:
        _, response = timed_round_trip(client, metadata_request())
    return {str(t.name): len(t.partitions) for t in response.topics if not t.is_internal}


def median_round_trip_ms(broker: Broker, request: Any, check: Any = None) -> float:
    times = []
    with RawClient(broker.bootstrap, timeout_s=120) as client:
        timed_round_trip(client, request)  # warm-up: first use of the connection and the handler
        for _ in range(TIMED_ROUND_TRIPS):
            seconds, response = timed_round_trip(client, request)
            if check is not None:
                check(response)
            times.append(seconds * 1000)
    return statistics.median(times)


def all_ready(broker: Broker, expected: dict[str, int]) -> bool:
    """Metadata names a leader for every expected partition, and ListOffsets of all of them has no error."""
    try:
        with RawClient(broker.bootstrap, timeout_s=60) as client:
            _, meta = timed_round_trip(client, metadata_request())
            leaders = leaders_of(meta)
            if any(leaders.get(topic, 0) < count for topic, count in expected.items()):
                return False
            _, offsets = timed_round_trip(client, list_offsets_request(expected))
            return offsets_errors(offsets) == 0
    except (OSError, ConnectionError):
        return False


def wait_all_ready(broker: Broker, expected: dict[str, int], started: float) -> float:
    while time.perf_counter() - started < READY_TIMEOUT_S:
        if broker.proc.poll() is not None:
            raise BenchError(f"{broker.label} exited with {broker.proc.returncode}:\n{broker.log_tail()}")
        if all_ready(broker, expected):
            return time.perf_counter() - started
        time.sleep(0.1)
    raise BenchError(f"{broker.label}: partitions not ready after {READY_TIMEOUT_S:.0f} s")


# --------------------------------------------------------------------------- steps


def create_layout(broker: Broker, layout: Layout) -> tuple[list[str], float]:
    """Create the layout's topics; returns their names and the seconds until every partition has a leader."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    names = [unique_topic(f"idle{i:04d}") for i in range(layout.topics)]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 4})
    started = time.perf_counter()
    for first in range(0, len(names), TOPICS_PER_REQUEST):
        chunk = names[first:first + TOPICS_PER_REQUEST]
        futures = admin.create_topics([NewTopic(name, layout.partitions, 1) for name in chunk],
                                      operation_timeout=300, request_timeout=300)
        for future in futures.values():
            future.result(timeout=600)
    return names, wait_all_ready(broker, dict.fromkeys(names, layout.partitions), started)


@dataclass(frozen=True)
class Run:
    records_per_s: float
    cpu_us_per_record: float


def produce_run(broker: Broker, topic: str, lines: Path, count: int, before: int) -> Run:
    cpu = cpu_seconds(broker)
    seconds, _ = run_timed(["kcat", "-P", "-b", broker.bootstrap, "-t", topic, "-p", "0", "-l", "-X", "linger.ms=5",
                            "-X", "batch.size=1000000", str(lines)], timeout=300)
    cpu = cpu_seconds(broker) - cpu
    verify_count(broker.bootstrap, topic, before + count, timeout=120)
    return Run(count / seconds, cpu * 1e6 / count)


@contextlib.contextmanager
def profiled(broker: Broker, directory: Path | None, name: str) -> Iterator[None]:
    """Sample ``broker`` with py-spy into ``directory/name.svg`` while the block runs (nothing without py-spy)."""
    spy = shutil.which("py-spy")
    if directory is None or spy is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([spy, "record", "--pid", str(broker.proc.pid), "--rate", "50", "--nonblocking",
                             "--output", str(directory / f"{name}.svg")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def measure_restarts(args: argparse.Namespace, layout: Layout, checkout: Path | None) -> dict[str, float]:
    """Only the creation, then ``args.restarts`` stops and starts of one node (run from ``checkout`` if given)."""
    figures: dict[str, float] = {}
    with scratch_dir("partitions") as tmp, node("loaded", tmp, checkout) as loaded:
        wait_ready(loaded.start())
        names, figures["create s"] = create_layout(loaded.running, layout)
        expected = dict.fromkeys(names, layout.partitions)
        for round_ in range(1, args.restarts + 1):
            figures[f"stop {round_} s"] = loaded.stop()
            started = time.perf_counter()
            broker = loaded.start()
            wait_ready(broker)
            figures[f"restart {round_} to ApiVersions s"] = time.perf_counter() - started
            figures[f"restart {round_} to all ready s"] = wait_all_ready(broker, expected, started)
    return figures


def measure_requests(args: argparse.Namespace, layout: Layout,
                     checkouts: list[Path | None]) -> list[dict[str, float]]:
    """One node per checkout, each holding the layout: their idle CPU over the same seconds, then Metadata (all
    topics) and ListOffsets (every partition) round trips, the nodes taking turns (``args.repeat`` rounds of
    ``TIMED_ROUND_TRIPS`` each; the median of all)."""
    figures: list[dict[str, float]] = [{} for _ in checkouts]
    with scratch_dir("partitions") as tmp, contextlib.ExitStack() as stack:
        nodes = [stack.enter_context(node(f"node{i}", tmp, checkout)) for i, checkout in enumerate(checkouts)]
        expected = []
        for each, figure in zip(nodes, figures, strict=True):
            wait_ready(each.start())
            names, figure["create s"] = create_layout(each.running, layout)
            expected.append(dict.fromkeys(names, layout.partitions))
        time.sleep(5)
        before = [cpu_seconds(each.running) for each in nodes]
        time.sleep(args.idle)
        for each, figure, cpu in zip(nodes, figures, before, strict=True):
            figure["idle CPU %"] = (cpu_seconds(each.running) - cpu) / args.idle * 100
        samples: list[dict[str, list[float]]] = [{"Metadata": [], "ListOffsets": []} for _ in nodes]
        for round_ in range(args.repeat):
            order = list(range(len(nodes)))[::1 if round_ % 2 == 0 else -1]
            for i in order:
                broker = nodes[i].running
                samples[i]["Metadata"].append(median_round_trip_ms(broker, metadata_request(), _check_leaders))
                samples[i]["ListOffsets"].append(median_round_trip_ms(broker, list_offsets_request(expected[i]),
                                                                      _check_offsets))
        for figure, sample in zip(figures, samples, strict=True):
            for name, values in sample.items():
                figure[f"{name} ms"] = statistics.median(values)
    return figures


def _check_leaders(response: Any) -> None:
    if any(p.error_code != 0 or p.leader_id < 0 for t in response.topics for p in t.partitions):
        raise BenchError("a Metadata response names a partition without a leader")


def _check_offsets(response: Any) -> None:
    if offsets_errors(response):
        raise BenchError("a ListOffsets response has partition errors")


def measure_layout(args: argparse.Namespace, layout: Layout, lines: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    with scratch_dir("partitions") as tmp, node("base", tmp) as base, node("loaded", tmp) as loaded:
        for each in (base, loaded):
            wait_ready(each.start())
        hot = unique_topic("hot")
        for each in (base, loaded):
            create_topic(each.running.bootstrap, hot, 1)
        produced = {"base": 0, "loaded": 0}
        for each in (base, loaded):  # warm-up: first produce, first fetch, the record path imported
            produce_run(each.running, hot, lines, args.records, 0)
            produced[each.label] += args.records
        time.sleep(5)
        figures["RSS base before, MB"] = rss_mb(base.running)
        figures["RSS loaded before, MB"] = rss_mb(loaded.running)
        note(f"{layout}: creating {layout.total} partitions")
        names, figures["create s"] = create_layout(loaded.running, layout)
        expected = dict.fromkeys(names, layout.partitions)
        time.sleep(5)
        figures["RSS loaded after, MB"] = rss_mb(loaded.running)
        figures["RSS base after, MB"] = rss_mb(base.running)
        figures["RSS per partition (loaded - base), KiB"] = (
            (figures["RSS loaded after, MB"] - figures["RSS base after, MB"]) * 1024 / layout.total)
        figures["RSS per partition (loaded after - before), KiB"] = (
            (figures["RSS loaded after, MB"] - figures["RSS loaded before, MB"]) * 1024 / layout.total)
        figures["open fds loaded"] = open_fds(loaded.running)
        note(f"idle for {args.idle} s")
        cpu = {n.label: cpu_seconds(n.running) for n in (base, loaded)}
        with profiled(loaded.running, args.profile, f"idle-{layout.topics}x{layout.partitions}"):
            time.sleep(args.idle)
        for each in (base, loaded):
            figures[f"idle CPU {each.label}, %"] = (cpu_seconds(each.running) - cpu[each.label]) * 100 / args.idle
        every = {**expected, hot: 1}
        figures["Metadata base, ms"] = median_round_trip_ms(base.running, metadata_request())
        figures["Metadata loaded, ms"] = median_round_trip_ms(loaded.running, metadata_request())
        figures["ListOffsets 1 partition base, ms"] = median_round_trip_ms(base.running, list_offsets_request({hot: 1}))

        def no_errors(response: Any) -> None:
            if offsets_errors(response):
                raise BenchError(f"ListOffsets: {offsets_errors(response)} partitions answered with an error")

        figures["ListOffsets all loaded, ms"] = median_round_trip_ms(loaded.running, list_offsets_request(every),
                                                                     no_errors)
        runs: dict[str, list[Run]] = {"base": [], "loaded": []}
        for round_, each in alternating((base, loaded), args.repeat):
            note(f"produce on {each.label} [round {round_ + 1}/{args.repeat}]")
            with profiled(each.running, args.profile if round_ == 0 and each is loaded else None,
                          f"produce-{layout.topics}x{layout.partitions}"):
                runs[each.label].append(produce_run(each.running, hot, lines, args.records, produced[each.label]))
            produced[each.label] += args.records
        for key in ("records_per_s", "cpu_us_per_record"):
            for side in ("base", "loaded"):
                figures[f"produce {key} {side}"] = statistics.median(getattr(r, key) for r in runs[side])
            figures[f"produce {key} loaded/base"] = (figures[f"produce {key} loaded"]
                                                     / figures[f"produce {key} base"])
        note("restarting the loaded node")
        figures["stop s"] = loaded.stop()
        started = time.perf_counter()
        broker = loaded.start()
        wait_ready(broker)
        figures["restart to ApiVersions s"] = time.perf_counter() - started
        figures["restart to all ready s"] = wait_all_ready(broker, every, started)
        time.sleep(5)
        figures["RSS loaded after restart, MB"] = rss_mb(broker)
        figures["RSS per partition after restart (loaded - base), KiB"] = ((figures["RSS loaded after restart, MB"]
                                                            - figures["RSS base after, MB"]) * 1024 / layout.total)
        if hosted_partitions(broker) != every:
            raise BenchError("after the restart Metadata does not list the partitions created")
    return figures


def print_figures(layout: Layout, figures: dict[str, float], checkout: Path | None = None) -> None:
    print(f"\n## {layout} ({layout.total:,} partitions){f', Moldau from {checkout}' if checkout else ''}", flush=True)
    for name, value in figures.items():
        print(f"{name:44} {value:12,.2f}")


def main() -> None:
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,000 partitions, short idle, fewer records")
    parser.add_argument("--layout", help="comma list of TOPICSxPARTITIONS (default 100x100,1x10000; quick 10x100)")
    parser.add_argument("--idle", type=float, help="seconds of idle CPU measurement (default 30, quick 10)")
    parser.add_argument("--records", type=int, help="records per produce run (default 200000, quick 50000)")
    parser.add_argument("--repeat", type=int, help="produce rounds per node (default 3, quick 1)")
    parser.add_argument("--profile", type=Path, help="directory for py-spy flame graphs of the loaded node")
    parser.add_argument("--restarts", type=int, default=0,
                        help="only create the layout on one node, then stop and start it this many times")
    parser.add_argument("--checkout", type=Path, action="append",
                        help="with --restarts or --requests: run Moldau from this checkout (repeat to compare "
                             "several)")
    parser.add_argument("--requests", action="store_true",
                        help="only create the layout on one node per --checkout (all running at once), then "
                             "measure their idle CPU and Metadata and ListOffsets round trips, taking turns")
    args = parser.parse_args()
    layouts = [Layout.parse(s) for s in (args.layout or ("10x100" if args.quick else "100x100,1x10000")).split(",")]
    args.idle = args.idle or (10 if args.quick else 30)
    args.records = args.records or (50_000 if args.quick else 200_000)
    args.repeat = args.repeat or (1 if args.quick else 3)
    if args.requests:
        for layout in layouts:
            checkouts: list[Path | None] = list(args.checkout or [None])
            for checkout, figures in zip(checkouts, measure_requests(args, layout, checkouts), strict=True):
                print_figures(layout, figures, checkout)
        return
    if args.restarts:
        for layout in layouts:
            for checkout in args.checkout or [None]:
                print_figures(layout, measure_restarts(args, layout, checkout), checkout)
        return
    print(f"# scale in partitions; produce {args.records} x {RECORD_BYTES} B per run, {args.repeat} rounds, "
          f"idle {args.idle:.0f} s, kcat {kcat_version()}")
    with line_files("partitions", {RECORD_BYTES: args.records}) as files:
        for layout in layouts:
            print_figures(layout, measure_layout(args, layout, files[RECORD_BYTES]))


if __name__ == "__main__":
    main()
