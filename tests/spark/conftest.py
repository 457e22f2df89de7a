"""One SparkSession for the whole run (starting one costs seconds), with the `moldau` format registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from moldau.spark import register
from moldau.spark.pipelines import JDBC_DRIVER_JAR


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """local[2], two shuffle partitions, no UI, quiet logs; stopped at the end of the run."""
    # Spark starts its Python workers with `python3` from PATH unless told otherwise; they must be this
    # interpreter, which has moldau, pyarrow and confluent-kafka installed.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("moldau-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.stopTimeout", "30s")
        # PostgreSQL's JDBC driver (Debian's libpostgresql-jdbc-java) for the logs pipeline.
        .config("spark.jars", JDBC_DRIVER_JAR)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
