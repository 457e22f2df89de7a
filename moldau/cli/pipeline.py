"""`moldau pipeline`: run the example Spark pipelines against a broker and check their results.

Spark is imported only when a pipeline runs, so the other commands work without the `spark` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from moldau.cli.common import CliError, add_bootstrap_option
from moldau.cli.output import add_output_option, emit

# The names, for `--help` without importing Spark; moldau.spark.pipelines.PIPELINES has the same keys.
NAMES = ("activity", "retail", "logs")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `pipeline run` and `pipeline list` to the top-level parser."""
    parser = subparsers.add_parser("pipeline", help="run the example Spark pipelines")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = add_output_option(actions.add_parser("list", help="list the pipelines"))
    listing.set_defaults(func=list_pipelines)
    runner = actions.add_parser("run", help="generate input, run a pipeline with Spark, check its output")
    runner.add_argument("name", choices=NAMES)
    add_bootstrap_option(runner)
    runner.add_argument("--events", type=int, default=5_000, help="input events to generate (default 5000)")
    runner.add_argument("--seed", type=int, default=1, help="random seed of the generator (default 1)")
    runner.add_argument("--prefix", help="prefix of the topics it creates (default: a fresh one per run)")
    runner.add_argument("--checkpoint", type=Path, help="checkpoint directory (default: a temporary one)")
    runner.add_argument("--max-offsets-per-trigger", type=int, help="rate limit of each micro-batch")
    runner.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    runner.add_argument("--postgres", metavar="URL",
                        help="logs: also write to PostgreSQL, postgresql://user[:password]@host:port/database")
    runner.set_defaults(func=run_pipeline)


def list_pipelines(args: argparse.Namespace) -> int:
    from moldau.spark.pipelines import PIPELINES

    emit(args, [{"name": name, "description": p.description} for name, p in PIPELINES.items()],
         lambda: "\n".join(f"{name:10} {p.description}" for name, p in PIPELINES.items()))
    return 0


def run_pipeline(args: argparse.Namespace) -> int:
    """Run one pipeline in a local Spark session and report whether its output matched; 1 if not."""
    from moldau.spark.pipelines import PIPELINES, POSTGRES_OPTION, RunSettings, run

    if args.command_config:
        raise CliError("pipeline run does not take --command-config yet: its Spark jobs connect in PLAINTEXT")
    prefix = args.prefix or f"{args.name}-{uuid.uuid4().hex[:6]}-"
    with tempfile.TemporaryDirectory(prefix="moldau-pipeline-") as scratch:
        settings = RunSettings(bootstrap=args.bootstrap_server, prefix=prefix, events=args.events, seed=args.seed,
                               checkpoint=args.checkpoint or Path(scratch) / "checkpoint",
                               max_offsets_per_trigger=args.max_offsets_per_trigger,
                               extra={POSTGRES_OPTION: args.postgres} if args.postgres else {})
        spark = _session(args.master)
        try:
            began = time.monotonic()
            outcome = run(PIPELINES[args.name], spark, settings)
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
        finally:
            spark.stop()
    print(f"{args.name}: {outcome.actual} results written to {prefix}*, {outcome.expected} expected; "
          f"query {outcome.seconds:.1f} s, run {time.monotonic() - began:.1f} s")
    if outcome.ok:
        print("matches the plain-Python computation")
        return 0
    _report(outcome)
    return 1


def _report(outcome: Any) -> None:
    print(f"MISMATCH: {len(outcome.missing)} missing, {len(outcome.unexpected)} unexpected, "
          f"{outcome.duplicates} duplicates", file=sys.stderr)
    for row in outcome.missing[:5]:
        print(f"  missing:    {row}", file=sys.stderr)
    for row in outcome.unexpected[:5]:
        print(f"  unexpected: {row}", file=sys.stderr)


def _session(master: str) -> Any:
    from pyspark.sql import SparkSession

    from moldau.spark import register
    from moldau.spark.pipelines import JDBC_DRIVER_JAR

    # Spark's Python workers must run this interpreter, which has moldau installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName("moldau-pipeline")
    if Path(JDBC_DRIVER_JAR).exists():
        # PostgreSQL's JDBC driver, for the logs pipeline; Spark loads jars only when a session starts.
        builder = builder.config("spark.jars", JDBC_DRIVER_JAR)
    spark = (builder
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
