"""The transformation chain built from a connector config: aliases, predicates, negate, and errors that name
the key at fault."""

from __future__ import annotations

import pytest

from moldau.connect.api import Header, SourceRecord
from moldau.connect.errors import ConfigException
from moldau.connect.plugins import PluginRegistry
from moldau.connect.transforms.chain import TransformError, build_chain


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover(entry_points=False)


def rec(topic: str = "orders", value: object = None, headers: tuple[Header, ...] = ()) -> SourceRecord:
    return SourceRecord(topic=topic, value=value, timestamp=0, headers=headers)


def test_chain_applies_in_order_with_kafka_and_short_names(registry: PluginRegistry) -> None:
    chain = build_chain({
        "transforms": "hoist, route",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "line",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "copy-$1",
    }, registry)
    out = chain.apply(rec(value="x"))
    assert out is not None and out.topic == "copy-orders" and out.value == {"line": "x"}


def test_filter_with_predicates_and_negate(registry: PluginRegistry) -> None:
    chain = build_chain({
        "transforms": "dropTombstones,onlyOrders,dropMarked",
        "transforms.dropTombstones.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.dropTombstones.predicate": "isTombstone",
        "transforms.onlyOrders.type": "Filter",
        "transforms.onlyOrders.predicate": "isOrders",
        "transforms.onlyOrders.negate": "true",
        "transforms.dropMarked.type": "Filter",
        "transforms.dropMarked.predicate": "marked",
        "predicates": "isTombstone,isOrders,marked",
        "predicates.isTombstone.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
        "predicates.isOrders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isOrders.pattern": "orders|invoices",
        "predicates.marked.type": "HasHeaderKey",
        "predicates.marked.name": "skip",
    }, registry)
    assert chain.apply(rec(value=None)) is None
    assert chain.apply(rec(topic="users", value=1)) is None
    assert chain.apply(rec(value=1, headers=(Header("skip", None),))) is None
    kept = rec(topic="invoices", value=1)
    assert chain.apply(kept) == kept


@pytest.mark.parametrize(("config", "key", "reason"), [
    ({"transforms": "a"}, "transforms.a.type", "Missing required configuration"),
    ({"transforms": "a", "transforms.a.type": "NoSuchTransform"}, "transforms.a.type", "could not be found"),
    ({"transforms": "a", "transforms.a.type": "RecordIsTombstone"}, "transforms.a.type", "could not be found"),
    ({"transforms": "a", "transforms.a.type": "RegexRouter", "transforms.a.regex": "("}, "transforms.a.regex",
     "Invalid regex"),
    ({"transforms": "a", "transforms.a.type": "Cast$Value", "transforms.a.spec": "x:y"}, "transforms.a.spec",
     "Invalid type found in casting"),
    ({"transforms": "a,a"}, "transforms", "Duplicate alias"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"}, "transforms.a.predicate",
     "not listed in 'predicates'"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "true"}, "transforms.a.negate",
     "only allowed together with a predicate"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p", "transforms.a.negate": "x",
      "predicates": "p", "predicates.p.type": "RecordIsTombstone"}, "transforms.a.negate", "true or false"),
    ({"predicates": "p", "predicates.p.type": "TopicNameMatches"}, "predicates.p.pattern", "Missing required"),
])
def test_bad_configs_name_the_key(registry: PluginRegistry, config: dict[str, str], key: str, reason: str) -> None:
    with pytest.raises(ConfigException) as info:
        build_chain(config, registry)
    assert info.value.name == key
    assert reason in str(info.value)


def test_a_failing_transform_is_named(registry: PluginRegistry) -> None:
    chain = build_chain({"transforms": "ts", "transforms.ts.type": "TimestampRouter"}, registry)
    with pytest.raises(TransformError, match="Transform ts") as info:
        chain.apply(SourceRecord(topic="t", value=1))
    assert info.value.class_name == "org.apache.kafka.connect.transforms.TimestampRouter"


def test_no_transforms_is_the_identity(registry: PluginRegistry) -> None:
    record = rec(value=1)
    assert build_chain({}, registry).apply(record) is record
