"""Broker-side schema validation on a 3-node cluster: a schema registered through one broker's registry is
accepted at once by partition leaders on the other brokers, whose registries replay `_schemas` on their own (a
leader that does not know an id yet catches up with `_schemas` before it answers)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.support.cluster import LocalCluster, metadata_at
from tests.support.messages import partition_of

pytestmark = pytest.mark.slow

TOPIC = "validated-events"
ROUNDS = 12


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("validation-cluster")
    with LocalCluster(base, 3) as started:
        started.active_controller(timeout_s=30)
        started.wait_until(lambda: len(metadata_at(bootstrap(started).split(",")[0]).brokers) == 3 or None, 30,
                           "three brokers registered")
        yield started


def bootstrap(cluster: LocalCluster) -> str:
    return ",".join(n.kafka_address for n in cluster.brokers if n.is_running and n.kafka_address is not None)


def leaders_of(admin: AdminClient) -> set[int]:
    partitions = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions.values()
    return {p.leader for p in partitions if p.leader >= 0}


def test_a_schema_registered_anywhere_is_accepted_by_every_leader(cluster: LocalCluster) -> None:
    servers = bootstrap(cluster)
    admin = AdminClient({"bootstrap.servers": servers})
    config = {"confluent.value.schema.validation": "true",
              "confluent.value.subject.name.strategy": "RecordNameStrategy"}
    admin.create_topics([NewTopic(TOPIC, 3, 1, config=config)])[TOPIC].result(timeout=30)
    cluster.wait_until(lambda: leaders_of(admin) if len(leaders_of(admin)) == 3 else None, 30,
                       "every partition led, by three brokers")
    registries = [n.registry_url for n in cluster.brokers if n.is_running and n.registry_url is not None]
    assert len(registries) == 3
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
    outcomes: list[tuple[int, int | None]] = []
    context = SerializationContext(TOPIC, MessageField.VALUE)
    for i in range(ROUNDS):
        # A new record type each round, registered under its own subject through one broker's registry, and
        # produced at once to every partition, led by the three brokers.
        schema = json.dumps({"type": "record", "name": f"Event{i}", "namespace": "moldau.cluster",
                             "fields": [{"name": "n", "type": "long"}]})
        client = SchemaRegistryClient({"url": registries[i % 3]})
        value = AvroSerializer(client, schema, conf={"subject.name.strategy": record_subject_name_strategy})(
            {"n": i}, context)
        for partition in range(3):
            producer.produce(TOPIC, value, partition=partition, on_delivery=lambda err, msg: outcomes.append(
                (partition_of(msg), None if err is None else err.code())))
        assert producer.flush(30) == 0
    assert sorted(outcomes) == [(p, None) for p in range(3) for _ in range(ROUNDS)]
    unknown = struct.pack(">bI", 0, 987_654) + b"\x02"
    refused: list[int | None] = []
    producer.produce(TOPIC, unknown, partition=0,
                     on_delivery=lambda err, _: refused.append(None if err is None else err.code()))
    assert producer.flush(30) == 0
    assert refused == [87]  # INVALID_RECORD, after catching up found nothing
