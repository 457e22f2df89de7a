"""Retail: sales and shipments joined per product and one-minute window into reorders and price changes.

Inputs: `sales` (`{"sku", "qty", "price_cents", "ts"}`) and `shipments` (`{"sku", "qty", "ts"}`), read as
one stream, joined with the static product catalog, and aggregated per (window, sku) into units sold and
units received: a full outer join of the two streams on product and window. Per window and product the
query emits into `retail-actions`, as `{"window_start", "sku", "action", "value"}`:

- `reorder` when sales outran shipments by REORDER_AT units or more; value: the shortfall plus SAFETY_STOCK;
- `raise_price` when HIGH_DEMAND or more units sold; value: the list price + 5 % (cents, rounded down);
- `discount` when at most LOW_DEMAND units sold while stock arrived; value: the list price - 10 %.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, SparkSession
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
REORDER_AT, SAFETY_STOCK = 15, 10
HIGH_DEMAND, LOW_DEMAND = 25, 2
RAISE_PERCENT, DISCOUNT_PERCENT = 105, 90
FLUSH = "~flush"
# sku → (list price in cents, demand weight): a few best sellers and a long tail.
CATALOG = {f"sku-{i:02d}": (500 + 125 * i, weight)
           for i, weight in enumerate([30, 22, 14, 9, 6, 5, 4, 3, 2, 2, 1, 1])}


class RetailPipeline(Pipeline):
    name = "retail"
    description = "sales joined with shipments per product and minute: reorders and price adjustments"

    def create_topics(self, settings: RunSettings) -> None:
        create_topics(settings.bootstrap, {settings.topic("sales"): 2, settings.topic("shipments"): 1,
                                           settings.topic("retail-actions"): 1})

    def generate(self, settings: RunSettings) -> dict[str, list[Event]]:
        rng = random.Random(settings.seed)
        skus, weights = list(CATALOG), [w for _price, w in CATALOG.values()]
        sales: list[Event] = [{"sku": sku, "qty": rng.randint(1, 3), "price_cents": CATALOG[sku][0], "ts": ts}
                 for ts in jittered_times(rng, settings.events, step_ms=300, jitter_ms=10_000)
                 for sku in rng.choices(skus, weights)]
        # Shipments are rarer and bigger, and do not follow demand.
        shipments: list[Event] = [{"sku": rng.choice(skus), "qty": rng.randint(10, 40), "ts": ts}
                     for ts in jittered_times(rng, max(1, settings.events // 8), step_ms=2_400, jitter_ms=10_000)]
        last = max(int(e["ts"]) for e in sales + shipments)
        sales.append({"sku": FLUSH, "qty": 0, "price_cents": 0, "ts": last + FLUSH_AFTER_MS})
        produce_json(settings.bootstrap, settings.topic("shipments"), shipments, key_field="sku")
        produce_json(settings.bootstrap, settings.topic("sales"), sales, key_field="sku")
        return {"sales": sales, "shipments": shipments}

    def start(self, spark: SparkSession, settings: RunSettings) -> StreamingQuery:
        catalog = spark.createDataFrame([(sku, price) for sku, (price, _w) in CATALOG.items()],
                                        "sku string, list_price_cents int")
        schema = "sku string, qty int, price_cents int, ts long"
        sales_topic = settings.topic("sales")
        events = (json_stream(spark, settings, [sales_topic, settings.topic("shipments")])
                  .select(F.col("topic"), F.from_json(F.col("value").cast("string"), schema).alias("e"))
                  .select(F.when(F.col("topic") == sales_topic, "sale").otherwise("shipment").alias("kind"), "e.*")
                  .withColumn("event_time", F.timestamp_millis("ts"))
                  # Before the catalog join, so the flush event (no such product) still moves the watermark.
                  .withWatermark("event_time", WATERMARK)
                  .join(catalog, "sku"))
        totals = (events.groupBy(F.window("event_time", f"{WINDOW_MS // 1000} seconds"), "sku", "list_price_cents")
                  .agg(_units(F.col("kind") == "sale").alias("sold"), _units(F.col("kind") == "shipment")
                       .alias("shipped")))
        actions = (totals.select(F.unix_millis(F.col("window.start")).alias("window_start"), "sku",
                                 F.explode(_actions()).alias("a"))
                   .where(F.col("a").isNotNull()))
        out = actions.select(F.col("sku").alias("key"), F.to_json(F.struct(
            "window_start", "sku", F.col("a.action").alias("action"), F.col("a.value").alias("value"))).alias("value"))
        return write_available_now(out, settings, settings.topic("retail-actions"))

    def expected(self, events: Mapping[str, list[Event]], settings: RunSettings) -> set[Any]:
        totals: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0])
        for kind, index in (("sales", 0), ("shipments", 1)):
            for e in events[kind]:
                if e["sku"] in CATALOG:
                    totals[(window_start(e["ts"], WINDOW_MS), e["sku"])][index] += e["qty"]
        out: set[Any] = set()
        for (start, sku), (sold, shipped) in totals.items():
            price = CATALOG[sku][0]
            if sold - shipped >= REORDER_AT:
                out.add((start, sku, "reorder", sold - shipped + SAFETY_STOCK))
            if sold >= HIGH_DEMAND:
                out.add((start, sku, "raise_price", price * RAISE_PERCENT // 100))
            if sold <= LOW_DEMAND and shipped > 0:
                out.add((start, sku, "discount", price * DISCOUNT_PERCENT // 100))
        return out

    def actual(self, settings: RunSettings) -> list[Any]:
        rows = read_json(settings.bootstrap, settings.topic("retail-actions"))
        return [(r["window_start"], r["sku"], r["action"], r["value"]) for r in rows]


def _units(condition: Column) -> Column:
    return F.sum(F.when(condition, F.col("qty")).otherwise(0))


def _actions() -> Column:
    """The three rules as an array of optional (action, value) structs; a rule that does not fire is null."""
    sold, shipped, price = F.col("sold"), F.col("shipped"), F.col("list_price_cents").cast("long")

    def action(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("action"), value.cast("long").alias("value"))

    return F.array(
        F.when(sold - shipped >= REORDER_AT, action("reorder", sold - shipped + SAFETY_STOCK)),
        F.when(sold >= HIGH_DEMAND, action("raise_price", F.floor(price * RAISE_PERCENT / 100))),
        F.when((sold <= LOW_DEMAND) & (shipped > 0), action("discount", F.floor(price * DISCOUNT_PERCENT / 100))),
    )
