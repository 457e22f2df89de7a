"""Kafka 4.2's client and operator surface: coherent ApiVersions, DescribeTopicPartitions, UpdateFeatures,
UnregisterBroker and AlterPartitionReassignments v1, through kafka-python's admin client, the `moldau` CLI and
raw requests, on one broker."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kio.schema.alter_partition_reassignments.v1.request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.types import BrokerId, GroupId, TopicName
from kio.schema.unregister_broker.v0.request import UnregisterBrokerRequest
from kio.static.primitive import i8, i32, i32Timedelta

from moldau.net.ports import free_port
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import moldau, ok
from tests.support.raw_client import RawClient

KAFKA_4_2 = (4, 2)
# Kafka advertises the telemetry APIs only with a client-telemetry plugin configured; Moldau always serves them.
TELEMETRY_KEYS = {71, 72}


@pytest.fixture(scope="module")
def surface_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("surface-broker"), {"max.request.partition.size.limit": "5"})
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


@pytest.fixture(scope="module")
def admin(surface_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=surface_broker.bootstrap, request_timeout_ms=20000)
    yield client
    client.close()


# -- ApiVersions: one release ------------------------------------------------------------------------------------

def test_kafka_python_infers_kafka_4_2(admin: KafkaAdminClient) -> None:
    assert admin._client.check_version() == KAFKA_4_2


def test_every_advertised_range_lies_within_kafka_4_2s(surface_broker: BrokerProcess) -> None:
    """kafka-python's record of what a Kafka 4.2 broker advertises is the reference, not our own table."""
    kafka = BROKER_API_VERSIONS[KAFKA_4_2]
    with RawClient(surface_broker.bootstrap) as client:
        response = client.request(ApiVersionsV3(client_software_name="t", client_software_version="1"))
    served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    for key, (low, high) in served.items():
        if key in TELEMETRY_KEYS:
            continue
        assert key in kafka, f"API {key} is not one Kafka 4.2 brokers serve"
        assert kafka[key][0] <= high and low <= high <= kafka[key][1], (key, (low, high), kafka[key])
    assert {1: 18, 2: 11, 35: 4, 45: 1, 57: 2, 64: 0, 75: 0}.items() <= {k: v[1] for k, v in served.items()}.items()


# What a Kafka 4.2 controller listener advertises: the APIs whose message schemas name the "controller" listener,
# at their 4.2 ranges, less what Moldau does not need (ControllerRegistration 70) and capped where Moldau serves
# fewer versions (noted by key).
KAFKA_4_2_CONTROLLER = {
    1: (17, 17),  # Kafka 4-18: a controller listener serves only the quorum's fetch
    17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4), 33: (0, 2),
    36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2), 40: (1, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0),
    49: (0, 1), 50: (0, 0), 51: (0, 0),
    52: (2, 2),  # Kafka 0-2: Moldau nodes speak the KIP-853 versions of the quorum's APIs
    53: (1, 1), 54: (1, 1),  # Kafka 0-1, as 52
    55: (0, 2), 56: (2, 3), 57: (0, 2), 58: (0, 0),
    59: (1, 1),  # Kafka 0-1, as 52
    60: (0, 2), 62: (0, 4), 63: (0, 1), 64: (0, 0), 67: (0, 0), 73: (0, 0), 80: (0, 1), 81: (0, 0), 82: (0, 0),
}


@pytest.fixture(scope="module")
def controller_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    client_port, controller_port = free_port(), free_port()
    proc = BrokerProcess(tmp_path_factory.mktemp("surface-controller"), {
        "listeners": f"PLAINTEXT://127.0.0.1:{client_port},CONTROLLER://127.0.0.1:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
    }, port=client_port)
    proc.start()
    try:
        yield f"127.0.0.1:{controller_port}"
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def test_controller_listener_advertises_kafka_4_2s_controller_apis(controller_bootstrap: str) -> None:
    with RawClient(controller_bootstrap) as client:
        response = client.request(ApiVersionsV3(client_software_name="t", client_software_version="1"))
    served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys}
    assert served == KAFKA_4_2_CONTROLLER


def test_admin_clients_describe_acls_on_a_controller_listener(controller_bootstrap: str) -> None:
    """KIP-919's `kafka-acls --bootstrap-controller` lists ACLs through a controller listener."""
    request = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                                  principal_filter=None, host_filter=None, operation=i8(1),
                                  permission_type=i8(1))
    with RawClient(controller_bootstrap) as client:
        response = client.request(request)
    assert ErrorCode(response.error_code) in (ErrorCode.none, ErrorCode.security_disabled)


# -- DescribeTopicPartitions -------------------------------------------------------------------------------------

def test_describe_topic_partitions_pages_with_a_cursor(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("dtp-a", 4, 1), NewTopic("dtp-b", 3, 1)])
    pages: list[Any] = []
    cursor = None
    while True:
        page = admin.describe_topic_partitions(["dtp-b", "dtp-a"], response_partition_limit=3, cursor=cursor)
        pages.append([(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in page["topics"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [[("dtp-a", [0, 1, 2])], [("dtp-a", [3]), ("dtp-b", [0, 1])], [("dtp-b", [2])]]
    whole = admin.describe_topic_partitions(["dtp-a", "dtp-b", "dtp-none"])
    # The broker's max.request.partition.size.limit (5) caps the client's 2000.
    assert [(t["name"], len(t["partitions"])) for t in whole["topics"]] == [("dtp-a", 4), ("dtp-b", 1)]
    assert whole["next_cursor"] == {"topic_name": "dtp-b", "partition_index": 1}
    leader = whole["topics"][0]["partitions"][0]
    assert leader["leader_id"] == 1 and leader["replica_nodes"] == [1] and leader["isr_nodes"] == [1]


def test_describe_topic_partitions_errors(surface_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("dtp-c", 1, 1)])
    with RawClient(surface_broker.bootstrap) as client:
        unknown = client.request(DescribeTopicPartitionsRequest(
            topics=(TopicRequest(name=TopicName("dtp-c")), TopicRequest(name=TopicName("dtp-missing"))),
            response_partition_limit=i32(10)))
        stray_cursor = client.request(DescribeTopicPartitionsRequest(
            topics=(TopicRequest(name=TopicName("dtp-c")),), response_partition_limit=i32(10),
            cursor=Cursor(topic_name=TopicName("dtp-elsewhere"), partition_index=i32(0))))
        listed: list[tuple[str, int]] = []
        cursor = None
        while True:  # every topic, in name order, a page (of at most 5 partitions, the broker's cap) at a time
            page = client.request(DescribeTopicPartitionsRequest(topics=(), response_partition_limit=i32(100),
                                                                 cursor=cursor))
            listed += [(t.name, p.partition_index) for t in page.topics for p in t.partitions]
            cursor = page.next_cursor
            if cursor is None:
                break
    assert [(t.name, t.error_code.name) for t in unknown.topics] == [("dtp-c", "none"),
                                                                    ("dtp-missing", "unknown_topic_or_partition")]
    assert [(t.name, t.error_code.name) for t in stray_cursor.topics] == [("dtp-c", "invalid_request")]
    assert listed == sorted(listed)
    assert {("dtp-a", 3), ("dtp-b", 2), ("dtp-c", 0)} <= set(listed)


# -- Features ----------------------------------------------------------------------------------------------------

def test_features_describe_upgrade_downgrade(surface_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    bootstrap = surface_broker.bootstrap
    features = admin.describe_features()
    assert features["metadata.version"]["finalized"] == (29, 29)
    assert features["metadata.version"]["supported"] == (7, 29)
    assert features["group.version"]["finalized"] == (1, 1)
    assert "transaction.version" not in features  # supported up to 0 only (no KIP-890 part 2): left out, as Kafka does

    # Invalid updates are refused whole, with Kafka's error.
    refused = moldau(bootstrap, "features", "upgrade", "--feature", "group.version=2")
    assert refused.returncode != 0 and "INVALID_UPDATE_VERSION" in refused.stderr
    refused = moldau(bootstrap, "features", "upgrade", "--feature", "group.version=0")
    assert "INVALID_UPDATE_VERSION" in refused.stderr and "lower level" in refused.stderr
    refused = moldau(bootstrap, "features", "downgrade", "--metadata", "3.9")
    assert "INVALID_UPDATE_VERSION" in refused.stderr and "4.0-IV1" in refused.stderr
    assert "can be downgraded" in ok(bootstrap, "features", "downgrade", "--metadata", "4.1", "--dry-run")

    # group.version 0 turns KIP-848's consumer groups off: their APIs are no longer advertised.
    assert "was downgraded" in ok(bootstrap, "features", "downgrade", "--feature", "group.version=0")
    with RawClient(bootstrap) as client:
        response = client.request(ApiVersionsV4(client_software_name="t", client_software_version="1"))
    assert 68 not in {k.api_key for k in response.api_keys}
    assert "group.version" not in {f.name for f in response.finalized_features}
    with RawClient(bootstrap) as client:  # and refused if sent anyway, as Kafka does
        heartbeat = client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("g"), member_id="", member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)), subscribed_topic_names=(TopicName("t"),),
            topic_partitions=None))
    assert heartbeat.error_code.name == "unsupported_version"
    ok(bootstrap, "features", "downgrade", "--metadata", "4.1")
    assert admin.update_features({"group.version": 1}) == {"group.version": "OK"}

    # The levels are in the metadata log: they survive a restart.
    surface_broker.restart()
    table = ok(bootstrap, "features", "describe")
    assert _row(table, "metadata.version")[3:5] == ["27", "(4.1-IV1)"]
    assert _row(table, "group.version")[3] == "1"
    ok(bootstrap, "features", "upgrade", "--metadata", "4.2")
    assert _row(ok(bootstrap, "features", "describe"), "metadata.version")[3] == "29"


def _row(table: str, feature: str) -> list[str]:
    return next(line.split() for line in table.splitlines() if line.startswith(feature + " "))


# -- UnregisterBroker --------------------------------------------------------------------------------------------

def test_unregister_broker_errors(surface_broker: BrokerProcess) -> None:
    bootstrap = surface_broker.bootstrap
    missing = moldau(bootstrap, "cluster", "unregister", "--id", "7")
    assert missing.returncode != 0 and "BROKER_ID_NOT_REGISTERED" in missing.stderr
    live = moldau(bootstrap, "cluster", "unregister", "--id", "1")
    assert "INVALID_REQUEST" in live.stderr and "shut it down" in live.stderr
    with RawClient(bootstrap) as client:
        response = client.request(UnregisterBrokerRequest(broker_id=BrokerId(-5)))
    assert response.error_code.name == "broker_id_not_registered"


# -- AlterPartitionReassignments v1 ------------------------------------------------------------------------------

def test_reassignment_may_forbid_a_replication_factor_change(surface_broker: BrokerProcess,
                                                               admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("apr-rf", 2, 1)])
    target = (BrokerId(1), BrokerId(1))
    request = AlterPartitionReassignmentsRequest(
        timeout=i32Timedelta.parse(timedelta(seconds=30)), allow_replication_factor_change=False,
        topics=(ReassignableTopic(name=TopicName("apr-rf"), partitions=(
            ReassignablePartition(partition_index=i32(0), replicas=target),
            ReassignablePartition(partition_index=i32(1), replicas=(BrokerId(1),)))),))
    with RawClient(surface_broker.bootstrap) as client:
        response = client.request(request)
    assert not response.allow_replication_factor_change
    (topic,) = response.responses
    assert [(p.partition_index, p.error_code.name) for p in topic.partitions] == [
        (0, "invalid_replication_factor"), (1, "none")]
