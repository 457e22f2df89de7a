"""`MoldauDataSource`: the `moldau` format for `spark.read`, `spark.readStream`, `df.write` and
`df.writeStream`, with the options and schema of Spark's Kafka source and sink."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from moldau.spark import commits, staging
from moldau.spark.cluster import resolve
from moldau.spark.options import (
    OptionError,
    SourceOptions,
    check_batch,
    check_streaming,
    parse_sink_options,
    parse_source_options,
)
from moldau.spark.reader import MoldauBatchReader, MoldauStreamReader, open_cluster
from moldau.spark.schema import source_schema
from moldau.spark.writer import MoldauBatchWriter, MoldauStreamWriter, check_layout

NAME = "moldau"


class MoldauDataSource(DataSource):
    """Reads and writes Moldau topics. Register it once per session: `spark.dataSource.register(...)`."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        """The Kafka source schema; called by `load()`, so bad options and unknown topics fail there."""
        options = parse_source_options(self.options)
        check_with_broker(options)
        return source_schema(options.include_headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source_options(self.options)
        check_batch(options)
        return MoldauBatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source_options(self.options)
        check_streaming(options)
        return MoldauStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("the moldau sink only appends: use mode('append')")
        options = parse_sink_options(self.options)
        return MoldauBatchWriter(options, check_layout(schema, options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink_options(self.options)
        layout = check_layout(schema, options)
        commits.ensure_topic(options.bootstrap, options.client_conf, options.commits_topic)
        staging_partitions = staging.ensure_topic(options.bootstrap, options.client_conf, options.staging_topic)
        return MoldauStreamWriter(options, layout, staging_partitions)


def check_with_broker(options: SourceOptions) -> None:
    """Fail now, not in the middle of a query: the client options, the subscription's topics and the
    partitions named by the offset options must all be acceptable to the broker."""
    cluster = open_cluster(options)
    try:
        tps = cluster.partitions(options.subscription, allow_empty=options.subscription.kind == "subscribePattern")
        resolve(cluster, options.starting, tps, "earliest", options.starting_timestamp_strategy)
        resolve(cluster, options.ending, tps, "latest", "latest")
    finally:
        cluster.close()
