"""The schema registry on a 3-node cluster: every broker serves it, writes from any broker go to the one writer
(the leader of `_schemas`-0), ids never collide, every broker reads every schema, and a registered schema
survives the writer's loss."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from tests.support.cluster import LocalCluster, metadata_at
from tests.support.registry_schemas import schema_text
from tests.support.replicated import FAST_FAILOVER

pytestmark = pytest.mark.slow

SCHEMAS = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    base: Path = tmp_path_factory.mktemp("registry-cluster")
    with LocalCluster(base, 3, overrides=FAST_FAILOVER) as started:
        started.active_controller(timeout_s=30)
        # Every broker registered first, so `_schemas` gets three replicas.
        started.wait_until(lambda: len(metadata_at(first_address(started)).brokers) == 3 or None, 30,
                           "three brokers registered")
        yield started


def first_address(cluster: LocalCluster) -> str:
    return next(n.kafka_address for n in cluster.brokers if n.is_running and n.kafka_address is not None)


def urls(cluster: LocalCluster) -> list[str]:
    found = [node.registry_url for node in cluster.brokers if node.is_running]
    return [u for u in found if u is not None]


def record_schema(i: int) -> str:
    return json.dumps({"type": "record", "name": f"Event{i}", "namespace": "moldau.cluster",
                       "fields": [{"name": f"field{i}", "type": "long"}]})


def test_concurrent_registrations_through_every_broker(cluster: LocalCluster) -> None:
    registries = urls(cluster)
    assert len(registries) == 3
    clients = [SchemaRegistryClient({"url": u}) for u in registries]

    def register(i: int) -> tuple[int, int]:
        return i, clients[i % 3].register_schema(f"event{i}-value", Schema(record_schema(i), "AVRO"))

    with ThreadPoolExecutor(max_workers=9) as pool:
        ids = dict(pool.map(register, range(SCHEMAS)))
    assert len(set(ids.values())) == SCHEMAS, f"ids collided: {ids}"
    for url in registries:
        reader = SchemaRegistryClient({"url": url})  # fresh: no cache
        for i, schema_id in ids.items():
            assert json.loads(schema_text(reader.get_schema(schema_id)))["name"] == f"Event{i}"
            latest = reader.get_latest_version(f"event{i}-value")
            assert (latest.version, latest.schema_id) == (1, schema_id)
        assert len([s for s in reader.get_subjects() if s.startswith("event")]) == SCHEMAS


def test_one_schema_registered_at_once_everywhere_gets_one_id_and_one_version(cluster: LocalCluster) -> None:
    registries = urls(cluster)
    schema = Schema(record_schema(300), "AVRO")

    def register(i: int) -> int:
        client = SchemaRegistryClient({"url": registries[i % 3]})
        return client.register_schema("same-value" if i % 2 else "same-too-value", schema)

    with ThreadPoolExecutor(max_workers=12) as pool:
        ids = set(pool.map(register, range(12)))
    assert len(ids) == 1
    for url in registries:
        reader = SchemaRegistryClient({"url": url})
        assert reader.get_versions("same-value") == [1] and reader.get_versions("same-too-value") == [1]


def test_schemas_topic_is_compacted_and_replicated(cluster: LocalCluster) -> None:
    SchemaRegistryClient({"url": urls(cluster)[0]}).register_schema("probe-value", Schema('"string"', "AVRO"))
    topic = metadata_at(first_address(cluster), ["_schemas"]).topics[0]
    assert len(topic.partitions) == 1 and len(topic.partitions[0].replica_nodes) == 3
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "_schemas")
    configs = admin.describe_configs([resource])[resource].result(30)
    assert configs["cleanup.policy"].value == "compact"


def test_written_schemas_survive_the_writers_loss(cluster: LocalCluster) -> None:
    registries = urls(cluster)
    before = {i: SchemaRegistryClient({"url": registries[i % 3]}).register_schema(
        f"keep{i}-value", Schema(record_schema(100 + i), "AVRO")) for i in range(6)}
    writer_id = metadata_at(first_address(cluster), ["_schemas"]).topics[0].partitions[0].leader_id
    cluster[writer_id].stop()
    try:
        survivors = urls(cluster)
        deadline = time.monotonic() + 60
        while True:  # until the controller has moved `_schemas` to a new leader
            try:
                new_id = SchemaRegistryClient({"url": survivors[0]}).register_schema(
                    "after-failover-value", Schema(record_schema(999), "AVRO"))
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        assert new_id not in before.values() and new_id > max(before.values())
        for url in survivors:
            reader = SchemaRegistryClient({"url": url})
            for i, schema_id in before.items():
                assert json.loads(schema_text(reader.get_schema(schema_id)))["name"] == f"Event{100 + i}"
            assert reader.get_latest_version("after-failover-value").schema_id == new_id
    finally:
        cluster[writer_id].start()
    rejoined = SchemaRegistryClient({"url": cluster[writer_id].registry_url or ""})
    assert rejoined.get_latest_version("after-failover-value").schema_id == new_id


def test_brokers_without_a_replica_serve_reads_and_forward_writes(cluster: LocalCluster, tmp_path: Path) -> None:
    """`_schemas` moved onto its leader alone: the two other brokers hold no replica and still serve."""
    address = first_address(cluster)
    leader = metadata_at(address, ["_schemas"]).topics[0].partitions[0].leader_id
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "_schemas", "partition": 0, "replicas": [leader]}]}))
    subprocess.run([sys.executable, "-m", "moldau", "partitions", "reassign", "--execute", "--plan", str(plan),
                    "-b", address, "--timeout", "60"], check=True, capture_output=True, timeout=90)
    cluster.wait_until(
        lambda: list(metadata_at(address, ["_schemas"]).topics[0].partitions[0].replica_nodes) == [leader] or None,
        30, "_schemas on its leader alone")
    others = [n for n in cluster.brokers if n.node_id != leader and n.registry_url is not None]
    assert len(others) == 2
    schema_id = SchemaRegistryClient({"url": others[0].registry_url or ""}).register_schema(
        "no-replica-value", Schema(record_schema(500), "AVRO"))
    reader = SchemaRegistryClient({"url": others[1].registry_url or ""})
    assert json.loads(schema_text(reader.get_schema(schema_id)))["name"] == "Event500"
    assert reader.get_latest_version("no-replica-value").schema_id == schema_id
    assert reader.get_latest_version("event0-value").version == 1  # replayed before, still served
