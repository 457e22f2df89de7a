"""Log aggregation: per-service error rates over one-minute event-time windows, into a topic and PostgreSQL.

Input `logs`: `{"service": "checkout", "level": "ERROR"|"WARN"|"INFO", "ts": <ms>}` keyed by service. Per
window and service the query counts lines and errors and emits, once the two-minute watermark passes the
window, `{"window_start", "service", "total", "errors", "error_rate"}` into `service-error-rates` and
the same row into a PostgreSQL table through Spark's JDBC writer (when a database is given).

Each micro-batch goes to both places in `foreachBatch`: to the topic with the moldau batch writer, and to
PostgreSQL after deleting the rows of the same batch id, so a replayed batch replaces its rows there.
"""

from __future__ import annotations

import random
import re
import subprocess
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from moldau.spark.pipelines.common import (
    FLUSH_AFTER_MS,
    Event,
    Pipeline,
    RunSettings,
    create_topics,
    jittered_times,
    json_stream,
    produce_json,
    read_json,
    window_start,
)

WINDOW_MS = 60_000
WATERMARK = "2 minutes"
FLUSH = "~flush"
# service → probability that a line is an error: one healthy service, one flaky, one failing.
SERVICES = {"frontend": 0.01, "search": 0.03, "checkout": 0.12, "payments": 0.30, "inventory": 0.0}
POSTGRES_OPTION = "postgres"
# Where Debian's libpostgresql-jdbc-java puts the driver; Spark loads it when the session starts.
JDBC_DRIVER_JAR = "/usr/share/java/postgresql.jar"


class LogsPipeline(Pipeline):
    name = "logs"
    description = "per-service error rates over 1-minute windows into a topic and PostgreSQL (JDBC)"

    def create_topics(self, settings: RunSettings) -> None:
        create_topics(settings.bootstrap, {settings.topic("logs"): 2, settings.topic("service-error-rates"): 1})

    def generate(self, settings: RunSettings) -> dict[str, list[Event]]:
        rng = random.Random(settings.seed)
        services = list(SERVICES)
        lines: list[Event] = []
        for ts in jittered_times(rng, settings.events, step_ms=200, jitter_ms=15_000):
            service = rng.choice(services)
            failed = rng.random() < SERVICES[service]
            level = "ERROR" if failed else rng.choice(["INFO", "INFO", "INFO", "WARN"])
            lines.append({"service": service, "level": level, "ts": ts})
        lines.append({"service": FLUSH, "level": "INFO", "ts": max(int(e["ts"]) for e in lines) + FLUSH_AFTER_MS})
        produce_json(settings.bootstrap, settings.topic("logs"), lines, key_field="service")
        return {"logs": lines}

    def start(self, spark: SparkSession, settings: RunSettings) -> StreamingQuery:
        schema = "service string, level string, ts long"
        rates = (json_stream(spark, settings, [settings.topic("logs")])
                 .select(F.from_json(F.col("value").cast("string"), schema).alias("l")).select("l.*")
                 .withColumn("event_time", F.timestamp_millis("ts"))
                 .withWatermark("event_time", WATERMARK)
                 .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), "service")
                 .agg(F.count(F.lit(1)).alias("total"),
                      F.sum(F.when(F.col("level") == "ERROR", 1).otherwise(0)).cast("long").alias("errors"))
                 .select(F.col("window.start").alias("window_start"), "service", "total", "errors",
                         (F.col("errors") / F.col("total")).alias("error_rate")))
        database = Database.from_settings(settings)
        if database is not None:
            database.create_table(spark)
        writer = BatchWriter(settings, database)
        return (rates.writeStream.outputMode("append").foreachBatch(writer.write)
                .option("checkpointLocation", str(settings.checkpoint)).trigger(availableNow=True).start())

    def expected(self, events: Mapping[str, list[Event]], settings: RunSettings) -> set[Any]:
        totals: Counter[tuple[int, str]] = Counter()
        errors: Counter[tuple[int, str]] = Counter()
        for line in events["logs"]:
            if line["service"] == FLUSH:
                continue
            key = (window_start(line["ts"], WINDOW_MS), line["service"])
            totals[key] += 1
            errors[key] += line["level"] == "ERROR"
        rates = {(start, service, n, errors[(start, service)], round(errors[(start, service)] / n, 9))
                 for (start, service), n in totals.items()}
        places = ["topic"] + (["postgres"] if Database.from_settings(settings) else [])
        return {(place, *rate) for place in places for rate in rates}

    def actual(self, settings: RunSettings) -> list[Any]:
        """The rows in the output topic and, if configured, in the PostgreSQL table, tagged with their place."""
        rows = read_json(settings.bootstrap, settings.topic("service-error-rates"))
        out: list[Any] = [("topic", r["window_start"], r["service"], r["total"], r["errors"],
                           round(r["error_rate"], 9)) for r in rows]
        database = Database.from_settings(settings)
        if database is not None:
            out.extend(("postgres", *row) for row in database.rows())
        return out


class BatchWriter:
    """The foreachBatch function: each micro-batch to the topic and, if configured, to PostgreSQL."""

    def __init__(self, settings: RunSettings, database: Database | None) -> None:
        self._settings = settings
        self._database = database

    def write(self, batch: DataFrame, batch_id: int) -> None:
        batch = batch.cache()
        try:
            as_json = batch.select(F.col("service").alias("key"), F.to_json(F.struct(
                F.unix_millis("window_start").alias("window_start"), "service", "total", "errors",
                "error_rate")).alias("value"))
            (as_json.write.format("moldau").option("kafka.bootstrap.servers", self._settings.bootstrap)
             .option("topic", self._settings.topic("service-error-rates")).mode("append").save())
            if self._database is not None:
                self._database.replace_batch(batch, batch_id)
        finally:
            batch.unpersist()


class Database:
    """A PostgreSQL table written through Spark's JDBC writer, read back with psql for checking."""

    def __init__(self, url: str, table: str) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("postgres", "postgresql") or not parts.hostname:
            raise RuntimeError(f"expected postgresql://user[:password]@host:port/database, got {url!r}")
        self.url = url
        self.table = table
        self.jdbc_url = f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path or '/postgres'}"
        self.properties = {"user": parts.username or "postgres", "password": parts.password or "",
                           "driver": "org.postgresql.Driver"}

    @classmethod
    def from_settings(cls, settings: RunSettings) -> Database | None:
        url = settings.extra.get(POSTGRES_OPTION)
        if not url:
            return None
        return cls(url, "service_error_rates_" + re.sub(r"[^a-z0-9]+", "_", settings.prefix.lower()).strip("_"))

    def create_table(self, spark: SparkSession) -> None:
        self.execute(spark, f"CREATE TABLE IF NOT EXISTS {self.table} (batch_id bigint NOT NULL, "
                            "window_start timestamptz NOT NULL, service text NOT NULL, total bigint NOT NULL, "
                            "errors bigint NOT NULL, error_rate double precision NOT NULL, "
                            "PRIMARY KEY (window_start, service))")

    def replace_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Delete what an earlier attempt of this batch wrote, then append the batch with the JDBC writer."""
        self.execute(batch.sparkSession, f"DELETE FROM {self.table} WHERE batch_id = {int(batch_id)}")
        batch.withColumn("batch_id", F.lit(batch_id).cast("long")).write.jdbc(
            self.jdbc_url, self.table, mode="append", properties=self.properties)

    def execute(self, spark: SparkSession, sql: str) -> None:
        """Run one statement through the JDBC driver Spark loaded (no Python database client needed)."""
        jvm: Any = spark.sparkContext._jvm
        props = jvm.java.util.Properties()
        for key in ("user", "password"):
            props.setProperty(key, self.properties[key])
        # The driver is on Spark's class loader, which DriverManager does not search: use it directly.
        connection = jvm.org.postgresql.Driver().connect(self.jdbc_url, props)
        try:
            connection.createStatement().executeUpdate(sql)
        finally:
            connection.close()

    def rows(self) -> list[tuple[int, str, int, int, float]]:
        """The table's rows as (window start ms, service, total, errors, error rate), read with psql."""
        query = (f"SELECT (extract(epoch FROM window_start) * 1000)::bigint, service, total, errors, error_rate "
                 f"FROM {self.table}")
        out = subprocess.run(["psql", self.url, "-At", "-F", "\t", "-c", query], check=True, capture_output=True,
                             text=True, timeout=60).stdout
        rows = []
        for line in out.splitlines():
            start, service, total, errors, rate = line.split("\t")
            rows.append((int(start), service, int(total), int(errors), round(float(rate), 9)))
        return rows
