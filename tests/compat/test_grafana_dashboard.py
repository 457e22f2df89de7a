"""The Grafana dashboard in docs/grafana reads only metrics a broker exports: after a small workload (produce,
a throttled client, a consumer group that commits, a consumer), every metric name its PromQL expressions and
variables reference has samples in `/metrics`."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import ok
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.metrics_scrape import Scrape
from tests.support.quota_rates import produce_for

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "moldau-overview.json"
METRIC_NAME = re.compile(r"\b(kafka_[a-z0-9_]+)\b")


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression of the dashboard: panel targets' `expr` and variables' queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def test_every_metric_the_dashboard_uses_is_exported(broker: BrokerProcess) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    names = {name for expr in expressions(dashboard) for name in METRIC_NAME.findall(expr)}
    assert len(names) >= 25, names  # the parse found the dashboard's expressions

    topic = f"dashboard-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, partitions=2)
    ck_produce(broker.bootstrap, topic, [{"value": b"x" * 100, "partition": i % 2} for i in range(20)])
    ok(broker.bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", "throttled",
       "--add-config", "producer_byte_rate=20000")
    produce_for(broker.bootstrap, topic, "throttled", 0.5, [])
    ck_consume(broker.bootstrap, topic, 20)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dashboard-group"})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    exported = set(Scrape(broker.metrics_url).samples)
    assert not names - exported, sorted(names - exported)
