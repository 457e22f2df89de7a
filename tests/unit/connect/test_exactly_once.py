"""KIP-618's configs: Kafka's transactional ids, the worker setting (never on in standalone mode), and the
validation of a source connector's `exactly.once.support` and `transaction.boundary`."""

from __future__ import annotations

from collections.abc import Mapping

from moldau.connect.api import ConnectorTransactionBoundaries
from moldau.connect.connectors.file import FileStreamSourceConnector
from moldau.connect.worker.exactly_once import transactional_id, validate_exactly_once
from moldau.connect.worker.worker_config import WorkerConfig, exactly_once_source

BASE = {"key.converter": "StringConverter", "value.converter": "StringConverter",
        "exactly.once.source.support": "enabled"}
DISTRIBUTED = {**BASE, "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
               "status.storage.topic": "s"}


def errors(config: dict[str, str], mode: str = "enabled") -> dict[str, list[str]]:
    return {v.name: v.errors for v in validate_exactly_once(FileStreamSourceConnector(), config, mode)}


def test_transactional_ids_are_kafka_connect_s() -> None:
    assert transactional_id("connect-cluster", "orders-source", 3) == "connect-cluster-orders-source-3"


def test_only_a_distributed_worker_runs_exactly_once() -> None:
    assert exactly_once_source(WorkerConfig.parse(DISTRIBUTED, standalone=False)) == "enabled"
    assert exactly_once_source(WorkerConfig.parse({**BASE, "offset.storage.file.filename": "f"})) == "disabled"
    assert exactly_once_source(WorkerConfig.parse({**DISTRIBUTED, "exactly.once.source.support": "Preparing"},
                                                  standalone=False)) == "preparing"


def test_required_needs_an_enabled_worker_and_a_connector_that_says_yes() -> None:
    required = {"file": "input.txt", "exactly.once.support": "required"}
    assert errors(required) == {}
    assert "disabled" in errors(required, "disabled")["exactly.once.support"][0]
    assert "does not support" in errors({"exactly.once.support": "required"})["exactly.once.support"][0]
    assert errors({"exactly.once.support": "requested"}) == {}


class Bounding(FileStreamSourceConnector):
    """A connector whose tasks define their transactions."""

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


def test_connector_boundaries_need_a_connector_that_defines_them() -> None:
    refused = errors({"transaction.boundary": "connector"})["transaction.boundary"][0]
    assert "does not support connector-defined transaction boundaries" in refused
    assert errors({"transaction.boundary": "connector"}, "disabled") == {}  # without exactly-once: not used
    bounding = validate_exactly_once(Bounding(), {"transaction.boundary": "connector"}, "enabled")
    assert [v for v in bounding if v.errors] == []


def test_connector_offsets_topics_are_refused() -> None:
    assert errors({"transaction.boundary": "interval"}) == {}
    assert "offsets.storage.topic" in errors({"offsets.storage.topic": "my-offsets"})
    assert errors({"offsets.storage.topic": "my-offsets"}, "disabled") == {}
