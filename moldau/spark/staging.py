"""The staging topic of the streaming sink: where tasks park a micro-batch's rows until the driver commits it.

Kafka transactions belong to one producer, but a micro-batch is written by many tasks in different Python
worker processes. So each task writes its rows, exactly as the sink would write them to their target, into
one partition of the staging topic with the idempotent producer, and reports the offsets it wrote there in
its commit message. The driver then copies every staged row of the batch to its target inside one
transaction (`moldau.spark.publish`).

A staged record has the row's key, value and headers, and the record timestamp the task's producer gave it.
One header is prepended: `moldau.sink` = `<tag> <partition or -> <target topic>`. The tag is unique to one
task attempt; the driver keeps only the records of a range that carry the tag of the attempt Spark
committed, so tasks sharing a staging partition (more tasks than partitions) or a retried attempt that
wrote part of its rows cannot leak into the batch. Topic names never contain spaces, so the split is exact.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.spark.commits import create_unless_exists
from moldau.spark.fetch import FetchSettings, read_range
from moldau.spark.offsets import OffsetRange

META_HEADER = "moldau.sink"
PARTITIONS = 8
# Staged rows are needed only until their batch commits (seconds); a day covers a query that is down for a
# while and replays its last batch, which stages the rows again anyway.
RETENTION_MS = 24 * 3600 * 1000
READ_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class StagedRange:
    """Where one task attempt staged its rows: offsets [first, end) of one staging partition, tagged `tag`."""

    topic: str
    partition: int
    first: int
    end: int
    tag: str
    records: int


def ensure_topic(bootstrap: str, conf: Mapping[str, str], topic: str, timeout_s: float = 30.0) -> int:
    """Create the staging topic unless it exists; its number of partitions."""
    admin = AdminClient({**conf, "bootstrap.servers": bootstrap})
    config = {"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS)}
    create_unless_exists(admin, NewTopic(topic, num_partitions=PARTITIONS, replication_factor=-1, config=config),
                         timeout_s)
    metadata = admin.list_topics(timeout=timeout_s)
    return max(1, len(metadata.topics[topic].partitions))


def new_tag() -> str:
    """A tag no other task attempt, of this application or any other, will use."""
    return uuid.uuid4().hex


def staged_row(row: Mapping[str, Any], topic: str, partition: int, tag: str) -> dict[str, Any]:
    """The producer arguments that stage `row` (the arguments the sink would write to its target)."""
    target = row.get("partition")
    meta = f"{tag} {'-' if target is None else target} {row['topic']}".encode()
    return {"topic": topic, "partition": partition, "key": row["key"], "value": row["value"],
            "headers": [(META_HEADER, meta), *row.get("headers", ())]}


class Acknowledged:
    """The delivery callback of a staging producer: the lowest and highest offset acknowledged."""

    def __init__(self) -> None:
        self.low: int | None = None
        self.high: int | None = None

    def saw(self, offset: int) -> None:
        self.low = offset if self.low is None else min(self.low, offset)
        self.high = offset if self.high is None else max(self.high, offset)


def read_staged(bootstrap: str, conf: Mapping[str, str], staged: StagedRange) -> Iterator[dict[str, Any]]:
    """The target producer arguments of every row `staged` describes, in the order the task wrote them.

    Staged rows that are gone (retention, a deleted staging topic) fail the read: the batch cannot be
    committed whole, so it must not be committed at all.
    """
    settings = FetchSettings(bootstrap=bootstrap, client_conf=dict(conf), isolation_level="read_uncommitted",
                             include_headers=True, fail_on_data_loss=True, poll_timeout_ms=READ_TIMEOUT_MS)
    found = 0
    for batch in read_range(settings, OffsetRange(staged.topic, staged.partition, staged.first, staged.end)):
        for row in _target_rows(batch, staged.tag):
            found += 1
            yield row
    if found != staged.records:
        raise RuntimeError(f"staged rows of {staged.topic}-{staged.partition} [{staged.first}, {staged.end}) "
                           f"tagged {staged.tag}: found {found}, the task wrote {staged.records}")


def _target_rows(batch: pa.RecordBatch, tag: str) -> Iterable[dict[str, Any]]:
    """The batch's rows staged under `tag`, as producer arguments for their target."""
    columns = ("key", "value", "headers")
    keys, values, headers = (batch.column(name).to_pylist() for name in columns)
    # Microseconds since the epoch (Spark's timestamp unit); the producer takes milliseconds.
    times = batch.column("timestamp").cast(pa.int64()).to_pylist()
    for key, value, row_headers, micros in zip(keys, values, headers, times, strict=True):
        if not row_headers or row_headers[0]["key"] != META_HEADER:
            continue  # not a staged row of this sink
        row_tag, partition, topic = row_headers[0]["value"].decode().split(" ", 2)
        if row_tag != tag:
            continue
        row: dict[str, Any] = {"topic": topic, "key": key, "value": value}
        if partition != "-":
            row["partition"] = int(partition)
        if micros is not None:
            row["timestamp"] = micros // 1000
        if len(row_headers) > 1:
            row["headers"] = [(h["key"], h["value"]) for h in row_headers[1:]]
        yield row
