"""Client telemetry (KIP-714) end to end: a subscription made with `moldau client-metrics`, a confluent-kafka
producer (librdkafka) that pushes its metrics, and the pushes read back from the broker; the error paths with
raw requests."""

from __future__ import annotations

import gzip
import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.get_telemetry_subscriptions.v0.request import GetTelemetrySubscriptionsRequest
from kio.schema.list_config_resources.v0.request import ListConfigResourcesRequest as ListClientMetricsResources
from kio.schema.push_telemetry.v0.request import PushTelemetryRequest
from kio.static.primitive import i8, i32
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import moldau, ok
from tests.support.raw_client import RawClient

PUSH_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def telemetry_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("telemetry-broker"), {"telemetry.max.bytes": "100000"})
    proc.telemetry_url = proc.overrides["console.listeners"]  # type: ignore[attr-defined]  # served beside /metrics
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def clients(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/v1/client-metrics", timeout=10) as answer:
        return json.load(answer)  # type: ignore[no-any-return]


def test_a_librdkafka_producer_pushes_what_its_subscription_asks_for(telemetry_broker: BrokerProcess) -> None:
    bootstrap, url = telemetry_broker.bootstrap, telemetry_broker.telemetry_url  # type: ignore[attr-defined]
    ok(bootstrap, "client-metrics", "alter", "--name", "producers", "--metrics", "org.apache.kafka.producer.",
       "--interval-ms", "1000", "--match", "client_id=telemetry-.*")
    assert ok(bootstrap, "client-metrics", "list").split() == ["producers"]
    described = ok(bootstrap, "client-metrics", "describe", "--name", "producers")
    assert "org.apache.kafka.producer." in described and "client_id=telemetry-.*" in described

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "telemetry-producer",
                         "enable.metrics.push": True})
    deadline = time.monotonic() + PUSH_TIMEOUT_S
    pushed: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not pushed:
        producer.produce("telemetry-topic", b"value")
        producer.poll(0.5)
        pushed = [c for c in clients(url) if c["client_id"] == "telemetry-producer" and c["points"] > 0]
    producer.flush(10)
    assert pushed, clients(url)
    client = pushed[0]
    assert client["client_software_name"] == "confluent-kafka-python"  # from its ApiVersions request
    assert client["requested_metrics"] == ["org.apache.kafka.producer."] and client["push_interval_ms"] == 1000

    latest = ok(bootstrap, "client-metrics", "push-latest", "--url", url, "--client-id", "telemetry-producer")
    assert "org.apache.kafka.producer." in latest, latest
    table = ok(bootstrap, "client-metrics", "clients", "--url", url)
    assert "telemetry-producer" in table

    # A client no subscription matches is asked for nothing, and pushes nothing.
    other = Producer({"bootstrap.servers": bootstrap, "client.id": "unmatched", "enable.metrics.push": True})
    other.produce("telemetry-topic", b"value")
    other.flush(10)
    assert all(c["pushes"] == 0 for c in clients(url) if c["client_id"] == "unmatched")
    ok(bootstrap, "client-metrics", "delete", "--name", "producers")
    assert ok(bootstrap, "client-metrics", "list").split() == []


def test_push_errors(telemetry_broker: BrokerProcess) -> None:
    bootstrap = telemetry_broker.bootstrap
    ok(bootstrap, "client-metrics", "alter", "--name", "raw", "--metrics", "*", "--interval-ms", "100000",
       "--match", "client_id=raw-client")
    payload = MetricsData().SerializeToString()
    with RawClient(bootstrap) as client:
        sub = client.request(GetTelemetrySubscriptionsRequest(client_instance_id=None))
        assert sub.error_code.name == "none" and sub.requested_metrics == ()  # client id "raw-test": no match
        instance = sub.client_instance_id
        assert instance is not None and instance != uuid.UUID(int=0)

        def push(sub_id: int, data: bytes, compression: int = 0, terminating: bool = False,
                 instance_id: uuid.UUID | None = instance) -> str:
            return client.request(PushTelemetryRequest(  # type: ignore[no-any-return]
                client_instance_id=instance_id, subscription_id=i32(sub_id), terminating=terminating,
                compression_type=i8(compression), metrics=data)).error_code.name

        assert push(sub.subscription_id + 1, payload) == "unknown_subscription_id"
        assert push(sub.subscription_id, payload, instance_id=uuid.uuid4()) == "unknown_subscription_id"
        assert push(sub.subscription_id, payload, instance_id=None) == "invalid_request"
        assert push(sub.subscription_id, b"\x00" * 100_001) == "telemetry_too_large"
        assert push(sub.subscription_id, b"not gzip", compression=1) == "invalid_record"
        assert push(sub.subscription_id, b"\xff\xff\xff", compression=0) == "invalid_record"
        assert push(sub.subscription_id, payload, compression=9) == "unsupported_compression_type"
        assert push(sub.subscription_id, gzip.compress(payload), compression=1) == "none"
        assert push(sub.subscription_id, payload) == "throttling_quota_exceeded"  # long before the interval
        assert push(sub.subscription_id, payload, terminating=True) == "none"
        assert push(sub.subscription_id, payload, terminating=True) == "invalid_request"
        resources = client.request(ListClientMetricsResources())
    assert "raw" in [r.resource_name for r in resources.config_resources]
    refused = moldau(bootstrap, "client-metrics", "alter", "--name", "bad", "--interval-ms", "5")
    assert "INVALID_CONFIG" in refused.stderr
    refused = moldau(bootstrap, "client-metrics", "alter", "--name", "bad", "--match", "colour=red")
    assert "INVALID_CONFIG" in refused.stderr
