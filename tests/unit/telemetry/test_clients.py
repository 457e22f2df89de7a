"""Client telemetry's core (KIP-714): subscriptions from configs, matching, and the pushes kept per client."""

from __future__ import annotations

import uuid

import pytest
from opentelemetry.proto.metrics.v1.metrics_pb2 import MetricsData

from moldau.clock import ManualClock
from moldau.config import ConfigError
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.telemetry import clients as clients_module
from moldau.telemetry.clients import ClientTelemetry
from moldau.telemetry.subscriptions import RESOURCE_CLIENT_METRICS, ClientAttributes, parse, resolve

PEER = "10.0.0.7:51234"


def attributes(client_id: str = "app-1", software: str = "librdkafka") -> ClientAttributes:
    return ClientAttributes(str(uuid.UUID(int=5)), client_id, software, "2.16.0", "10.0.0.7", "51234")


def configs(**subscriptions: dict[str, str]) -> dict[tuple[int, str], dict[str, str]]:
    return {(RESOURCE_CLIENT_METRICS, name): values for name, values in subscriptions.items()}


def metrics_payload(*names: str) -> bytes:
    data = MetricsData()
    scope = data.resource_metrics.add().scope_metrics.add()
    for i, name in enumerate(names):
        metric = scope.metrics.add(name=name)
        point = metric.gauge.data_points.add(as_double=float(i))
        point.attributes.add(key="node.id").value.string_value = "1"
    payload: bytes = data.SerializeToString()
    return payload


def test_configs_are_validated_as_kafkas_client_metrics_configs() -> None:
    sub = parse("s", {"metrics": "a.b., c", "interval.ms": "1000", "match": "client_id=app-.*"})
    assert sub.metrics == ("a.b.", "c") and sub.interval_ms == 1000
    for bad in ({"interval.ms": "99"}, {"interval.ms": "x"}, {"match": "colour=red"}, {"match": "client_id=("},
                {"colour": "red"}):
        with pytest.raises(ConfigError):
            parse("s", bad)


def test_a_client_gets_the_union_of_the_matching_subscriptions_at_the_shortest_interval() -> None:
    subs = [parse("a", {"metrics": "x.", "interval.ms": "5000"}),
            parse("b", {"metrics": "y.", "interval.ms": "1000", "match": "client_software_name=librdkafka"}),
            parse("c", {"metrics": "*", "match": "client_id=other"})]
    mine = resolve(subs, attributes())
    assert mine.metrics == ("x.", "y.") and mine.interval_ms == 1000
    assert resolve(subs, attributes("other")).metrics == ("",)  # "*": every metric
    assert resolve(subs, attributes(software="java")).metrics == ("x.",)
    assert resolve([], attributes()).metrics == ()
    assert resolve(subs, attributes()).subscription_id == mine.subscription_id
    assert resolve(subs[:1], attributes()).subscription_id != mine.subscription_id


def test_pushes_are_checked_and_the_latest_kept() -> None:
    clock = ManualClock()
    telemetry = ClientTelemetry(clock, lambda: 10_000, new_instance_id=lambda: uuid.UUID(int=9))
    subs = configs(all={"metrics": "*", "interval.ms": "1000"})
    telemetry.note_software(PEER, "librdkafka", "2.16.0")
    instance = telemetry.subscribe(None, "app-1", PEER, subs)
    assert instance.instance_id == uuid.UUID(int=9) and instance.attributes.client_software_name == "librdkafka"
    sub_id = instance.subscription.subscription_id

    def push(payload: bytes, terminating: bool = False, sub: int = sub_id, conf: object = subs) -> ErrorCode:
        try:
            telemetry.push(instance.instance_id, sub, terminating, 0, payload, conf)  # type: ignore[arg-type]
        except KafkaError as exc:
            return exc.code
        return ErrorCode.none

    assert push(metrics_payload("a", "b")) == ErrorCode.none
    latest = telemetry.latest(instance.instance_id)
    assert latest is not None and [p.name for p in latest.points] == ["a", "b"]
    assert latest.points[1].value == 1.0 and latest.points[1].attributes == (("node.id", "1"),)
    assert push(metrics_payload("c")) == ErrorCode.throttling_quota_exceeded
    clock.advance(600)
    assert push(metrics_payload("c")) == ErrorCode.none
    # The subscriptions changed: the client's id is stale until it asks again.
    changed = configs(all={"metrics": "*", "interval.ms": "2000"})
    clock.advance(5000)
    assert push(metrics_payload("c"), conf=changed) == ErrorCode.unknown_subscription_id
    assert push(b"\x00" * 10_001) == ErrorCode.telemetry_too_large
    assert push(metrics_payload("d"), terminating=True) == ErrorCode.none
    assert push(metrics_payload("d")) == ErrorCode.invalid_request


def test_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients_module, "MAX_CLIENTS", 3)
    monkeypatch.setattr(clients_module, "MAX_POINTS_PER_PUSH", 2)
    ids = iter(uuid.UUID(int=i) for i in range(1, 100))
    telemetry = ClientTelemetry(ManualClock(), lambda: 10_000, new_instance_id=lambda: next(ids))
    subs = configs(all={"metrics": "*"})
    instances = [telemetry.subscribe(None, f"c{i}", PEER, subs) for i in range(5)]
    assert [c.attributes.client_id for c in telemetry.clients()] == ["c2", "c3", "c4"]
    last = instances[-1]
    telemetry.push(last.instance_id, last.subscription.subscription_id, False, 0, metrics_payload("a", "b", "c"), subs)
    assert len(last.points) == 2 and last.points_dropped == 1
