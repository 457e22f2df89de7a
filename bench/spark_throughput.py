"""Spark throughput and latency through the `moldau` source and sink, beside Spark's own `rate` source.

In one run, with one local Spark session and one fresh Moldau broker:

* moldau → groupBy → moldau: N records of 100 bytes with 1000 distinct keys, pre-loaded into a 2-partition
  topic, read by an availableNow query in micro-batches of --batch offsets, counted per key, and the counts
  written to a Moldau topic (complete mode: every batch writes all 1000 counts);
* rate → groupBy → moldau: the same query (same key count, value size, batch size and sink) over Spark's
  built-in `rate-micro-batch` source, which generates rows inside the JVM: the ceiling a source could
  reach on this machine;
* latency: a passthrough query (moldau → moldau, default trigger) while a producer sends 20 records/s;
  the time from each send to its arrival in the output topic.

Rows/s counts the micro-batches after the first (which pays for planning and JIT warm-up); batch times
are Spark's triggerExecution durations. Run from the repository root:
    python -m bench.spark_throughput [--records 1000000] [--batch 200000] [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from bench.common import create_topic, running_broker, scratch_dir, unique_topic

KEYS = 1000
VALUE = b"x" * 100


def main() -> None:
    args = parse_args()
    records = 200_000 if args.quick else args.records
    batch = min(args.batch, records // 4)
    with (running_broker("moldau", "moldau") as broker, spark_session() as spark,
          scratch_dir("spark") as checkpoints):
        source = unique_topic("spark-in")
        create_topic(broker.bootstrap, source, 2)
        produce(broker.bootstrap, source, records)
        moldau = measure(moldau_counts(spark, broker.bootstrap, source, batch), broker.bootstrap, records,
                         checkpoints / "moldau")
        rate = measure(rate_counts(spark, batch), broker.bootstrap, records, checkpoints / "rate")
        latency = end_to_end_latency(spark, broker.bootstrap, 10 if args.quick else 20, checkpoints / "latency")
    print(f"\nSpark {spark_version()}, {records:,} records of {len(VALUE)} B, {KEYS} keys, "
          f"batches of {batch:,}, local[2]")
    print(f"{'source':8} {'rows/s':>10} {'batches':>8} {'batch p50 ms':>13} {'batch max ms':>13}")
    for name, result in (("moldau", moldau), ("rate", rate)):
        print(f"{name:8} {result['rows_per_s']:>10,.0f} {result['batches']:>8} {result['p50_ms']:>13,.0f} "
              f"{result['max_ms']:>13,.0f}")
    print(f"end-to-end latency moldau → Spark → moldau at 20 records/s: p50 {latency['p50_ms']:.0f} ms, "
          f"p99 {latency['p99_ms']:.0f} ms, max {latency['max_ms']:.0f} ms ({latency['count']} records)")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000, help="records to push through (default 1M)")
    parser.add_argument("--batch", type=int, default=200_000, help="offsets per micro-batch (default 200k)")
    parser.add_argument("--quick", action="store_true", help="200k records and a 10 s latency run")
    return parser.parse_args()


@contextmanager
def spark_session() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    from moldau.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("moldau-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    try:
        yield spark
    finally:
        spark.stop()


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000,
                         "queue.buffering.max.messages": 1_000_000})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i % KEYS).encode(), value=VALUE)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise RuntimeError("records not acknowledged")


def moldau_counts(spark: Any, bootstrap: str, topic: str, batch: int) -> Any:
    """The counting query's input from a Moldau topic."""
    return (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(batch)).load().select("key", "value"))


def rate_counts(spark: Any, batch: int) -> Any:
    """The same shape of input from Spark's own generator: key one of KEYS strings, a 100-byte value."""
    from pyspark.sql import functions as F

    return (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", str(batch)).load()
            .select((F.col("value") % KEYS).cast("string").cast("binary").alias("key"),
                    F.lit(VALUE).alias("value")))


def measure(rows: Any, bootstrap: str, records: int, checkpoint: Path) -> dict[str, Any]:
    """Run rows → count per key → a fresh Moldau topic until `records` rows went through; the figures."""
    out = unique_topic("spark-counts")
    create_topic(bootstrap, out, 2)
    counts = rows.groupBy("key").count().selectExpr("key", "cast(count as string) as value")
    query = (counts.writeStream.format("moldau").outputMode("complete").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", out).option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="0 seconds").start())
    try:
        while sum(p["numInputRows"] for p in query.recentProgress) < records:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.2)
    finally:
        query.stop()
    batches = [p for p in query.recentProgress if p["numInputRows"]][1:]
    seconds = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
    durations = [p["durationMs"]["triggerExecution"] for p in batches]
    return {"rows_per_s": sum(p["numInputRows"] for p in batches) / seconds, "batches": len(batches),
            "p50_ms": statistics.median(durations), "max_ms": max(durations)}


def end_to_end_latency(spark: Any, bootstrap: str, seconds: float, checkpoint: Path) -> dict[str, Any]:
    """Send 20 records/s with their send time; measure until each arrives in the query's output topic."""
    source, out = unique_topic("spark-lat-in"), unique_topic("spark-lat-out")
    create_topic(bootstrap, source, 1)
    create_topic(bootstrap, out, 1)
    query = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).load().select("key", "value")
             .writeStream.format("moldau").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
             .option("checkpointLocation", str(checkpoint)).start())
    latencies: list[float] = []
    stop = threading.Event()
    reader = threading.Thread(target=collect_latencies, args=(bootstrap, out, latencies, stop))
    reader.start()
    try:
        while not query.recentProgress:  # the first (empty) batch has planned the query
            time.sleep(0.1)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            producer.produce(source, value=str(time.time_ns()).encode())
            producer.poll(0)
            time.sleep(0.05)
        producer.flush(10)
        time.sleep(5)
    finally:
        stop.set()
        reader.join()
        query.stop()
    ordered = sorted(latencies)
    return {"count": len(ordered), "p50_ms": statistics.median(ordered),
            "p99_ms": ordered[int(0.99 * (len(ordered) - 1))], "max_ms": ordered[-1]}


def collect_latencies(bootstrap: str, topic: str, out: list[float], stop: threading.Event) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-unused", "enable.auto.commit": False})
    consumer.assign([CkTopicPartition(topic, 0, 0)])
    try:
        while not stop.is_set():
            for msg in consumer.consume(num_messages=1000, timeout=0.2):
                if msg.error() is None:
                    out.append((time.time_ns() - int(msg.value() or b"0")) / 1e6)
    finally:
        consumer.close()


if __name__ == "__main__":
    main()
