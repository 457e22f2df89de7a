"""Scale in bytes: does a broker holding a large log serve, restart and delete as fast as one holding a small log?

Two single-node Moldau brokers run side by side with the same settings, each with one single-partition topic: the
*small* one holds ``--small-mb`` MB (100 by default; its ``retention.bytes`` keeps it there, up to one segment
more, while the measurements write into it), the *big* one ``--size-gb`` GB (20 by default, growing with what the
measurements write; a quick run uses ``--size-gb 2``). Both are filled with 1 MiB batches of 1000-byte values
over the raw protocol. Then, for each broker in turn (alternating, ``--rounds`` times, medians kept):

* **produce**: raw-protocol Produce of 1 MiB batches, acks=1 (``bench/raw_driver.py``'s loop and end-offset
  check), and a confluent-kafka producer writing ``--client-mb`` MB of 1000-byte records (what users see);
* **consume**: raw-protocol Fetch loops over the newest ``--window-mb`` MB (a consumer keeping up) and over the
  oldest ``--window-mb`` MB (a consumer catching up from the start; in the small log both are the same data).

Then each broker is restarted twice: after a clean shutdown (SIGTERM) and after ``kill -9`` right after
``--tail-mb`` MB more were produced (so recovery has an unflushed tail to re-validate). Restart time is from
starting the process to the first acknowledged Produce to the topic; most of it is starting the interpreter and
importing modules, so the time the broker logs for opening its logs ("opened N partition logs in ... ms", the
part that could grow with the data) is printed beneath it, as are the bytes recovery had to re-validate
(segments from the one holding the ``recovery-point`` checkpoint). Before each restart the disk is left to settle
(``sync``) and the broker's code is read once by a process that only imports it. Without that, the small node's
first restart took 3.5-4.3 s against about 1 s: most likely it read the interpreter's files, which a log larger
than memory had pushed out of the page cache, back from a disk busy with the other node's write-back, which is
neither node's log at work.

Last, **retention under load**: a steady producer writes 64 KiB batches every 10 ms (acks=1) to the big
broker's topic; after ``--steady-seconds`` its ``retention.bytes`` is lowered to ``--retain-mb`` MB, so the
next retention check (every second here) deletes nearly the whole log. Produce latency p50/p99/max is printed
for the requests sent before the change and for those sent while the segments were being deleted: from the change
until half a second after the last ``.deleted`` file is gone from the partition's directory, which covers the
renames on the event loop, ``file.delete.delay.ms=1000`` and the unlinks and closes that free the blocks on the
broker's deleting thread (5-6 s for 36 GB). The same is printed for the two parts of that window: up to 0.3 s
after the log start moved (the renames), and after that (the unlinks). The deletion is watched in that
directory, not over the protocol, so that watching it sends the broker nothing.

``--only retention`` fills the big log alone and measures only retention under load. ``--roll-ms N`` sets the
topic's ``segment.ms`` to N with ``retention.bytes``, so its active segment rolls every N ms during the deletion:
the steady load alone rolls a 128 MiB segment every 20 s, so a roll falls among the unlinks in about a third of
the runs, and the periodic pass after a roll is what met the busy journal there.

Both brokers use ``log.segment.bytes`` = ``--segment-mb`` MiB (128 by default: an unclean restart re-validates
at most the unflushed segments, so this bounds its cost). Data lives under ``--data-dir`` (default: a temporary
directory) and is removed at the end.

Run from the repository root, for example:
    python -m bench.bytes_scale --size-gb 2      # quick
    python -m bench.bytes_scale                  # 20 GB against 100 MB
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

from bench import raw_requests
from bench.common import (
    REPO,
    BenchError,
    add_override_option,
    api_versions_ok,
    create_topic,
    exit_on_sigterm,
    moldau_command,
    note,
)
from bench.raw_driver import (
    _ERROR,
    MB,
    MIB,
    Target,
    _read_frame,
    _send,
    measure_produce,
    run_load,
    summarise,
)
from moldau.net.ports import free_port
from tests.support.polling import wait_until

TOPIC = "bytes-scale"
READY_TIMEOUT_S = 600.0


# --------------------------------------------------------------------------- a broker that can be restarted


@dataclass
class Node:
    """One Moldau process on a fixed port and data directory, restartable."""

    label: str
    base: Path
    port: int
    overrides: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.base / "data"

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        with (self.base / f"broker-{self.starts}.log").open("wb") as out:
            self.proc = subprocess.Popen(
                [*moldau_command(self.port, self.data_dir),
                 *(arg for key, value in self.overrides.items() for arg in ("--override", f"{key}={value}"))],
                stdout=out, stderr=subprocess.STDOUT, cwd=REPO)

    def wait_serving(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not api_versions_ok(self.port):
            if self.proc is not None and self.proc.poll() is not None:
                raise BenchError(f"{self.label} exited with {self.proc.returncode}; see {self.base}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.label} not serving after {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.05)

    def stop(self, kill: bool = False) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if kill:
            self.proc.kill()
        else:
            self.proc.terminate()
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def partition_dir(self) -> Path:
        return self.data_dir / f"{TOPIC}-0"

    def bytes_to_revalidate(self) -> int:
        """Bytes in the segments from the one holding the recovery point: what an unclean start re-reads."""
        directory = self.partition_dir()
        try:
            recovery_point = int((directory / "recovery-point").read_text().strip())
        except (OSError, ValueError):
            recovery_point = 0
        logs = sorted(p for p in directory.iterdir() if p.name.endswith(".log"))
        bases = [int(p.name.split(".")[0]) for p in logs]
        first = max((i for i, b in enumerate(bases) if b <= recovery_point), default=0)
        return sum(p.stat().st_size for p in logs[first:])

    def log_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.partition_dir().iterdir() if p.name.endswith(".log"))

    def first_segment(self) -> int:
        """Base offset of the oldest `.log` file: it moves the moment retention renames a segment to `.deleted`,
        as the log start does. Read from the directory, so that watching it sends the broker nothing."""
        return min(int(p.name.split(".")[0]) for p in self.partition_dir().iterdir() if p.name.endswith(".log"))

    def deleted_files(self) -> int:
        """`.deleted` files in the partition's directory: retention's renamed segments not yet unlinked."""
        return sum(1 for p in self.partition_dir().iterdir() if p.name.endswith(".deleted"))


@contextlib.contextmanager
def one_node(label: str, overrides: dict[str, str], data_dir: str | None = None,
             kill: bool = False) -> Iterator[Node]:
    """One node on a fresh data directory (under `data_dir` if given), serving; stopped (`kill`: by SIGKILL) and its
    data removed at the end."""
    root = Path(tempfile.mkdtemp(prefix=f"bench-{label}-", dir=data_dir))
    node = Node(label, root, free_port(), overrides)
    try:
        node.start()
        node.wait_serving()
        yield node
    finally:
        node.stop(kill=kill)
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def nodes(args: argparse.Namespace) -> Iterator[tuple[Node, Node]]:
    """The small and the big broker, started (only the big one with `--only retention`); stopped and their data
    removed at the end."""
    root = Path(tempfile.mkdtemp(prefix="bench-bytes-", dir=args.data_dir))
    overrides = {
        "log.segment.bytes": str(args.segment_mb * MIB),
        "log.retention.check.interval.ms": "1000",  # retention under load is seen within a second
        "log.segment.delete.delay.ms": "1000",  # and the deleted files' fds close within the measured window
        "log.retention.ms": "-1",
        **dict(args.override),
    }
    pair = (Node("small", root / "small", free_port(), overrides), Node("big", root / "big", free_port(), overrides))
    small, big = pair
    running = (big,) if args.only == "retention" else pair  # retention alone needs no small node
    try:
        for node in running:
            node.start()
        for node in running:
            node.wait_serving()
        if small in running:
            # The small log stays small while the produce measurements write into both: retention keeps it
            # between --small-mb and one segment more.
            create_topic(small.bootstrap, TOPIC, 1, config={"retention.bytes": str(int(args.small_mb * MB))})
        create_topic(big.bootstrap, TOPIC, 1)
        yield pair
    finally:
        for node in pair:
            node.stop(kill=True)
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------- raw-protocol helpers


def _one_batch(batch_bytes: int) -> tuple[bytes, int]:
    records = raw_requests.records_for(batch_bytes, 1000)
    return raw_requests.record_batch(records, 1000), records


def produce_bytes(node: Node, total_bytes: int, in_flight: int = 4) -> int:
    """Append about ``total_bytes`` of 1 MiB batches (acks=1, pipelined); returns records written."""
    batch, records = _one_batch(MIB)
    request = raw_requests.produce(TOPIC, 0, batch, 1)
    where = raw_requests.error_position(raw_requests.PRODUCE_KEY, TOPIC)
    count = max(1, total_bytes // len(batch))
    buffer = memoryview(bytearray(64 * 1024))
    with socket.create_connection(("127.0.0.1", node.port)) as sock:
        sent = answered = 0
        while answered < count:
            while sent < count and sent - answered < in_flight:
                _send(sock, request, sent)
                sent += 1
            size = _read_frame(sock, buffer)
            if size <= where + 1 or _ERROR.unpack_from(buffer, where)[0] != 0:
                raise BenchError(f"{node.label}: a fill Produce was refused")
            answered += 1
    return count * records


def first_acknowledged_produce(node: Node, deadline: float) -> None:
    """Retry one small Produce until the partition's leader acknowledges it."""
    batch, _ = _one_batch(1024)
    request = raw_requests.produce(TOPIC, 0, batch, 1, timeout_ms=5000)
    where = raw_requests.error_position(raw_requests.PRODUCE_KEY, TOPIC)
    buffer = memoryview(bytearray(64 * 1024))
    while time.monotonic() < deadline:
        if node.proc is not None and node.proc.poll() is not None:
            raise BenchError(f"{node.label} exited with {node.proc.returncode}; see {node.base}")
        with contextlib.suppress(OSError, ConnectionError), \
                socket.create_connection(("127.0.0.1", node.port), timeout=5) as sock:
            _send(sock, request, 1)
            size = _read_frame(sock, buffer)
            if size > where + 1 and _ERROR.unpack_from(buffer, where)[0] == 0:
                return
        time.sleep(0.02)
    raise BenchError(f"{node.label}: no Produce acknowledged within {READY_TIMEOUT_S:.0f}s of a restart")


def raw_args(args: argparse.Namespace) -> argparse.Namespace:
    return argparse.Namespace(acks="1", partitions=1, batch_bytes=MIB, value_bytes=1000, processes=args.processes,
                              connections=args.connections, in_flight=args.in_flight, warmup=args.warmup,
                              seconds=args.seconds, broker_pid=None)


def measure_fetch_window(node: Node, first_offset: int, last_offset: int, args: argparse.Namespace) -> dict[str, Any]:
    """Raw Fetch loops cycling over 1 MiB reads of the offsets [first_offset, last_offset)."""
    _, records = _one_batch(MIB)
    where = raw_requests.error_position(raw_requests.FETCH_KEY, TOPIC)
    offsets = range(first_offset, max(first_offset + 1, last_offset - records), records)
    requests = [raw_requests.fetch(TOPIC, 0, offset, MIB + 64 * 1024) for offset in offsets]
    # The client-library producer's batches are smaller than 1 MiB: a response must hold one whole record.
    target = Target("127.0.0.1", node.port, requests, where, 0, min_response=1100)
    # Each connection starts at its own place in the window so that they do not read the same bytes in step.
    per_connection = []
    total = args.processes * args.connections
    for i in range(total):
        shift = len(requests) * i // total
        per_connection.append(Target(target.host, target.port, requests[shift:] + requests[:shift], where, 0,
                                     min_response=target.min_response))
    assignments = [per_connection[p * args.connections:(p + 1) * args.connections] for p in range(args.processes)]
    results = run_load(assignments, args.in_flight, args.warmup, args.seconds, 2 * MIB + 64 * 1024)
    return summarise(results, args.seconds, f"{len(requests)} distinct 1 MiB fetches")


def client_produce_mb_s(node: Node, total_mb: int) -> float:
    """confluent-kafka producer: ``total_mb`` MB of 1000-byte records, acks=1, timed to the last delivery."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": node.bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 512 * 1024, "log_level": 3})
    value = b"x" * 1000
    count = total_mb * 1000
    failed: list[str] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            failed.append(str(err))

    started = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(TOPIC, value, partition=0, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120) != 0 or failed:
        raise BenchError(f"{node.label}: client produce failed: {failed[:1] or 'not all delivered'}")
    return count * 1000 / (time.perf_counter() - started) / MB


def end_offset(node: Node) -> tuple[int, int]:
    """(log start, log end) of the partition, by ListOffsets. An AdminClient rather than a consumer: a consumer
    with a group.id asks for its coordinator at once, and the first such request creates `__consumer_offsets`
    (50 partitions), which would land inside the window retention is measured in."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 3})
    partition = TopicPartition(TOPIC, 0)
    earliest, latest = OffsetSpec.earliest(), OffsetSpec.latest()  # type: ignore[no-untyped-call]
    low = admin.list_offsets({partition: earliest}, request_timeout=30)[partition].result(30)
    high = admin.list_offsets({partition: latest}, request_timeout=30)[partition].result(30)
    return int(low.offset), int(high.offset)


# --------------------------------------------------------------------------- the scenarios


def throughput(small: Node, big: Node, args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    figures: dict[str, dict[str, list[float]]] = {"small": {}, "big": {}}
    _, records = _one_batch(MIB)
    window = int(args.window_mb * MB) // MIB * records
    for round_ in range(args.rounds):
        order = (small, big) if round_ % 2 == 0 else (big, small)
        for node in order:
            out = figures[node.label]
            note(f"round {round_ + 1}: {node.label} ({node.log_bytes() / 1e9:.2f} GB in the log)")
            raw = measure_produce(node.bootstrap, TOPIC, raw_args(args))
            out.setdefault("produce raw MB/s", []).append(raw["mb_s"])
            out.setdefault("produce client MB/s", []).append(client_produce_mb_s(node, args.client_mb))
            time.sleep(1.5)  # a retention check of the small log, so that no fetched offset goes during the fetches
            low, high = end_offset(node)
            newest = measure_fetch_window(node, max(low, high - window), high, args)
            out.setdefault("fetch newest MB/s", []).append(newest["mb_s"])
            oldest = measure_fetch_window(node, low, min(high, low + window), args)
            out.setdefault("fetch oldest MB/s", []).append(oldest["mb_s"])
    return figures


@dataclass
class Restart:
    seconds: float  # process start to the first acknowledged Produce
    load_ms: float  # what the broker logged for opening its logs (the part that could grow with the data)
    partitions: int  # how many partition logs it opened (the clients' __consumer_offsets among them)
    revalidated_bytes: int


_LOAD_LINE = re.compile(r"opened (\d+) partition logs in .* in (\d+) ms")


def logs_loaded(node: Node) -> tuple[float, int]:
    """(ms, partition logs) the broker logged for opening its logs at its last start."""
    text = (node.base / f"broker-{node.starts}.log").read_text(errors="replace")
    found = _LOAD_LINE.findall(text)
    if not found:
        raise BenchError(f"{node.label}: the broker logged no log-loading time")
    return float(sum(int(ms) for _, ms in found)), sum(int(count) for count, _ in found)


def settle() -> None:
    """Let the disk finish the write-back earlier measurements left it, and read the broker's code back into the
    page cache (see the module docstring): a restart then measures the node starting."""
    os.sync()
    subprocess.run([sys.executable, "-c", "import uvloop, moldau.server.broker"], check=True, cwd=REPO)


def restart(node: Node, unclean: bool, tail_mb: int) -> Restart:
    settle()
    if unclean:
        time.sleep(2)  # let the periodic flush move the recovery point to the active segment, as in steady state
        produce_bytes(node, int(tail_mb * MB))
        node.stop(kill=True)
        revalidate = node.bytes_to_revalidate()
    else:
        node.stop()
        revalidate = 0
    started = time.monotonic()
    node.start()
    first_acknowledged_produce(node, started + READY_TIMEOUT_S)
    seconds = time.monotonic() - started
    return Restart(seconds, *logs_loaded(node), revalidate)


@dataclass
class SteadyProducer:
    """One connection sending a `batch_bytes` batch to partition 0 of `topic` every `every_s` (acks=1), each after
    the answer to the one before, keeping (send time, latency) of each.

    It runs in a process of its own, from `start` to `stop`: in a thread of the benchmark's process, whatever the
    benchmark did meanwhile while holding the GIL (making an admin client, decoding a 10,000-partition Metadata
    answer) delayed reading the answers, and was timed as the broker's latency. `time.monotonic` is the system's
    monotonic clock, so its send times compare with the benchmark's."""

    node: Node
    topic: str = TOPIC
    batch_bytes: int = 64 * 1024
    every_s: float = 0.01
    samples: list[tuple[float, float]] = field(default_factory=list)
    error: str = ""
    _process: BaseProcess | None = None
    _results: Connection | None = None
    _stop: EventType | None = None

    def start(self) -> None:
        """Start sending; returns once the connection is up (BenchError if it cannot be made)."""
        context = multiprocessing.get_context("spawn")  # no fork of a process with librdkafka's threads
        self._results, child_end = context.Pipe(duplex=False)
        self._stop = context.Event()
        self._process = context.Process(
            target=_steady_produce, daemon=True,
            args=(self.node.port, self.topic, self.batch_bytes, self.every_s, self._stop, child_end))
        self._process.start()
        child_end.close()
        if not self._results.poll(STEADY_START_TIMEOUT_S):
            self.stop()
            raise BenchError(f"the steady producer to {self.topic} did not start")
        message = self._results.recv()
        if message[0] != "connected":
            self._take_results(message)
            self._process.join()
            raise BenchError(f"the steady producer to {self.topic} did not start: {self.error}")

    def stop(self) -> None:
        """Stop sending and take the samples (and the error, if it stopped early)."""
        if self._process is None or self._results is None or self._stop is None:
            return
        self._stop.set()
        if self._results.poll(STEADY_START_TIMEOUT_S):
            with contextlib.suppress(EOFError):
                self._take_results(self._results.recv())
        else:
            self.error = self.error or "the steady producer did not stop"
        self._process.join(5)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._process = None

    def _take_results(self, message: tuple[Any, ...]) -> None:
        _, self.samples, self.error = message


STEADY_START_TIMEOUT_S = 30.0


def _steady_produce(port: int, topic: str, batch_bytes: int, every_s: float, stop: EventType,
                    results: Connection) -> None:
    """The steady producer's process: sends ("connected",) once connected, then ("done", samples, error)."""
    batch, _ = _one_batch(batch_bytes)
    request = raw_requests.produce(topic, 0, batch, 1)
    where = raw_requests.error_position(raw_requests.PRODUCE_KEY, topic)
    buffer = memoryview(bytearray(64 * 1024))
    samples: list[tuple[float, float]] = []
    error = ""
    try:
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            results.send(("connected",))
            next_at, cid = time.monotonic(), 0
            while not stop.is_set():
                time.sleep(max(0.0, next_at - time.monotonic()))
                sent = time.monotonic()
                _send(sock, request, cid)
                size = _read_frame(sock, buffer)
                if size <= where + 1 or _ERROR.unpack_from(buffer, where)[0] != 0:
                    raise BenchError(f"a steady Produce to {topic} was refused")
                samples.append((sent, time.monotonic() - sent))
                cid += 1
                next_at += every_s
    except (OSError, ConnectionError, BenchError) as exc:
        error = str(exc) or type(exc).__name__
    results.send(("done", samples, error))
    results.close()


def retention_under_load(node: Node, args: argparse.Namespace) -> dict[str, Any]:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    # The admin client is made before the measured window and the deletion is watched in the partition's
    # directory: an AdminClient made every 100 ms to poll ListOffsets (a new connection, Metadata and ListOffsets
    # for the broker, librdkafka's threads on the same 2 cores) lifted the steady client's p99 by 0.3-0.9 ms with
    # nothing being deleted.
    admin = AdminClient({"bootstrap.servers": node.bootstrap, "log_level": 3})
    entries = [ConfigEntry("retention.bytes", str(args.retain_mb * MIB), incremental_operation=AlterConfigOpType.SET)]
    if args.roll_ms > 0:  # rolls during the deletion in every run, not in the third of runs the steady load's do
        entries.append(ConfigEntry("segment.ms", str(args.roll_ms), incremental_operation=AlterConfigOpType.SET))
    resource = ConfigResource("TOPIC", TOPIC, incremental_configs=entries)
    producer = SteadyProducer(node)
    producer.start()
    try:
        time.sleep(args.steady_seconds)
        before_bytes = node.log_bytes()
        start0 = node.first_segment()
        changed_at = time.monotonic()
        admin.incremental_alter_configs([resource])[resource].result(30)
        moved_at = _first_held(lambda: node.first_segment() > start0, "the log start to move")
        # The window ends once the last segment is unlinked and its blocks freed (its fd closed just after).
        freed_at = _first_held(lambda: node.deleted_files() == 0, "retention's files to be unlinked")
        time.sleep(0.5)
    finally:
        producer.stop()
    if producer.error:
        raise BenchError(f"steady producer: {producer.error}")
    before = [lat for sent, lat in producer.samples if sent < changed_at]
    during = [lat for sent, lat in producer.samples if changed_at <= sent <= freed_at + 0.5]
    # The renames run on the event loop in the first retention check after the change, within 0.3 s of the first
    # (seen here within 0.1 s); the unlinks and closes after file.delete.delay.ms, on the deleting thread.
    renaming = [lat for sent, lat in producer.samples if changed_at <= sent <= moved_at + 0.3]
    unlinking = [lat for sent, lat in producer.samples if moved_at + 0.3 < sent <= freed_at + 0.5]
    return {"before": _latency(before), "during": _latency(during),
            "renaming": _latency(renaming), "unlinking": _latency(unlinking),
            "deleted_gb": (before_bytes - node.log_bytes()) / 1e9,
            "renamed_s": moved_at - changed_at, "freed_s": freed_at - changed_at}


def _first_held(condition: Callable[[], bool], what: str) -> float:
    """The time `condition` first held, polled every 100 ms for up to a minute."""
    return wait_until(lambda: time.monotonic() if condition() else None, 60.0, what)


def _latency(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        raise BenchError("no steady produce answered in a window")
    return {"n": len(ordered), "p50_ms": statistics.median(ordered) * 1000,
            "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
            "max_ms": ordered[-1] * 1000}


# --------------------------------------------------------------------------- command line and report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=20.0, help="GB in the big broker's log")
    parser.add_argument("--small-mb", type=int, default=100, help="MB in the small broker's log")
    parser.add_argument("--segment-mb", type=int, default=128, help="log.segment.bytes of both brokers, in MiB")
    parser.add_argument("--window-mb", type=int, default=100, help="MB cycled over by the fetch loops")
    parser.add_argument("--client-mb", type=int, default=200, help="MB written by the client-library producer")
    parser.add_argument("--tail-mb", type=int, default=32, help="MB produced just before kill -9")
    parser.add_argument("--retain-mb", type=int, default=256, help="retention.bytes set under load, in MiB")
    parser.add_argument("--steady-seconds", type=float, default=5.0, help="steady load before retention")
    parser.add_argument("--roll-ms", type=int, default=0,
                        help="segment.ms set with retention.bytes, so the topic rolls during the deletion (0: not set)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements of each broker (alternating)")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per raw figure")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--only", choices=["retention"], default=None,
                        help="retention: fill only the big log (--size-gb) and measure retention under load")
    parser.add_argument("--data-dir", default=None, help="where the brokers' data go (default: a temporary dir)")
    add_override_option(parser, "a server config for both brokers (repeatable)")
    return parser


def main() -> None:
    exit_on_sigterm()
    args = build_parser().parse_args()
    if args.data_dir:
        os.makedirs(args.data_dir, exist_ok=True)
    with nodes(args) as (small, big):
        if args.only == "retention":
            note(f"filling big with {args.size_gb:.2f} GB")
            produce_bytes(big, int(args.size_gb * 1e9))
            note("retention under a steady produce load (big broker)")
            report_deletion(retention_under_load(big, args))
            return
        for node, size in ((small, args.small_mb * MB), (big, args.size_gb * 1e9)):
            note(f"filling {node.label} with {size / 1e9:.2f} GB")
            started = time.monotonic()
            produce_bytes(node, int(size))
            note(f"  {node.log_bytes() / (time.monotonic() - started) / MB:.0f} MB/s")
        filled = {node.label: node.log_bytes() for node in (small, big)}
        figures = throughput(small, big, args)
        restarts: dict[str, dict[str, Restart]] = {"small": {}, "big": {}}
        for node in (small, big):
            for kind in ("clean", "unclean"):
                note(f"{kind} restart of {node.label}")
                restarts[node.label][kind] = restart(node, kind == "unclean", args.tail_mb)
        sizes = {node.label: node.log_bytes() for node in (small, big)}
        note("retention under a steady produce load (big broker)")
        deletion = retention_under_load(big, args)
    report(args, figures, restarts, (filled, sizes), deletion)


def report(args: argparse.Namespace, figures: dict[str, dict[str, list[float]]],
           restarts: dict[str, dict[str, Restart]], sizes: tuple[dict[str, int], dict[str, int]],
           deletion: dict[str, Any]) -> None:
    filled, final = sizes
    print(f"== scale in bytes: {filled['big'] / 1e9:.2f} GB against {filled['small'] / 1e9:.2f} GB in the log "
          f"({final['big'] / 1e9:.2f} and {final['small'] / 1e9:.2f} GB at the restarts), segments of "
          f"{args.segment_mb} MiB, {args.rounds} round(s), medians")
    print(f"{'':28} {'small':>10} {'big':>10} {'big/small':>10}")
    for name in figures["small"]:
        small, big = statistics.median(figures["small"][name]), statistics.median(figures["big"][name])
        print(f"{name:28} {small:10.1f} {big:10.1f} {big / small:10.2f}")
    for kind in ("clean", "unclean"):
        small_r, big_r = restarts["small"][kind], restarts["big"][kind]
        print(f"{'restart ' + kind + ' s':28} {small_r.seconds:10.2f} {big_r.seconds:10.2f} "
              f"{big_r.seconds / small_r.seconds:10.2f}")
        print(f"{'  of which logs loaded, ms':28} {small_r.load_ms:10.0f} {big_r.load_ms:10.0f} "
              f"{big_r.load_ms / max(small_r.load_ms, 1.0):10.2f}   ({small_r.partitions} and "
              f"{big_r.partitions} partition logs)")
        if kind == "unclean":
            print(f"{'  re-validated MB':28} {small_r.revalidated_bytes / MB:10.1f} "
                  f"{big_r.revalidated_bytes / MB:10.1f}")
    report_deletion(deletion)


def report_deletion(deletion: dict[str, Any]) -> None:
    before, during = deletion["before"], deletion["during"]
    print(f"== retention deleting {deletion['deleted_gb']:.2f} GB under a steady produce load "
          "(64 KiB batches every 10 ms, acks=1): log start moved after "
          f"{deletion['renamed_s']:.2f} s, the last file unlinked after {deletion['freed_s']:.2f} s")
    print(f"{'':28} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    rows = (("before", before), ("during deletion", during), ("  renames (event loop)", deletion["renaming"]),
            ("  unlinks (deleting thread)", deletion["unlinking"]))
    for label, lat in rows:
        print(f"{label:28} {lat['n']:6d} {lat['p50_ms']:8.2f} {lat['p99_ms']:8.2f} {lat['max_ms']:8.2f}")


if __name__ == "__main__":
    main()
