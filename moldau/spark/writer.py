"""The writers of the `moldau` sink: batch and micro-batch, both fed Arrow record batches by Spark.

Columns as in Spark's Kafka sink: `value` (required, binary or string), `key` (binary or string), `topic`
(string; the `topic` option overrides it), `partition` (int; null or absent lets the partitioner choose,
murmur2 like the Java client, so keys land where Kafka's own clients put them) and `headers`
(array<struct<key string, value binary>>). Records go through the idempotent producer, and a task returns
only once every record it sent is acknowledged.

The batch writer writes each row to its target (at-least-once). The stream writer's tasks write their rows
to the staging topic instead (`moldau.spark.staging`), and the driver copies each micro-batch to its
targets in one transaction, together with its commit record (`moldau.spark.publish`): exactly-once.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from moldau.spark import commits, publish, staging
from moldau.spark.options import OptionError, SinkOptions
from moldau.spark.produce import SinkError, producer_conf, reused_producer, send_all

log = logging.getLogger(__name__)

# Local properties Spark's micro-batch engine sets on every task of a streaming query.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass(frozen=True)
class Layout:
    """Which sink columns the written DataFrame has (checked against Spark's Kafka sink rules)."""

    has_key: bool
    has_topic: bool
    has_partition: bool
    has_headers: bool


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: its record count, and for a stream the query and batch ids it saw and where it
    staged its rows (None if it had none)."""

    records: int
    query_id: str | None = None
    batch_id: int | None = None
    skipped: bool = False
    staged: staging.StagedRange | None = None


def check_layout(schema: StructType, options: SinkOptions) -> Layout:
    """The layout of `schema`, or OptionError explaining what is wrong with it (other columns are ignored)."""
    types = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("the sink needs a 'value' column (binary or string)")
    _check_type(types, "value", (BinaryType, StringType))
    _check_type(types, "key", (BinaryType, StringType))
    _check_type(types, "topic", (StringType,))
    _check_type(types, "partition", (IntegerType,))
    headers = types.get("headers")
    if headers is not None and not _is_headers_type(headers):
        raise OptionError(f"column 'headers' must be array<struct<key:string,value:binary>>, "
                          f"not {headers.simpleString()}")
    if options.topic is None and "topic" not in types:
        raise OptionError("no topic to write to: give the 'topic' option or a 'topic' column")
    return Layout(has_key="key" in types, has_topic="topic" in types, has_partition="partition" in types,
                  has_headers=headers is not None)


def _check_type(types: dict[str, DataType], name: str, allowed: tuple[type[DataType], ...]) -> None:
    kind = types.get(name)
    if kind is not None and not isinstance(kind, allowed):
        wanted = " or ".join(t.typeName() for t in allowed)
        raise OptionError(f"column {name!r} must be {wanted}, not {kind.simpleString()}")


def _is_headers_type(kind: DataType) -> bool:
    if not isinstance(kind, ArrayType) or not isinstance(kind.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in kind.elementType.fields}
    return (set(fields) == {"key", "value"} and isinstance(fields["key"], StringType)
            and isinstance(fields["value"], BinaryType))


def produce_batches(options: SinkOptions, layout: Layout, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of `batches` to its target and wait for all acknowledgements; the number of records.

    Raises SinkError if any record failed or was not acknowledged in time.
    """
    with reused_producer(producer_conf(options)) as producer:
        return send_all(producer, target_rows(options, layout, batches))


def target_rows(options: SinkOptions, layout: Layout, batches: Iterator[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    """The producer arguments of every row of `batches`, as the sink writes them to their target."""
    for batch in batches:
        yield from _rows(batch, layout, options.topic)


def _rows(batch: pa.RecordBatch, layout: Layout, topic: str | None) -> Iterator[dict[str, Any]]:
    """The producer arguments of each row, from the batch's columns converted once."""
    n = batch.num_rows
    values = _bytes_column(batch, "value")
    keys = _bytes_column(batch, "key") if layout.has_key else [None] * n
    topics = [topic] * n if topic is not None else batch.column("topic").to_pylist()
    partitions = batch.column("partition").to_pylist() if layout.has_partition else [None] * n
    headers = batch.column("headers").to_pylist() if layout.has_headers else [None] * n
    for i in range(n):
        if topics[i] is None:
            raise SinkError("a row has a null topic and no 'topic' option was given")
        row: dict[str, Any] = {"topic": topics[i], "value": values[i], "key": keys[i]}
        if partitions[i] is not None:
            row["partition"] = partitions[i]
        row_headers = headers[i]
        if row_headers:
            row["headers"] = [(h["key"], h["value"]) for h in row_headers]
        yield row


def _bytes_column(batch: pa.RecordBatch, name: str) -> list[bytes | None]:
    # Casting string to binary reuses the UTF-8 buffers; the values come out as bytes either way.
    column = batch.column(name)
    if not pa.types.is_binary(column.type):
        column = column.cast(pa.binary())
    values: list[bytes | None] = column.to_pylist()
    return values


class MoldauBatchWriter(DataSourceArrowWriter):
    """`df.write.format("moldau")`: append-only, at-least-once (a failed job may have written some rows)."""

    def __init__(self, options: SinkOptions, layout: Layout) -> None:
        self._options = options
        self._layout = layout

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Write one partition of the DataFrame; returns once every record is acknowledged."""
        return SinkCommitMessage(produce_batches(self._options, self._layout, iterator))

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        """Records already acknowledged stay: there is nothing to roll back without transactions."""
        log.warning("moldau sink: write job aborted; records already acknowledged remain in the topic")


class MoldauStreamWriter(DataSourceStreamArrowWriter):
    """`writeStream.format("moldau")`: tasks stage a micro-batch, the driver publishes it in one transaction.

    A replayed micro-batch whose id is already committed for this query is skipped by every task, and by
    the driver, which checks again after fencing any earlier driver of the query.
    """

    def __init__(self, options: SinkOptions, layout: Layout, staging_partitions: int) -> None:
        self._options = options
        self._layout = layout
        self._staging_partitions = staging_partitions

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        """Stage one partition of a micro-batch, unless the batch was committed before (a replay)."""
        query_id, batch_id = current_batch()
        opts = self._options
        if query_id is None or batch_id is None:
            raise SinkError("the moldau stream writer runs only in a micro-batch streaming query")
        last = commits.last_committed(opts.bootstrap, opts.client_conf, opts.commits_topic, query_id)
        if last is not None and batch_id <= last:
            for _ in iterator:  # drained, so the engine sees the input consumed as usual
                pass
            return SinkCommitMessage(0, query_id, batch_id, skipped=True)
        staged = self._stage(iterator)
        return SinkCommitMessage(staged.records if staged else 0, query_id, batch_id, staged=staged)

    def _stage(self, iterator: Iterator[pa.RecordBatch]) -> staging.StagedRange | None:
        """Write the task's rows to its staging partition; where they are, or None if there were none."""
        opts = self._options
        context = TaskContext.get()
        # One staging partition per task partition id (modulo the count), so tasks rarely share one.
        partition = (context.partitionId() if context is not None else 0) % self._staging_partitions
        tag = staging.new_tag()
        rows = (staging.staged_row(row, opts.staging_topic, partition, tag)
                for row in target_rows(opts, self._layout, iterator))
        acked = staging.Acknowledged()
        with reused_producer(producer_conf(opts)) as producer:
            count = send_all(producer, rows, acked.saw)
        if acked.low is None or acked.high is None:
            return None
        return staging.StagedRange(opts.staging_topic, partition, acked.low, acked.high + 1, tag, count)

    def commit(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Publish the batch's staged rows in one transaction; runs on the driver after every task succeeded."""
        done = [m for m in messages if isinstance(m, SinkCommitMessage)]
        query_ids = {m.query_id for m in done if m.query_id is not None}
        if not query_ids:
            return  # no task ran, so nothing was staged and nothing can be replayed twice
        if any(m.skipped for m in done):
            log.info("moldau sink: batch %d was a replay of a committed batch; its records were not rewritten",
                     batchId)
            return
        staged = [m.staged for m in done if m.staged is not None]
        publish.publish_batch(self._options, query_ids.pop(), batchId, staged)

    def abort(self, messages: Sequence[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing reached the targets: staged rows are never read, and expire with the staging topic's
        retention; the batch's replay stages them again."""
        log.warning("moldau sink: batch %d aborted; nothing of it was published", batchId)


def current_batch() -> tuple[str | None, int | None]:
    """The streaming query id and micro-batch id of the running task, if it belongs to a streaming query."""
    context = TaskContext.get()
    if context is None:
        return None, None
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    return query_id, (int(batch_id) if batch_id is not None else None)


__all__ = ["MoldauBatchWriter", "MoldauStreamWriter", "SinkCommitMessage", "SinkError", "check_layout"]
