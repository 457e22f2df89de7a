"""A `moldau connect standalone` or `moldau connect distributed` worker in its own process, for tests: its worker
properties, its REST API on a free port, start/stop/kill, and a small JSON client of that API."""

from __future__ import annotations

import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from moldau.net.ports import free_port
from tests.support.broker_process import signal_and_wait
from tests.support.messages import partition_of

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


class WorkerProcess:
    def __init__(self, directory: Path, bootstrap: str, overrides: dict[str, str] | None = None,
                 connector_files: list[Path] | None = None, mode: str = "standalone", scheme: str = "http",
                 client_tls: ssl.SSLContext | None = None) -> None:
        """`mode`: standalone, or distributed (then `overrides` gives group.id and the storage topics).
        `scheme`: the REST listener's (https needs the TLS configs in `overrides`); `client_tls`: the context
        `request` calls an https worker with."""
        self.directory = directory
        self.mode = mode
        self.scheme = scheme
        self.client_tls = client_tls
        directory.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.properties = {
            "bootstrap.servers": bootstrap,
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "offset.storage.file.filename": str(directory / "connect.offsets"),
            "offset.flush.interval.ms": "500",
            "listeners": f"{scheme}://127.0.0.1:{self.port}",
            **(overrides or {}),
        }
        if mode == "distributed":
            del self.properties["offset.storage.file.filename"]
        self.connector_files = list(connector_files or [])
        self.config_path = directory / "worker.properties"
        self.log_path = directory / "worker.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        args = [sys.executable, "-m", "moldau", "connect", self.mode, str(self.config_path),
                *map(str, self.connector_files)]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process owns it
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                self.request("GET", "/connectors")
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"worker did not answer within {timeout_s}s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 30.0) -> int:
        return self._signal(signal.SIGTERM, timeout_s)

    def kill(self) -> None:
        self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: int, timeout_s: float) -> int:
        if self.proc is None:
            return 0
        try:
            return signal_and_wait(self.proc, sig, timeout_s, "connect worker")
        finally:
            self.proc = None

    def cleanup(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def log_tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(HTTP status, decoded JSON body or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30, context=self.client_tls) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw.strip() else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw.strip() else None


@contextmanager
def running_worker(directory: Path, bootstrap: str, overrides: dict[str, str] | None = None) -> Iterator[WorkerProcess]:
    """A started standalone worker; afterwards it must stop cleanly (exit 0, else its log is shown), and any
    process left is killed."""
    proc = WorkerProcess(directory, bootstrap, overrides)
    proc.start()
    try:
        yield proc
        assert proc.stop() == 0, proc.log_tail()
    finally:
        proc.cleanup()


def wait_for(condition: Callable[[], Any], timeout_s: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def read_lines(path: Path) -> list[str]:
    """The complete lines of a file (none if it does not exist yet)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


def read_topic(bootstrap: str, topic: str, partitions: int = 1) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of `topic`, read to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records: list[tuple[bytes | None, bytes | None]] = []
        positions = dict.fromkeys(ends, 0)
        deadline = time.monotonic() + 30
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            records.append((message.key(), message.value()))
            positions[partition_of(message)] = (message.offset() or 0) + 1
        return records
    finally:
        consumer.close()


def until_settled(worker: WorkerProcess, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The answer once the group has a leader (before that, Kafka's 409 'rebalance' answer)."""
    answer: tuple[int, Any] = (0, None)

    def done() -> bool:
        nonlocal answer
        answer = worker.request(method, path, body)
        return answer[0] != 409 or "rebalance" not in str(answer[1])
    wait_for(done, 60, f"{method} {path} outside a rebalance")
    return answer


def group_leader(workers: list[WorkerProcess]) -> WorkerProcess:
    """The distributed worker the latest generation in a worker's log names leader (member ids are
    `connect-<worker id>-<uuid>`)."""
    def found() -> WorkerProcess | None:
        for worker in workers:
            lines = [line for line in worker.log_path.read_text(errors="replace").splitlines()
                     if "joined generation" in line]
            if lines:
                leader = lines[-1].split("(leader ")[1].split(",")[0]
                return next((w for w in workers if leader.startswith(f"connect-127.0.0.1:{w.port}-")), None)
        return None
    return wait_for(found, 60, "a leader")  # type: ignore[no-any-return]
