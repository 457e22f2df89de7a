"""Website activity tracking: page views counted per page and per user over one-minute event-time windows.

Input `page-views`: `{"user": "u3", "page": "/cart", "ts": <ms>}`, keyed by user, out of order by up to
20 s. The query keeps a two-minute watermark, so no view is late, and emits each window's counts once the
watermark passes its end, as `{"window_start": <ms>, "dimension": "page"|"user", "name": ..., "count": n}`
into `page-view-counts`. A last view far in the future (user and page "~flush") closes every real window.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from typing import Any

from pyspark.sql import SparkSession
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
    write_available_now,
)

WINDOW_MS = 60_000
WATERMARK = "2 minutes"
FLUSH = "~flush"
PAGES = ["/", "/search", "/product", "/cart", "/checkout", "/help"]
# Some pages are far more popular than others, as on real sites.
PAGE_WEIGHTS = [30, 20, 25, 12, 8, 5]
USERS = 40


class ActivityPipeline(Pipeline):
    name = "activity"
    description = "page views per page and per user over 1-minute event-time windows, with a watermark"

    def create_topics(self, settings: RunSettings) -> None:
        create_topics(settings.bootstrap, {settings.topic("page-views"): 2, settings.topic("page-view-counts"): 2})

    def generate(self, settings: RunSettings) -> dict[str, list[Event]]:
        rng = random.Random(settings.seed)
        times = jittered_times(rng, settings.events, step_ms=400, jitter_ms=20_000)
        views = [{"user": f"u{rng.randrange(USERS)}", "page": rng.choices(PAGES, PAGE_WEIGHTS)[0], "ts": ts}
                 for ts in times]
        views.append({"user": FLUSH, "page": FLUSH, "ts": max(times) + FLUSH_AFTER_MS})
        produce_json(settings.bootstrap, settings.topic("page-views"), views, key_field="user")
        return {"page-views": views}

    def start(self, spark: SparkSession, settings: RunSettings) -> StreamingQuery:
        schema = "user string, page string, ts long"
        views = (json_stream(spark, settings, [settings.topic("page-views")])
                 .select(F.from_json(F.col("value").cast("string"), schema).alias("v"))
                 .select("v.*")
                 .withColumn("event_time", F.timestamp_millis("ts"))
                 .withWatermark("event_time", WATERMARK))
        # One row per (view, dimension), so one aggregation counts both per page and per user.
        dimensions = F.array(F.struct(F.lit("page").alias("dimension"), F.col("page").alias("name")),
                             F.struct(F.lit("user").alias("dimension"), F.col("user").alias("name")))
        counts = (views.select("event_time", F.explode(dimensions).alias("d"))
                  .groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), "d.dimension", "d.name")
                  .count())
        out = counts.select(
            F.concat_ws(":", "dimension", "name").alias("key"),
            F.to_json(F.struct(F.unix_millis(F.col("window.start")).alias("window_start"), "dimension", "name",
                               "count")).alias("value"))
        return write_available_now(out, settings, settings.topic("page-view-counts"))

    def expected(self, events: Mapping[str, list[Event]], settings: RunSettings) -> set[Any]:
        counts: Counter[tuple[int, str, str]] = Counter()
        for view in events["page-views"]:
            if view["user"] == FLUSH:
                continue
            start = window_start(view["ts"], WINDOW_MS)
            counts[(start, "page", view["page"])] += 1
            counts[(start, "user", view["user"])] += 1
        return {(*key, n) for key, n in counts.items()}

    def actual(self, settings: RunSettings) -> list[Any]:
        rows = read_json(settings.bootstrap, settings.topic("page-view-counts"))
        return [(r["window_start"], r["dimension"], r["name"], r["count"]) for r in rows]
