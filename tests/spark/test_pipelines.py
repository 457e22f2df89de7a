"""The example pipelines: each run end to end on the shared broker and Spark session, its output compared
with the same result computed in plain Python from the generated events."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from moldau.cli.main import main
from moldau.cli.pipeline import NAMES
from moldau.spark.pipelines import PIPELINES, POSTGRES_OPTION, RunSettings, run
from tests.support.broker_process import BrokerProcess

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pipeline_output_matches_plain_python(name: str, spark: SparkSession, shared_broker: BrokerProcess,
                                              tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # The logs pipeline also writes to PostgreSQL through JDBC, and is checked there too.
    extra = {POSTGRES_OPTION: request.getfixturevalue("postgres").url} if name == "logs" else {}
    # Several rate-limited micro-batches, so windows close through the watermark across batches.
    settings = RunSettings(bootstrap=shared_broker.bootstrap, prefix=f"{name}-{uuid.uuid4().hex[:6]}-", events=600,
                           seed=7, checkpoint=tmp_path / "ck", max_offsets_per_trigger=250, extra=extra)
    outcome = run(PIPELINES[name], spark, settings)
    assert outcome.expected > 10
    assert outcome.ok, (outcome.missing[:5], outcome.unexpected[:5], outcome.duplicates)


def test_cli_lists_the_pipelines(capsys: pytest.CaptureFixture[str]) -> None:
    assert set(NAMES) == set(PIPELINES)
    assert main(["pipeline", "list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(PIPELINES)
