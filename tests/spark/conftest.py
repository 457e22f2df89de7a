"""One SparkSession for the whole run (starting one costs seconds), with the `moldau` format registered."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from moldau.spark import register
from moldau.spark.pipelines import JDBC_DRIVER_JAR


@pytest.fixture(scope="session", autouse=True)
def spark_scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Spark's scratch space (block managers, its `spark-*` dirs) inside the run's temporary directory, for every
    Spark this run starts: a driver killed on purpose, or a JVM stopped at exit without its shutdown hooks, would
    otherwise leave its directories in /tmp for ever."""
    scratch = tmp_path_factory.mktemp("spark-scratch")
    # SPARK_LOCAL_DIRS for the block managers and `spark-*` dirs; SPARK_SUBMIT_OPTS reaches the JVM of every driver
    # started through spark-submit (this process's session and the drivers tests start as commands), whose own
    # temporary directory holds its session artifacts (`artifacts-*`).
    settings = {"SPARK_LOCAL_DIRS": str(scratch), "SPARK_SUBMIT_OPTS": f"-Djava.io.tmpdir={scratch}"}
    previous = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    yield scratch
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def spark(spark_scratch: Path) -> Iterator[SparkSession]:
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
        # Its session artifacts too (`artifacts-*`, which Spark puts in the JVM's temporary directory).
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={spark_scratch}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
