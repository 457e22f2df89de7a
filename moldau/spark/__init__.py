"""Spark integration: the `moldau` data source and sink for PySpark (batch and Structured Streaming).

    from moldau.spark import register
    register(spark)
    df = spark.read.format("moldau").option("kafka.bootstrap.servers", "127.0.0.1:9092") \
        .option("subscribe", "clicks").load()

See docs/spark.md. Needs the `spark` extra (pyspark, pyarrow) and Java 17.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.spark.source import NAME, MoldauDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make `format("moldau")` available in `spark` (Python data sources are registered per session)."""
    spark.dataSource.register(MoldauDataSource)


__all__ = ["NAME", "MoldauDataSource", "register"]
