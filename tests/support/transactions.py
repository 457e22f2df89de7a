"""Helpers for transaction tests: what each isolation level reads, stable offsets, and client subprocesses."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from tests.support.broker_process import signal_and_wait
from tests.support.clients import Rec, partition_count

REPO_ROOT = Path(__file__).resolve().parents[2]  # where `python -m tests.support...` finds the module
READ_COMMITTED = "read_committed"
READ_UNCOMMITTED = "read_uncommitted"


def txn_producer(bootstrap: str, transactional_id: str, **conf: Any) -> Producer:
    """A confluent-kafka transactional producer, transactions initialised."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                         **conf})
    producer.init_transactions(30)
    return producer


def latest_offsets(bootstrap: str, topic: str, partitions: int, isolation: IsolationLevel) -> dict[int, int]:
    """ListOffsets latest per partition: the high watermark, or with READ_COMMITTED the last stable offset."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    futures = admin.list_offsets({TopicPartition(topic, p): latest for p in range(partitions)},
                                 isolation_level=isolation, request_timeout=10)
    return {tp.partition: future.result(timeout=15).offset for tp, future in futures.items()}


def read_to_end(bootstrap: str, topic: str, isolation: str, ends: dict[int, int] | None = None,
                timeout_s: float = 30.0) -> list[Rec]:
    """Every record `isolation` lets a consumer read, from the beginning until each partition's end.

    The end is where the fetch stops (the high watermark, or the last stable offset for read_committed) and must
    be at least `ends[p]` when given: a read_committed reader blocked before it fails here.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": isolation})
    try:
        parts = range(partition_count(consumer, topic))
        consumer.assign([TopicPartition(topic, p, -2) for p in parts])
        wanted = ends or {}
        reached: dict[int, int] = {}
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while not all(p in reached and reached[p] >= wanted.get(p, 0) for p in parts):
            if time.monotonic() > deadline:
                raise AssertionError(f"{isolation} read of {topic} stopped at {reached}, wanted {wanted}")
            for msg in consumer.consume(num_messages=10_000, timeout=0.2):
                error, partition, offset = msg.error(), msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, f"consume error: {error}"
                    reached[partition] = offset
                    continue
                reached.pop(partition, None)
                out.append(Rec(partition, offset, msg.key(), msg.value(), msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def committed_records(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30.0) -> list[Rec]:
    """What a read_committed consumer reads of `topic` up to the last stable offsets of the moment of the call
    (the topic may go on growing meanwhile); none while the topic does not exist yet."""
    try:
        ends = latest_offsets(bootstrap, topic, partitions, IsolationLevel.READ_COMMITTED)
    except KafkaException:
        return []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "enable.partition.eof": True, "isolation.level": READ_COMMITTED})
    try:
        consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        reached = {p: 0 for p in range(partitions)}
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while any(reached[p] < ends[p] for p in reached):
            if time.monotonic() > deadline:
                raise AssertionError(f"read_committed read of {topic} stopped at {reached}, wanted {ends}")
            for msg in consumer.consume(num_messages=10_000, timeout=0.2):
                error, partition, offset = msg.error(), msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, f"consume error: {error}"
                    reached[partition] = max(reached[partition], offset)
                    continue
                reached[partition] = max(reached[partition], offset + 1)
                if offset < ends[partition]:
                    out.append(Rec(partition, offset, msg.key(), msg.value(), msg.timestamp()[1]))
        return out
    finally:
        consumer.close()


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets, as a read_committed consumer fetches them (waiting for stable offsets)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in committed}


def values(records: list[Rec]) -> list[bytes]:
    return sorted(r.value for r in records if r.value is not None)


class ScriptProcess:
    """A Python module run as a client process; its stdout lines are collected for `wait_for_line`."""

    def __init__(self, module: str, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                                         stderr=log, stdin=subprocess.DEVNULL, cwd=REPO_ROOT)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").rstrip("\n"))

    def wait_for_line(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no line {prefix!r} within {timeout_s}s; saw {self.seen[-5:]}, "
                                     f"exit code {self.proc.poll()}, stderr:\n{self.stderr_tail()}")
            try:
                line = self.lines.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                continue
            self.seen.append(line)
            if line.startswith(prefix):
                return line

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout_s}s; saw {self.seen[-5:]}, "
                                 f"stderr:\n{self.stderr_tail()}") from None

    def kill(self) -> None:
        signal_and_wait(self.proc, signal.SIGKILL, 10.0, "client process")

    def stderr_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no stderr)"

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
