"""Helpers for tests of replicated topics on real clusters: short failover timings, a background idempotent
writer that remembers every acknowledgement, a full read of a topic, and the no-loss check between the two."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.support.messages import offset_of, partition_of, value_of

# Failures noticed in about a second: brokers heartbeat every 300 ms and are fenced after 2.5 s of silence; a
# follower leaves the ISR after 2 s without catching up.
FAST_FAILOVER = {
    "controller.quorum.election.timeout.ms": "300",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "2500",
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
}


class Writer:
    """An idempotent acks=all producer writing unique values from a thread, remembering each acknowledgement.

    Values go round-robin over `partitions` when given, else by key hash. Use as a context manager: leaving it
    stops sending and waits for every outstanding record.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int | None = None) -> None:
        self.acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset)
        self.failed: dict[str, str] = {}
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "message.timeout.ms": 60_000, "retry.backoff.ms": 50})
        self._topic = topic
        self._partitions = partitions
        self._stop = threading.Event()
        # A fatal producer error (librdkafka raises it from poll) ends the writer's thread; kept to be reported.
        self.fatal: Exception | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            self._send_until_stopped()
        except KafkaException as exc:
            self.fatal = exc

    def _send_until_stopped(self) -> None:
        sent = 0
        while not self._stop.is_set():
            value = f"v{sent}"
            sent += 1
            if self._partitions is None:
                self._producer.produce(self._topic, key=value.encode(), value=value.encode(),
                                       on_delivery=self._delivered)
            else:
                self._producer.produce(self._topic, value=value.encode(), partition=sent % self._partitions,
                                       on_delivery=self._delivered)
            self._producer.poll(0.002)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            self.failed[msg.value().decode()] = str(err)

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join()
            self._producer.flush(90)

    def wait_for_acks(self, count: int, timeout_s: float = 30, report: Callable[[], str] | None = None) -> None:
        """Wait until `count` values are acknowledged; fails at once if the producer hit a fatal error, with
        `report()` (say, the cluster's log tails) in the message."""
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            if self.fatal is not None or time.monotonic() >= deadline:
                fatal = f"; the producer stopped: {self.fatal}" if self.fatal is not None else ""
                details = f"\n{report()}" if report is not None else ""
                raise AssertionError(f"only {len(self.acked)} of {count} acknowledged; failed: "
                                     f"{list(self.failed.items())[:3]}{fatal}{details}")
            time.sleep(0.05)


def read_all(bootstrap: str, topic: str, partitions: int, timeout_s: float = 30) -> dict[tuple[int, int], str]:
    """(partition, offset) -> value of every committed record, read from offset 0 of each partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records: dict[tuple[int, int], str] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error = msg.error()
            if error:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition_of(msg))
                continue
            records[(partition_of(msg), offset_of(msg))] = value_of(msg).decode()
            at_end.discard(partition_of(msg))
    finally:
        consumer.close()
    assert len(at_end) == partitions, f"did not reach the end of every partition in {timeout_s} s"
    return records


def assert_no_loss(acked: dict[str, tuple[int, int]], records: dict[tuple[int, int], str]) -> None:
    """Every acknowledged value is stored at its acknowledged offset, and no value is stored twice."""
    lost = {v: where for v, where in acked.items() if records.get(where) != v}
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {list(lost.items())[:5]}"
    seen: dict[str, tuple[int, int]] = {}
    for where, value in records.items():
        assert value not in seen, f"{value} stored twice: at {seen[value]} and {where}"
        seen[value] = where
