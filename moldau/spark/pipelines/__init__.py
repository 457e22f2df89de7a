"""Example pipelines on Spark and Moldau, each checked against a plain-Python computation of its result.

Run one with `moldau pipeline run NAME`; see docs/spark.md.
"""

from __future__ import annotations

from moldau.spark.pipelines.activity import ActivityPipeline
from moldau.spark.pipelines.common import Outcome, Pipeline, RunSettings, run
from moldau.spark.pipelines.logs import JDBC_DRIVER_JAR, POSTGRES_OPTION, LogsPipeline
from moldau.spark.pipelines.retail import RetailPipeline

PIPELINES: dict[str, Pipeline] = {p.name: p for p in (ActivityPipeline(), RetailPipeline(), LogsPipeline())}

__all__ = ["JDBC_DRIVER_JAR", "PIPELINES", "POSTGRES_OPTION", "Outcome", "Pipeline", "RunSettings", "run"]
