"""A streaming query in a process of its own, for tests that kill it (SIGKILL) and restart it.

    python -m tests.spark.sink_driver BOOTSTRAP SOURCE_TOPIC OUT_TOPIC CHECKPOINT ROWS_PER_BATCH

Reads SOURCE_TOPIC from the earliest offset (availableNow, ROWS_PER_BATCH offsets per micro-batch) and writes
each record's offset as `value` (key `k<offset>`) into OUT_TOPIC through the moldau sink, from three write
tasks per batch. Exits 0 when the query has processed what was there.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from moldau.spark import register


def main(bootstrap: str, source_topic: str, out_topic: str, checkpoint: str, rows_per_batch: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("moldau-sink-driver")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    df = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source_topic).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", rows_per_batch).load())
    # Three write tasks per batch, so each batch is staged by several tasks and published across partitions.
    rows = df.selectExpr("concat('k', cast(offset as string)) as key", "cast(offset as string) as value")
    query = (rows.repartition(3).writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out_topic).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
