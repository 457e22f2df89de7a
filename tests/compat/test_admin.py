"""The admin APIs, driven by kafka-python's KafkaAdminClient and confluent-kafka's AdminClient against a real
`moldau server` process. Where neither client exposes a field (CreateTopics v5+ configs, DeleteTopics by id,
DescribeConfigs documentation), the request is sent as exact bytes with the raw test client."""

from __future__ import annotations

import dataclasses
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.structs import TopicPartition as KpTopicPartition
from kio.index import load_payload_module
from kio.schema.create_topics.v7 import request as create_v7
from kio.schema.delete_topics.v1 import request as delete_v1
from kio.schema.delete_topics.v6 import request as delete_v6
from kio.schema.describe_configs.v4 import request as describe_v4
from kio.schema.incremental_alter_configs.v1 import request as incremental_v1
from kio.schema.metadata.v12 import request as metadata_v12
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32, i32Timedelta

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.handlers.registry import APIS
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic
from tests.support.raw_client import RawClient

TIMEOUT_S = 30
NODE_ID = "1"  # the node id the broker fixtures configure


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def ck_admin(shared_broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": shared_broker.bootstrap})


@pytest.fixture
def kp_admin(shared_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=TIMEOUT_S * 1000)
    yield admin
    admin.close()


def ck_error(future: Any) -> int:
    """The Kafka error code a confluent-kafka future failed with."""
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT_S)
    code: int = info.value.args[0].code()
    return code


def topics_of(admin: AdminClient) -> dict[str, Any]:
    return dict(admin.list_topics(timeout=TIMEOUT_S).topics)


def describe_topic(admin: AdminClient, topic: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    result: dict[str, Any] = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    return result


def incremental(admin: AdminClient, resource_type: ResourceType, name: str,
                changes: list[tuple[str, str | None, AlterConfigOpType]]) -> Any:
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, value, op in changes]
    resource = ConfigResource(resource_type, name, incremental_configs=entries)
    return admin.incremental_alter_configs([resource])[resource]


# -- CreateTopics --------------------------------------------------------------------------------------------


def test_create_topic_with_partitions_and_configs(ck_admin: AdminClient) -> None:
    topic = topic_name("create")
    futures = ck_admin.create_topics([NewTopic(topic, 3, 1, config={"retention.ms": "123456"})])
    futures[topic].result(timeout=TIMEOUT_S)
    assert len(topics_of(ck_admin)[topic].partitions) == 3
    entry = describe_topic(ck_admin, topic)["retention.ms"]
    assert (entry.value, entry.source) == ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_create_topic_defaults_and_assignments(kp_admin: KafkaAdminClient) -> None:
    defaults, assigned = topic_name("defaults"), topic_name("assigned")
    kp_admin.create_topics({defaults: {}, assigned: {"assignments": {0: [1], 1: [1]}}})
    partitions = {t["name"]: len(t["partitions"]) for t in kp_admin.describe_topics([defaults, assigned])}
    assert partitions == {defaults: 1, assigned: 2}  # num.partitions defaults to 1
    unknown_broker, gap = topic_name("unknown-broker"), topic_name("gap")
    result = kp_admin.create_topics({unknown_broker: {"assignments": {0: [7]}},
                                     gap: {"assignments": {0: [1], 2: [1]}}}, raise_errors=False)
    assert {t["name"]: t["error_code"] for t in result["topics"]} == {
        unknown_broker: ErrorCode.invalid_replica_assignment.value, gap: ErrorCode.invalid_replica_assignment.value}


def test_create_topic_validate_only_creates_nothing(ck_admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic = topic_name("validate")
    ck_admin.create_topics([NewTopic(topic, 2, 1)], validate_only=True)[topic].result(timeout=TIMEOUT_S)
    kp_admin.create_topics({topic: {"num_partitions": 2}}, validate_only=True)
    assert topic not in topics_of(ck_admin)
    bad = ck_admin.create_topics([NewTopic(topic, 1, 1, config={"retention.ms": "soon"})], validate_only=True)
    assert ck_error(bad[topic]) == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize(("new_topic", "expected"), [
    (lambda name: NewTopic(name, 1, 1, config={"retention.ms": "forever"}), KafkaError.INVALID_CONFIG),
    (lambda name: NewTopic(name, 1, 1, config={"no.such.config": "1"}), KafkaError.INVALID_CONFIG),
    (lambda name: NewTopic(name, 1, 3), KafkaError.INVALID_REPLICATION_FACTOR),
    (lambda name: NewTopic(name, 0, 1), KafkaError.INVALID_PARTITIONS),
    (lambda name: NewTopic(name.replace("-", " ") + "!", 1, 1), KafkaError.TOPIC_EXCEPTION),
], ids=["bad-value", "unknown-name", "replication-factor", "zero-partitions", "bad-name"])
def test_create_topic_errors(ck_admin: AdminClient, new_topic: Any, expected: int) -> None:
    spec = new_topic(topic_name("bad"))
    assert ck_error(ck_admin.create_topics([spec])[spec.topic]) == expected
    assert spec.topic not in topics_of(ck_admin)


def test_create_existing_topic(shared_broker: BrokerProcess, ck_admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic = topic_name("exists")
    create_topic(shared_broker.bootstrap, topic)
    assert ck_error(ck_admin.create_topics([NewTopic(topic, 1, 1)])[topic]) == KafkaError.TOPIC_ALREADY_EXISTS
    result = kp_admin.create_topics([topic], raise_errors=False)
    assert [t["error_code"] for t in result["topics"]] == [ErrorCode.topic_already_exists.value]


def test_create_topics_v7_answers_id_and_configs(shared_broker: BrokerProcess) -> None:
    topic, twice = topic_name("v7"), topic_name("twice")
    spec = create_v7.CreatableTopic(name=TopicName(topic), num_partitions=i32(2), replication_factor=i16(-1),
                                    assignments=(),
                                    configs=(create_v7.CreatableTopicConfig(name="segment.bytes", value="65536"),))
    dup = create_v7.CreatableTopic(name=TopicName(twice), num_partitions=i32(1), replication_factor=i16(1),
                                   assignments=(), configs=())
    with RawClient(shared_broker.bootstrap) as raw:
        response = raw.request(create_v7.CreateTopicsRequest(
            topics=(spec, dup, dup), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)), validate_only=False))
        metadata = raw.request(metadata_v12.MetadataRequest(
            topics=(metadata_v12.MetadataRequestTopic(name=TopicName(topic), topic_id=None),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    created, *duplicates = response.topics
    assert created.error_code == ErrorCode.none
    assert (created.num_partitions, created.replication_factor) == (2, 1)
    assert created.topic_id == metadata.topics[0].topic_id
    configs = {c.name: c for c in created.configs}
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("65536", 1)
    assert configs["retention.ms"].config_source == ConfigSource.DEFAULT_CONFIG.value
    assert [d.error_code for d in duplicates] == [ErrorCode.invalid_request] * 2


# -- DeleteTopics --------------------------------------------------------------------------------------------


def test_delete_topics(shared_broker: BrokerProcess, ck_admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    by_name, by_id = topic_name("del-name"), topic_name("del-id")
    for topic in (by_name, by_id):
        create_topic(shared_broker.bootstrap, topic, partitions=2)
    ck_admin.delete_topics([by_name])[by_name].result(timeout=TIMEOUT_S)
    topic_id = next(t["topic_id"] for t in kp_admin.describe_topics([by_id]))
    kp_admin.delete_topics([uuid.UUID(str(topic_id))])  # DeleteTopics v6, by id
    remaining = topics_of(ck_admin)
    assert by_name not in remaining and by_id not in remaining
    assert ck_error(ck_admin.delete_topics([by_name])[by_name]) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_topics_by_unknown_id_and_internal(shared_broker: BrokerProcess) -> None:
    internal = "__internal-" + uuid.uuid4().hex[:8]
    create_topic(shared_broker.bootstrap, internal)
    with RawClient(shared_broker.bootstrap) as raw:
        response = raw.request(delete_v6.DeleteTopicsRequest(topics=(
            delete_v6.DeleteTopicState(name=None, topic_id=uuid.uuid4()),
            delete_v6.DeleteTopicState(name=TopicName(internal), topic_id=None),
        ), timeout=i32Timedelta.parse(datetime.timedelta(seconds=10))))
    assert [r.error_code for r in response.responses] == [ErrorCode.unknown_topic_id, ErrorCode.invalid_request]


@pytest.mark.broker_config({"delete.topic.enable": "false"})
def test_delete_topic_disabled(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker.bootstrap, "kept")
    assert ck_error(admin.delete_topics(["kept"])["kept"]) == KafkaError.TOPIC_DELETION_DISABLED
    with RawClient(broker.bootstrap) as raw:  # v1 predates TOPIC_DELETION_DISABLED
        old = raw.request(delete_v1.DeleteTopicsRequest(topic_names=(TopicName("kept"),),
                                                        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10))))
    assert old.responses[0].error_code == ErrorCode.invalid_request
    assert "kept" in topics_of(admin)


# -- CreatePartitions ----------------------------------------------------------------------------------------


def test_create_partitions(shared_broker: BrokerProcess, ck_admin: AdminClient, kp_admin: KafkaAdminClient) -> None:
    topic = topic_name("grow")
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    ck_admin.create_partitions([NewPartitions(topic, 5)], validate_only=True)[topic].result(timeout=TIMEOUT_S)
    assert len(topics_of(ck_admin)[topic].partitions) == 2
    ck_admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=TIMEOUT_S)
    kp_admin.create_partitions({topic: {"count": 5, "assignments": [[1]]}})
    assert len(topics_of(ck_admin)[topic].partitions) == 5
    assert ck_error(ck_admin.create_partitions([NewPartitions(topic, 3)])[topic]) == KafkaError.INVALID_PARTITIONS
    missing = topic_name("missing")
    assert ck_error(ck_admin.create_partitions([NewPartitions(missing, 3)])[missing]) in (
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    # The new partitions take records like the old ones.
    acks = ck_produce(shared_broker.bootstrap, topic, [{"value": b"x", "partition": 4}])
    assert acks == [(4, 0)]


def test_one_request_creates_at_most_ten_thousand_partitions(shared_broker: BrokerProcess,
                                                            ck_admin: AdminClient) -> None:
    """Kafka's bound: a request over 10,000 partitions in all fails whole with POLICY_VIOLATION, and nothing is
    created; one at the bound passes validation. CreatePartitions counts the partitions it adds."""
    first, second = topic_name("many-a"), topic_name("many-b")
    futures = ck_admin.create_topics([NewTopic(first, 5_001, 1), NewTopic(second, 5_000, 1)])
    assert [ck_error(futures[t]) for t in (first, second)] == [KafkaError.POLICY_VIOLATION] * 2
    assert first not in topics_of(ck_admin) and second not in topics_of(ck_admin)
    ck_admin.create_topics([NewTopic(first, 10_000, 1)], validate_only=True)[first].result(timeout=TIMEOUT_S)
    create_topic(shared_broker.bootstrap, first, partitions=1)
    assert ck_error(ck_admin.create_partitions([NewPartitions(first, 10_002)])[first]) == KafkaError.POLICY_VIOLATION
    ck_admin.create_partitions([NewPartitions(first, 10_001)], validate_only=True)[first].result(timeout=TIMEOUT_S)
    assert len(topics_of(ck_admin)[first].partitions) == 1


# -- DeleteRecords -------------------------------------------------------------------------------------------


def test_delete_records_moves_the_low_watermark(shared_broker: BrokerProcess, ck_admin: AdminClient,
                                                kp_admin: KafkaAdminClient) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("trim")
    create_topic(bootstrap, topic, partitions=2)
    for partition in (0, 1):
        ck_produce(bootstrap, topic, [{"value": f"v{i}".encode() * 10, "partition": partition} for i in range(100)])
    futures = ck_admin.delete_records([TopicPartition(topic, 0, 40)])
    assert futures[TopicPartition(topic, 0)].result(timeout=TIMEOUT_S).low_watermark == 40
    result = kp_admin.delete_records({KpTopicPartition(topic, 1): -1})  # -1: up to the high watermark
    assert result[KpTopicPartition(topic, 1)]["low_watermark"] == 100
    # A consumer starting from the beginning starts at the new low watermark.
    got = ck_consume(bootstrap, topic, 60, partitions=[0])
    assert [r.offset for r in got] == list(range(40, 100))
    assert ck_consume(bootstrap, topic, 1, partitions=[1], timeout_s=2) == []
    beyond = ck_admin.delete_records([TopicPartition(topic, 0, 101)])[TopicPartition(topic, 0)]
    assert ck_error(beyond) == KafkaError.OFFSET_OUT_OF_RANGE
    # Deleting below the low watermark changes nothing.
    again = ck_admin.delete_records([TopicPartition(topic, 0, 10)])[TopicPartition(topic, 0)]
    assert again.result(timeout=TIMEOUT_S).low_watermark == 40


def test_delete_records_refused_on_compacted_topic(shared_broker: BrokerProcess, ck_admin: AdminClient) -> None:
    topic = topic_name("compacted")
    create_topic(shared_broker.bootstrap, topic, config={"cleanup.policy": "compact"})
    ck_produce(shared_broker.bootstrap, topic, [{"key": b"k", "value": b"v"}])
    future = ck_admin.delete_records([TopicPartition(topic, 0, 1)])[TopicPartition(topic, 0)]
    assert ck_error(future) == KafkaError.POLICY_VIOLATION


@pytest.mark.broker_config({"offsets.topic.segment.bytes": "1048576"})
def test_the_offsets_topic_is_created_with_offsets_topic_segment_bytes(broker: BrokerProcess) -> None:
    """Kafka's group coordinator creates __consumer_offsets compacted, compression as the producer sent it, and with
    segment.bytes from offsets.topic.segment.bytes."""
    create_topic(broker.bootstrap, "committed")
    ck_produce(broker.bootstrap, "committed", [{"value": b"v"}])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "segment-bytes",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition("committed", 0, 1)], asynchronous=False)
    finally:
        consumer.close()
    configs = describe_topic(AdminClient({"bootstrap.servers": broker.bootstrap}), "__consumer_offsets")
    assert {name: configs[name].value for name in ("segment.bytes", "cleanup.policy", "compression.type")} == {
        "segment.bytes": "1048576", "cleanup.policy": "compact", "compression.type": "producer"}


@pytest.mark.broker_config({"log.retention.check.interval.ms": "200"})
def test_empty_cleanup_policy_keeps_every_record(broker: BrokerProcess) -> None:
    """Kafka 4.2: an empty cleanup.policy deletes nothing by retention and compacts nothing; DeleteRecords
    still moves the log start. A topic with `delete` and the same retention shows the check does run."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    small = {"retention.ms": "1", "segment.bytes": "1024", "segment.ms": "100"}
    create_topic(broker.bootstrap, "kept", config={**small, "cleanup.policy": ""})
    create_topic(broker.bootstrap, "expiring", config={**small, "cleanup.policy": "delete"})
    assert describe_topic(admin, "kept")["cleanup.policy"].value == ""
    # Subtracting the last policy leaves the empty list too.
    create_topic(broker.bootstrap, "emptied", config={"cleanup.policy": "compact"})
    incremental(admin, ResourceType.TOPIC, "emptied",
                [("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT)]).result(timeout=TIMEOUT_S)
    emptied = describe_topic(admin, "emptied")["cleanup.policy"]
    assert (emptied.value, emptied.source) == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    records = [{"key": b"k", "value": b"v" * 200} for _ in range(30)]
    for topic in ("kept", "expiring"):
        ck_produce(broker.bootstrap, topic, records, **{"batch.size": 600})

    def low_watermark(topic: str) -> int:
        # confluent-kafka leaves OffsetSpec's constructors unannotated.
        offsets = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.earliest()})  # type: ignore[no-untyped-call]
        return int(offsets[TopicPartition(topic, 0)].result(timeout=TIMEOUT_S).offset)

    deadline = time.monotonic() + 30
    while low_watermark("expiring") == 0:
        assert time.monotonic() < deadline, "retention never deleted the delete topic's segments"
        time.sleep(0.1)
    assert low_watermark("kept") == 0
    assert [r.offset for r in ck_consume(broker.bootstrap, "kept", 30)] == list(range(30))
    trimmed = admin.delete_records([TopicPartition("kept", 0, 10)])[TopicPartition("kept", 0)]
    assert trimmed.result(timeout=TIMEOUT_S).low_watermark == 10


# -- DescribeConfigs, AlterConfigs, IncrementalAlterConfigs --------------------------------------------------


def test_topic_retention_change_is_described_and_survives_restart(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create_topic(broker.bootstrap, "retained")
    before = describe_topic(admin, "retained")["retention.ms"]
    assert (before.value, before.source) == ("604800000", ConfigSource.DEFAULT_CONFIG.value)
    incremental(admin, ResourceType.TOPIC, "retained",
                [("retention.ms", "3600000", AlterConfigOpType.SET)]).result(timeout=TIMEOUT_S)
    after = describe_topic(admin, "retained")["retention.ms"]
    assert (after.value, after.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    restarted = describe_topic(admin, "retained")["retention.ms"]
    assert (restarted.value, restarted.source) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)


def test_incremental_alter_topic_configs(shared_broker: BrokerProcess, ck_admin: AdminClient) -> None:
    topic = topic_name("incr")
    create_topic(shared_broker.bootstrap, topic, config={"segment.bytes": "1048576"})
    incremental(ck_admin, ResourceType.TOPIC, topic, [
        ("cleanup.policy", "compact", AlterConfigOpType.APPEND),
        ("segment.bytes", None, AlterConfigOpType.DELETE),
        ("max.message.bytes", "2000000", AlterConfigOpType.SET),
    ]).result(timeout=TIMEOUT_S)
    configs = describe_topic(ck_admin, topic)
    assert set(configs["cleanup.policy"].value.split(",")) == {"delete", "compact"}
    assert configs["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["max.message.bytes"].value == "2000000"
    bad = incremental(ck_admin, ResourceType.TOPIC, topic, [("segment.bytes", "lots", AlterConfigOpType.SET)])
    assert ck_error(bad) == KafkaError.INVALID_CONFIG
    not_a_list = incremental(ck_admin, ResourceType.TOPIC, topic,
                             [("retention.ms", "1", AlterConfigOpType.APPEND)])
    assert ck_error(not_a_list) == KafkaError.INVALID_CONFIG
    missing = incremental(ck_admin, ResourceType.TOPIC, topic_name("missing"),
                          [("retention.ms", "1", AlterConfigOpType.SET)])
    assert ck_error(missing) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_incremental_alter_validate_only(shared_broker: BrokerProcess, ck_admin: AdminClient) -> None:
    topic = topic_name("dry")
    create_topic(shared_broker.bootstrap, topic)
    entries = [ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    ck_admin.incremental_alter_configs([resource], validate_only=True)[resource].result(timeout=TIMEOUT_S)
    assert describe_topic(ck_admin, topic)["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")  # on purpose
def test_legacy_alter_configs_replaces_the_whole_set(shared_broker: BrokerProcess, ck_admin: AdminClient) -> None:
    topic = topic_name("legacy")
    create_topic(shared_broker.bootstrap, topic, config={"segment.bytes": "1048576"})
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "7200000"})
    ck_admin.alter_configs([resource])[resource].result(timeout=TIMEOUT_S)
    configs = describe_topic(ck_admin, topic)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == (
        "7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    # segment.bytes was not in the request, so its override is gone.
    assert configs["segment.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    bad = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.ms": "x"})
    assert ck_error(ck_admin.alter_configs([bad])[bad]) == KafkaError.INVALID_CONFIG


def test_kafka_python_describe_and_alter_topic(kp_admin: KafkaAdminClient) -> None:
    topic = topic_name("kp-configs")
    kp_admin.create_topics({topic: {"configs": {"retention.ms": "86400000"}}})
    resource = KpConfigResource(ConfigResourceType.TOPIC, topic)
    described = kp_admin.describe_configs([resource], include_synonyms=True)["topic"][topic]
    assert described["retention.ms"]["value"] == "86400000"
    for legacy in (False, True):
        value = "1000" if legacy else "2000"
        result = kp_admin.alter_configs([KpConfigResource(ConfigResourceType.TOPIC, topic,
                                                          configs={"retention.ms": value})],
                                        incremental=not legacy)
        assert result == {"topic": {topic: "OK"}}
        described = kp_admin.describe_configs([resource])["topic"][topic]
        assert described["retention.ms"]["value"] == value


def test_describe_configs_keys_synonyms_documentation(shared_broker: BrokerProcess) -> None:
    topic = topic_name("raw-describe")
    create_topic(shared_broker.bootstrap, topic, config={"retention.ms": "5000"})
    request = describe_v4.DescribeConfigsRequest(resources=(
        describe_v4.DescribeConfigsResource(resource_type=i8(2), resource_name=topic,
                                            configuration_keys=("retention.ms", "segment.bytes")),
        describe_v4.DescribeConfigsResource(resource_type=i8(2), resource_name=topic_name("missing"),
                                            configuration_keys=None),
        describe_v4.DescribeConfigsResource(resource_type=i8(4), resource_name="99", configuration_keys=None),
    ), include_synonyms=True, include_documentation=True)
    with RawClient(shared_broker.bootstrap) as raw:
        found, missing, other_broker = raw.request(request).results
    assert found.error_code == ErrorCode.none
    configs = {c.name: c for c in found.configs}
    assert set(configs) == {"retention.ms", "segment.bytes"}
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source, retention.read_only) == ("5000", 1, False)
    assert retention.documentation
    # Only values that are set are synonyms: log.retention.ms and .minutes have no default, .hours has.
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "5000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]
    assert missing.error_code == ErrorCode.unknown_topic_or_partition and missing.configs == ()
    assert other_broker.error_code == ErrorCode.invalid_request


def test_broker_configs(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    this_broker = ConfigResource(ResourceType.BROKER, NODE_ID)
    configs = admin.describe_configs([this_broker])[this_broker].result(timeout=TIMEOUT_S)
    assert configs["node.id"].value == NODE_ID and configs["node.id"].is_read_only
    assert configs["log.retention.ms"].is_read_only is False
    # A static config cannot be changed at runtime.
    static = incremental(admin, ResourceType.BROKER, NODE_ID, [("node.id", "2", AlterConfigOpType.SET)])
    assert ck_error(static) in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REQUEST)
    incremental(admin, ResourceType.BROKER, NODE_ID, [("log.segment.bytes", "2097152", AlterConfigOpType.SET)]
                ).result(timeout=TIMEOUT_S)
    segment = admin.describe_configs([this_broker])[this_broker].result(timeout=TIMEOUT_S)["log.segment.bytes"]
    assert (segment.value, segment.source) == ("2097152", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # Neither client can name the cluster-wide defaults (the broker named ""), so send the requests as bytes.
    create_topic(broker.bootstrap, "inherits")
    with RawClient(broker.bootstrap) as raw:
        altered = raw.request(incremental_v1.IncrementalAlterConfigsRequest(resources=(
            incremental_v1.AlterConfigsResource(resource_type=i8(4), resource_name="", configs=(
                incremental_v1.AlterableConfig(name="log.retention.ms", config_operation=i8(0), value="7200000"),)),
        ), validate_only=False))
        assert altered.responses[0].error_code == ErrorCode.none
        defaults = raw.request(describe_v4.DescribeConfigsRequest(resources=(
            describe_v4.DescribeConfigsResource(resource_type=i8(4), resource_name="", configuration_keys=None),
        ), include_synonyms=False, include_documentation=False)).results[0]
    assert [(c.name, c.value, c.config_source) for c in defaults.configs] == [
        ("log.retention.ms", "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    # The default reaches every topic without its own override, also after a restart.
    retention = describe_topic(admin, "inherits")["retention.ms"]
    assert (retention.value, retention.source) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    retention = describe_topic(admin, "inherits")["retention.ms"]
    assert (retention.value, retention.source) == ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)


def test_every_kafka_broker_config_is_known_and_a_full_config_round_trips(broker: BrokerProcess) -> None:
    """An admin tool reads a broker's whole config and writes every dynamic entry back unchanged (as
    confluent-kafka sends it): nothing is refused, including Kafka's configs Moldau has no use for, which
    are then described with their source."""
    from moldau.config.kafka_broker_configs import KAFKA_BROKER_CONFIGS

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    this_broker = ConfigResource(ResourceType.BROKER, NODE_ID)
    described = admin.describe_configs([this_broker])[this_broker].result(timeout=TIMEOUT_S)
    assert {c.name for c in KAFKA_BROKER_CONFIGS} <= set(described)
    writable = {name: entry.value for name, entry in described.items()
                if not entry.is_read_only and entry.value is not None}
    assert {"background.threads", "log.cleaner.threads", "remote.log.reader.threads"} <= writable.keys()
    incremental(admin, ResourceType.BROKER, NODE_ID,
                [(name, value, AlterConfigOpType.SET) for name, value in sorted(writable.items())]
                ).result(timeout=TIMEOUT_S)
    after = admin.describe_configs([this_broker])[this_broker].result(timeout=TIMEOUT_S)
    assert {name: after[name].value for name in writable} == writable
    threads = after["background.threads"]
    assert (threads.value, threads.source) == ("10", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # A config Moldau does not act on still gets its type checked.
    bad = incremental(admin, ResourceType.BROKER, NODE_ID, [("background.threads", "many", AlterConfigOpType.SET)])
    assert ck_error(bad) == KafkaError.INVALID_CONFIG
    read_only = incremental(admin, ResourceType.BROKER, NODE_ID,
                            [("delegation.token.max.lifetime.ms", "1000", AlterConfigOpType.SET)])
    assert ck_error(read_only) in (KafkaError.INVALID_CONFIG, KafkaError.INVALID_REQUEST)

    create_topic(broker.bootstrap, "whole")
    topic = ConfigResource(ResourceType.TOPIC, "whole")
    topic_configs = admin.describe_configs([topic])[topic].result(timeout=TIMEOUT_S)
    # Kafka 4.2's topic configs Moldau had refused: the codecs' levels, tiered storage, throttles.
    assert {"compression.zstd.level", "local.retention.ms", "remote.storage.enable",
            "leader.replication.throttled.replicas"} <= set(topic_configs)
    values = {n: e.value for n, e in topic_configs.items() if not e.is_read_only and e.value is not None}
    incremental(admin, ResourceType.TOPIC, "whole",
                [(n, v, AlterConfigOpType.SET) for n, v in sorted(values.items())]).result(timeout=TIMEOUT_S)
    assert {n: e.value for n, e in describe_topic(admin, "whole").items() if n in values} == values


# -- DescribeCluster, DescribeLogDirs ------------------------------------------------------------------------


def test_describe_cluster(shared_broker: BrokerProcess, kp_admin: KafkaAdminClient) -> None:
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    cluster = admin.describe_cluster().result(timeout=TIMEOUT_S)
    assert cluster.cluster_id and cluster.controller.id == int(NODE_ID)
    assert [(n.id, n.host, n.port) for n in cluster.nodes] == [(int(NODE_ID), "127.0.0.1", shared_broker.port)]
    described = kp_admin.describe_cluster()
    assert described["cluster_id"] == cluster.cluster_id
    assert described["controller_id"] == int(NODE_ID)
    assert [(b["broker_id"], b["port"]) for b in described["brokers"]] == [(int(NODE_ID), shared_broker.port)]


def test_describe_log_dirs(shared_broker: BrokerProcess, kp_admin: KafkaAdminClient) -> None:
    topic = topic_name("dirs")
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x" * 100, "partition": 0} for _ in range(10)])
    (result,) = kp_admin.describe_log_dirs({topic: [0, 1]})
    assert result["broker"] == int(NODE_ID)
    (log_dir,) = result["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"].endswith("logs")
    assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
    (described,) = [t for t in log_dir["topics"] if t["name"] == topic]
    sizes = {p["partition_index"]: p["partition_size"] for p in described["partitions"]}
    assert sizes[0] > 1000 and sizes[1] == 0
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for p in described["partitions"])
    everything = kp_admin.describe_log_dirs()[0]["log_dirs"][0]["topics"]
    assert topic in {t["name"] for t in everything}


# -- every advertised version --------------------------------------------------------------------------------


def versioned(api_key: int, version: int, **values: Any) -> Any:
    """The request of this version from values named as in the newest one; fields it lacks are dropped.

    Nested entities are given as (class name, values) and built the same way."""
    module = load_payload_module(api_key, version, EntityType.request)

    def build(value: Any) -> Any:
        if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], dict):
            return make(getattr(module, value[0]), **{k: build(v) for k, v in value[1].items()})
        if isinstance(value, list):
            return tuple(build(v) for v in value)
        return value

    request_class = next(getattr(module, n) for n in dir(module) if n.endswith("Request")
                         and getattr(getattr(module, n), "__type__", None) == EntityType.request)
    names = {f.name for f in dataclasses.fields(request_class)}
    return request_class(**{k: build(v) for k, v in values.items() if k in names})


TEN_SECONDS = datetime.timedelta(seconds=10)


def admin_requests(topic: str, version: int) -> dict[int, Any]:
    """One harmless request per API (validate_only wherever there is such a flag)."""
    configs = [("AlterableConfig", {"name": "retention.ms", "value": "1000", "config_operation": 0})]
    topic_resource = {"resource_type": 2, "resource_name": topic}
    return {
        19: dict(topics=[("CreatableTopic", {"name": topic + "-new", "num_partitions": 1, "replication_factor": 1,
                                             "assignments": [], "configs": []})],
                 timeout=TEN_SECONDS, validate_only=True),
        20: dict(topic_names=[topic], topics=[("DeleteTopicState", {"name": topic, "topic_id": None})],
                 timeout=TEN_SECONDS),
        21: dict(topics=[("DeleteRecordsTopic", {"name": topic, "partitions": [
            ("DeleteRecordsPartition", {"partition_index": 0, "offset": 0})]})], timeout=TEN_SECONDS),
        32: dict(resources=[("DescribeConfigsResource", {**topic_resource, "configuration_keys": None})],
                 include_synonyms=True, include_documentation=True),
        33: dict(resources=[("AlterConfigsResource", {**topic_resource, "configs": configs})], validate_only=True),
        35: dict(topics=None),
        37: dict(topics=[("CreatePartitionsTopic", {"name": topic, "count": 2, "assignments": None})],
                 timeout=TEN_SECONDS, validate_only=True),
        44: dict(resources=[("AlterConfigsResource", {**topic_resource, "configs": configs})], validate_only=True),
        60: dict(include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True),
    }


def error_codes(response: Any) -> set[ErrorCode]:
    """Every error code anywhere in a response."""
    found: set[ErrorCode] = set()
    if isinstance(response, tuple):
        for item in response:
            found |= error_codes(item)
    elif dataclasses.is_dataclass(response):
        for field in dataclasses.fields(response):
            value = getattr(response, field.name)
            if isinstance(value, ErrorCode):
                found.add(value)
            else:
                found |= error_codes(value)
    return found


ADMIN_APIS = [api for api in APIS.values() if api.key in (19, 20, 21, 32, 33, 35, 37, 44, 60)]


@pytest.mark.parametrize(("api_key", "version"), [
    (api.key, v) for api in ADMIN_APIS for v in range(api.min_version, api.max_version + 1)
], ids=lambda value: str(value))
def test_every_version_answers(shared_broker: BrokerProcess, api_key: int, version: int) -> None:
    topic = topic_name(f"v{api_key}-{version}")
    create_topic(shared_broker.bootstrap, topic)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x", "partition": 0}])
    request = versioned(api_key, version, **admin_requests(topic, version)[api_key])
    with RawClient(shared_broker.bootstrap) as raw:
        response = raw.request(request)
    assert error_codes(response) == {ErrorCode.none}, response
