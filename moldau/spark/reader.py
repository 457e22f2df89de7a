"""The readers of the `moldau` source: a batch reader and a micro-batch stream reader.

Both plan one Spark task per topic-partition offset range (more with minPartitions) and read the records
in the task with `moldau.spark.fetch`. The stream reader's offsets are `{"topic": {"partition": offset}}`
dicts that Spark keeps in its checkpoint; nothing is committed to the broker.

Spark pickles readers to its tasks, so a reader opens its broker client lazily and drops it when pickled.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from moldau.spark.cluster import Cluster, resolve
from moldau.spark.fetch import DataLossError, FetchSettings, read_range, report_data_loss
from moldau.spark.offsets import (
    JsonOffsets,
    OffsetRange,
    Offsets,
    cap,
    describe,
    from_json,
    plan_ranges,
    rate_limit,
    to_json,
)
from moldau.spark.options import SourceOptions


class RangePartition(InputPartition):
    """One Spark task's input: an offset range of one topic-partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)
        self.range = rng


def fetch_settings(options: SourceOptions) -> FetchSettings:
    """The part of the options a task needs."""
    return FetchSettings(bootstrap=options.bootstrap, client_conf=dict(options.client_conf),
                         isolation_level=options.isolation_level, include_headers=options.include_headers,
                         fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms)


def open_cluster(options: SourceOptions) -> Cluster:
    """A driver-side client for the options' broker."""
    return Cluster(options.bootstrap, options.client_conf, options.isolation_level)


def read_partition(settings: FetchSettings, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """The records of a planned range; Spark may hand an empty placeholder partition when none was planned."""
    if isinstance(partition, RangePartition):
        yield from read_range(settings, partition.range)


class MoldauBatchReader(DataSourceReader):
    """Reads from startingOffsets (default earliest) to endingOffsets (default latest), resolved when the
    query is planned."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._settings = fetch_settings(options)

    def partitions(self) -> Sequence[InputPartition]:
        """The planned offset ranges; runs on the driver, once per query."""
        opts = self._options
        cluster = open_cluster(opts)
        tps = cluster.partitions(opts.subscription)
        start = resolve(cluster, opts.starting, tps, "earliest", opts.starting_timestamp_strategy)
        end = resolve(cluster, opts.ending, tps, "latest", "latest")
        start = clip_to_log_start(start, cluster.earliest(tps), self._settings)
        return [RangePartition(r) for r in plan_ranges(start, end, opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one range; runs in a task."""
        return read_partition(self._settings, partition)


def clip_to_log_start(start: Offsets, earliest: Offsets, settings: FetchSettings) -> Offsets:
    """Starts below the log start are data loss: an error, or moved up to the log start."""
    lost = [tp for tp, off in start.items() if off < earliest.get(tp, 0)]
    if lost:
        report_data_loss(settings, f"the requested start of {describe(lost)} was already deleted")
    return {tp: max(off, earliest.get(tp, 0)) for tp, off in start.items()}


class MoldauStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over the subscription; new partitions are read from their first offset."""

    def __init__(self, options: SourceOptions) -> None:
        self._options = options
        self._settings = fetch_settings(options)
        self._cluster: Cluster | None = None
        self._target: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        # A broker client cannot be pickled; tasks only need the settings.
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    def _client(self) -> Cluster:
        if self._cluster is None:
            self._cluster = open_cluster(self._options)
        return self._cluster

    def initialOffset(self) -> JsonOffsets:
        """Where a new query starts: startingOffsets (default latest) or the starting timestamps."""
        opts = self._options
        cluster = self._client()
        tps = cluster.partitions(opts.subscription, allow_empty=True)
        return to_json(resolve(cluster, opts.starting, tps, "latest", opts.starting_timestamp_strategy))

    def getDefaultReadLimit(self) -> ReadLimit:
        """maxOffsetsPerTrigger as a row limit (offsets stand for rows, as in Spark's Kafka source)."""
        limit = self._options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the offsets an availableNow query ends at: what the partitions hold now."""
        self._target = self._latest()

    def latestOffset(self, start: JsonOffsets, limit: ReadLimit) -> JsonOffsets:
        """The end of the next micro-batch: the latest offsets (or the availableNow target), rate-limited.

        Returns `start` unchanged when there is nothing new, which tells Spark to run no batch.
        """
        begin = from_json(start)
        latest = self._latest() if self._target is None else cap(self._latest(), self._target)
        if isinstance(limit, ReadMaxRows):
            growing = {tp: off for tp, off in latest.items() if off >= begin.get(tp, 0)}
            latest = {**latest, **rate_limit(begin, growing, limit.max_rows)}
        return to_json(latest)

    def _latest(self) -> Offsets:
        cluster = self._client()
        return cluster.latest(cluster.partitions(self._options.subscription, allow_empty=True, strict=False))

    def partitions(self, start: JsonOffsets, end: JsonOffsets) -> Sequence[InputPartition]:
        """One task per partition that moved forward between `start` and `end`.

        A partition that vanished or went backwards (deleted, recreated, truncated) is data loss.
        """
        begin, finish = from_json(start), from_json(end)
        gone = [tp for tp in begin if tp not in finish]
        backwards = [tp for tp, off in finish.items() if off < begin.get(tp, 0)]
        if gone or backwards:
            report_data_loss(self._settings, f"partitions deleted or truncated: {describe(gone + backwards)}")
        first = {tp: begin.get(tp, 0) for tp in finish}
        ranges = plan_ranges(first, finish, self._options.min_partitions)
        return [RangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one range; runs in a task."""
        return read_partition(self._settings, partition)

    def commit(self, end: Mapping[str, Mapping[str, int]]) -> None:
        """Nothing to do: the offsets are in Spark's checkpoint, never in the broker."""

    def stop(self) -> None:
        """Release the driver-side client."""
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


__all__ = ["DataLossError", "MoldauBatchReader", "MoldauStreamReader", "RangePartition"]
