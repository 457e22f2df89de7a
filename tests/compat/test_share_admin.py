"""Administering share groups against a real broker process: DescribeShareGroupOffsets, AlterShareGroupOffsets and
DeleteShareGroupOffsets (raw requests; confluent-kafka's AdminClient has no share-group offset methods yet),
group configs (GROUP config resources) taking effect on confluent-kafka ShareConsumers, the dead-letter topic,
and `moldau groups` on share groups.

One broker for the module, with `share.auto.offset.reset=earliest`, a short record lock and session timeout, and
low group-config bounds so the tests can set small values. Every test uses its own topics and groups.
"""

from __future__ import annotations

import datetime
import json
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_share_group_offsets.v0.request import (
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from tests.compat.test_cli import assert_clean_error, moldau, ok
from tests.support.broker_process import BrokerProcess
from tests.support.polling import wait_until
from tests.support.raw_client import RawClient

GROUP = i8(32)
SET, DELETE = i8(0), i8(1)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("share-admin"), {
        "share.auto.offset.reset": "earliest",
        "group.share.record.lock.duration.ms": "2000",
        "group.share.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": "6000",
        "group.share.min.session.timeout.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "100",
    })
    proc.start()
    yield proc
    try:
        proc.stop()
    finally:
        proc.cleanup()


@pytest.fixture(autouse=True)
def no_internal_error(broker: BrokerProcess) -> Iterator[None]:
    yield
    assert "internal error" not in broker.log_path.read_text(), broker.log_tail()


def new_topic(broker: BrokerProcess, values: list[bytes], partitions: int = 1) -> str:
    name = f"admin-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    produce(broker, name, values)
    return name


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, key=b"k-" + value, value=value, headers=[("origin", b"test")])
    assert producer.flush(10) == 0


def share_consumer(broker: BrokerProcess, group: str, topic: str, **config: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **config})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer: ShareConsumer, done: Any, timeout_s: float = 30.0, on_message: Any = None) -> list[Any]:
    collected: list[Any] = []

    def step() -> bool:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            collected.append(message)
            if on_message is not None:
                on_message(message)
        return bool(done(collected))

    wait_until(step, timeout_s, "the share consumer never got what it waited for")
    return collected


def request(broker: BrokerProcess, body: Any) -> Any:
    with RawClient(broker.bootstrap) as client:
        return client.request(body)


def describe_offsets(broker: BrokerProcess, group_id: str) -> Any:
    (group,) = request(broker, DescribeShareGroupOffsetsRequest(groups=(
        DescribeShareGroupOffsetsRequestGroup(group_id=GroupId(group_id), topics=None),))).groups
    return group


def alter_offsets(broker: BrokerProcess, group_id: str, topic: str, offsets: dict[int, int]) -> Any:
    return request(broker, AlterShareGroupOffsetsRequest(group_id=GroupId(group_id), topics=(
        AlterShareGroupOffsetsRequestTopic(topic_name=TopicName(topic), partitions=tuple(
            AlterShareGroupOffsetsRequestPartition(partition_index=i32(p), start_offset=i64(o))
            for p, o in offsets.items())),)))


def alter_group_configs(broker: BrokerProcess, group_id: str, configs: Mapping[str, str | None]) -> Any:
    (result,) = request(broker, IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=GROUP, resource_name=group_id, configs=tuple(
            AlterableConfig(name=k, config_operation=SET if v is not None else DELETE, value=v)
            for k, v in configs.items())),), validate_only=False)).responses
    return result


def group_configs(broker: BrokerProcess, group_id: str) -> dict[str, tuple[str | None, int]]:
    (result,) = request(broker, DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=GROUP, resource_name=group_id, configuration_keys=None),))).results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: (c.value, c.config_source) for c in result.configs}


def offsets_set(response: Any) -> bool:
    return bool(response.error_code == ErrorCode.none
                and all(p.error_code == ErrorCode.none for t in response.responses for p in t.partitions))


def empty_after_close(broker: BrokerProcess, group_id: str) -> None:
    """A closed ShareConsumer leaves its group: offsets may change once it is gone."""
    def empty() -> bool:
        response = alter_offsets(broker, group_id, "no-such-topic", {})
        return bool(response.error_code == ErrorCode.none)

    wait_until(empty, 15.0, f"share group {group_id} never became empty")


def test_group_configs_are_described_validated_and_stored(broker: BrokerProcess) -> None:
    before = group_configs(broker, "configured")
    assert before["share.delivery.count.limit"] == ("5", 5)  # the broker's default (DEFAULT_CONFIG)
    assert before["share.isolation.level"] == ("read_uncommitted", 5)
    assert {"consumer.session.timeout.ms", "share.record.lock.duration.ms", "share.auto.offset.reset",
            "errors.deadletterqueue.topic.name"} <= before.keys()

    done = alter_group_configs(broker, "configured", {"share.delivery.count.limit": "4",
                                                      "share.auto.offset.reset": "by_duration:PT1H",
                                                      "share.isolation.level": "read_committed"})
    assert done.error_code == ErrorCode.none, done.error_message
    after = group_configs(broker, "configured")
    assert after["share.delivery.count.limit"] == ("4", 8)  # GROUP_CONFIG
    assert after["share.auto.offset.reset"] == ("by_duration:PT1H", 8)
    assert after["share.isolation.level"] == ("read_committed", 8)

    for bad, words in (({"share.delivery.count.limit": "11"}, "group.share.max.delivery.count.limit"),
                       ({"share.auto.offset.reset": "by_duration:yesterday"}, "ISO-8601"),
                       ({"share.isolation.level": "sometimes"}, "read_committed"),
                       ({"share.heartbeat.interval.ms": "5000", "share.session.timeout.ms": "4000"},
                        "must be greater than"),
                       ({"errors.deadletterqueue.topic.name": "__internal"}, "'__'"),
                       ({"no.such.config": "1"}, "Unknown group config")):
        refused = alter_group_configs(broker, "configured", bad)
        assert refused.error_code == ErrorCode.invalid_config and words in refused.error_message, refused
    assert group_configs(broker, "configured")["share.delivery.count.limit"] == ("4", 8)  # unchanged

    assert alter_group_configs(broker, "configured", {"share.delivery.count.limit": None}).error_code == 0
    assert group_configs(broker, "configured")["share.delivery.count.limit"] == ("5", 5)


def test_offsets_are_described_altered_only_when_empty_and_deleted(broker: BrokerProcess) -> None:
    values = [f"v{i}".encode() for i in range(10)]
    topic = new_topic(broker, values)
    group = f"offsets-{uuid.uuid4().hex[:6]}"
    explicit = {"share.acknowledgement.mode": "explicit", "max.poll.records": 4}
    with share_consumer(broker, group, topic, **explicit) as consumer:
        got = poll_until(consumer, lambda got: len(got) >= 1)
        for message in got:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        accepted = len(got)
        (partition,) = wait_until(lambda: [p for t in describe_offsets(broker, group).topics for p in t.partitions
                                           if p.start_offset == accepted] or None, 15.0,
                                  "the start offset never moved past the accepted records")
        assert partition.lag == len(values) - accepted and partition.error_code == ErrorCode.none
        busy = alter_offsets(broker, group, topic, {0: 0})
        assert busy.error_code == ErrorCode.non_empty_group
    empty_after_close(broker, group)

    moved = alter_offsets(broker, group, topic, {0: 7, 5: 1})
    assert moved.error_code == ErrorCode.none
    errors = {p.partition_index: p.error_code for t in moved.responses for p in t.partitions}
    assert errors == {0: ErrorCode.none, 5: ErrorCode.unknown_topic_or_partition}
    (described,) = describe_offsets(broker, group).topics
    assert [(p.partition_index, p.start_offset, p.lag) for p in described.partitions] == [(0, 7, 3)]
    with share_consumer(broker, group, topic) as consumer:
        again = poll_until(consumer, lambda got: len(got) >= 3)
    assert sorted(m.value() for m in again) == values[7:]  # delivered afresh from the new start
    empty_after_close(broker, group)

    # Forgotten: the group starts over from share.auto.offset.reset, here its own `latest`.
    assert alter_group_configs(broker, group, {"share.auto.offset.reset": "latest"}).error_code == 0
    deleted = request(broker, DeleteShareGroupOffsetsRequest(group_id=GroupId(group), topics=(
        DeleteShareGroupOffsetsRequestTopic(topic_name=TopicName(topic)),)))
    assert deleted.error_code == ErrorCode.none and deleted.responses[0].error_code == ErrorCode.none
    assert not [p for t in describe_offsets(broker, group).topics for p in t.partitions]
    with share_consumer(broker, group, topic) as consumer:
        # `latest`: none of the old records; a record produced once the group has started is delivered.
        def started() -> bool:
            assert not consumer.poll(0.3)
            return any(t.partitions for t in describe_offsets(broker, group).topics)

        wait_until(started, 15.0, "the group never started on the topic again",
                   report=lambda: repr(describe_offsets(broker, group)))
        produce(broker, topic, [b"fresh"])
        fresh = poll_until(consumer, lambda got: len(got) >= 1)
    assert [m.value() for m in fresh] == [b"fresh"]


def test_offset_requests_refuse_what_is_not_a_share_group(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"x"])
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "plain-consumers",
                        "auto.offset.reset": "earliest"})
    try:
        classic.subscribe([topic])
        wait_until(lambda: classic.poll(0.5) is not None, 30.0, "the classic consumer never got its record")
        refused = alter_offsets(broker, "plain-consumers", topic, {0: 0})
        described = describe_offsets(broker, "plain-consumers")
    finally:
        classic.close()
    assert refused.error_code == ErrorCode.group_id_not_found
    assert described.error_code == ErrorCode.group_id_not_found
    assert describe_offsets(broker, "never-seen").error_code == ErrorCode.group_id_not_found
    unknown = alter_offsets(broker, "preset", "no-such-topic", {0: 3})
    assert unknown.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def dead_letters(broker: BrokerProcess, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"dlq-reader-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest"})
    got: list[Any] = []
    try:
        consumer.subscribe([topic])

        def step() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message)
            return len(got) >= count

        wait_until(step, 30.0, f"the dead-letter topic never got {count} records")
    finally:
        consumer.close()
    return got


def test_records_given_up_on_go_to_the_dead_letter_topic(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"poison", b"rejected", b"fine"])
    dlq = new_topic(broker, [])
    group = f"dlq-{uuid.uuid4().hex[:6]}"
    done = alter_group_configs(broker, group, {"share.delivery.count.limit": "2",
                                               "errors.deadletterqueue.topic.name": dlq,
                                               "errors.deadletterqueue.copy.record.enable": "true"})
    assert done.error_code == ErrorCode.none, done.error_message
    deliveries: dict[bytes, int] = {}

    with share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"}) as consumer:
        def handle(message: Any) -> None:
            deliveries[message.value()] = deliveries.get(message.value(), 0) + 1
            kind = {b"poison": AcknowledgeType.RELEASE, b"rejected": AcknowledgeType.REJECT}
            consumer.acknowledge(message, kind.get(message.value(), AcknowledgeType.ACCEPT))

        poll_until(consumer, lambda _: deliveries.get(b"poison") == 2 and b"fine" in deliveries, on_message=handle)
        consumer.commit_sync()
        letters = dead_letters(broker, dlq, 2)
    assert deliveries[b"poison"] == 2  # the group's own limit, not the broker's 5
    by_value = {m.value(): m for m in letters}
    assert by_value.keys() == {b"poison", b"rejected"}
    poison = dict(by_value[b"poison"].headers())
    assert by_value[b"poison"].key() == b"k-poison" and poison["origin"] == b"test"
    assert poison["__dlq.errors.topic"] == topic.encode() and poison["__dlq.errors.partition"] == b"0"
    assert poison["__dlq.errors.offset"] == b"0" and poison["__dlq.errors.group"] == group.encode()
    assert poison["__dlq.errors.delivery.count"] == b"2"
    assert poison["__dlq.errors.message"] == b"Offset delivery count exceeded the threshold."
    assert dict(by_value[b"rejected"].headers())["__dlq.errors.message"] == b"Offset rejected by client."


def test_moldau_groups_lists_describes_and_resets_share_groups(broker: BrokerProcess) -> None:
    values = [f"c{i}".encode() for i in range(6)]
    topic = new_topic(broker, values)
    group = f"cli-{uuid.uuid4().hex[:6]}"
    with share_consumer(broker, group, topic, **{"client.id": "cli-member"}) as consumer:
        poll_until(consumer, lambda got: len(got) >= 6)
        consumer.poll(0.5)  # acknowledges the records of the last poll
        listed = ok(broker, "groups", "list").out
        assert [group, "share", "Stable"] in [line.split() for line in listed.splitlines()]

        def described_at_end() -> str | None:
            out = ok(broker, "groups", "describe", group).out
            # TOPIC PARTITION START-OFFSET IN-FLIGHT LOG-END-OFFSET LAG: every record acknowledged
            return out if [topic, "0", "6", "0", "6", "0"] in [line.split() for line in out.splitlines()] else None

        described = wait_until(described_at_end, 15.0, "describe never showed the start offset at 6")
        assert "Type:" in described and "share" in described and "cli-member" in described
        assert f"{topic}:0" in described  # the member's assignment
        refused = moldau(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
        assert_clean_error(refused, "empty")
    empty_after_close(broker, group)
    plan = ok(broker, "groups", "reset-offsets", group, "--all-topics", "--to-offset", "2")
    assert [topic, "0", "6", "2"] in [line.split() for line in plan.out.splitlines()]
    (unchanged,) = describe_offsets(broker, group).topics
    assert unchanged.partitions[0].start_offset == 6  # a dry run
    ok(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
    (reset,) = describe_offsets(broker, group).topics
    assert reset.partitions[0].start_offset == 0 and reset.partitions[0].lag == 6
    with share_consumer(broker, group, topic) as consumer:
        again = poll_until(consumer, lambda got: len(got) >= 6)
    assert sorted(m.value() for m in again) == values


def share_partition_json(broker: BrokerProcess, group: str) -> dict[str, Any]:
    """The one share-partition `moldau groups describe -o json` shows for the group."""
    (described,) = json.loads(ok(broker, "groups", "describe", group, "--output", "json").out)
    assert described["type"] == "share"
    (partition,) = described["partitions"]
    return dict(partition)


def described_as(broker: BrokerProcess, group: str, start: int, in_flight: int, lag: int) -> None:
    """Wait until describe shows this start offset, in-flight count and lag (acknowledgements committed by the
    client may still be on their way to the broker)."""
    seen: list[tuple[int, int, int]] = []

    def shown() -> bool:
        p = share_partition_json(broker, group)
        seen.append((p["start_offset"], p["in_flight"], p["lag"]))
        return seen[-1] == (start, in_flight, lag)

    wait_until(shown, 15.0, lambda: f"describe showed {seen[-1:]}, not {(start, in_flight, lag)}")


def test_moldau_groups_describe_counts_records_in_flight(broker: BrokerProcess) -> None:
    """Records acquired and not acknowledged are in flight; acknowledging some moves the start past them and the
    count falls; a released record stays in flight (available again, delivered once) until it is acknowledged."""
    values = [f"f{i}".encode() for i in range(10)]
    topic = new_topic(broker, values)
    group = f"inflight-{uuid.uuid4().hex[:6]}"
    # Locks that outlast a loaded machine's pauses: an acknowledgement after its lock expired would be refused.
    assert alter_group_configs(broker, group, {"share.record.lock.duration.ms": "60000"}).error_code == 0
    with share_consumer(broker, group, topic, **{"share.acknowledgement.mode": "explicit"}) as consumer:
        got = poll_until(consumer, lambda got: len(got) >= 10)
        assert sorted(m.offset() for m in got) == list(range(10))
        held = share_partition_json(broker, group)
        assert (held["start_offset"], held["in_flight"], held["log_end_offset"], held["lag"]) == (0, 10, 10, 10)
        by_offset = {m.offset(): m for m in got}
        for offset in range(4):
            consumer.acknowledge(by_offset[offset], AcknowledgeType.ACCEPT)
        consumer.acknowledge(by_offset[4], AcknowledgeType.RELEASE)
        consumer.commit_sync()
        # 0-3 accepted: the start moves to 4; 4 released (available, delivered once) and 5-9 held: 6 in flight.
        described_as(broker, group, start=4, in_flight=6, lag=6)
        for offset in range(5, 10):
            consumer.acknowledge(by_offset[offset], AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        described_as(broker, group, start=4, in_flight=1, lag=1)  # only the released record
        again = poll_until(consumer, lambda got: len(got) >= 1)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(4, 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        described_as(broker, group, start=10, in_flight=0, lag=0)


def test_moldau_groups_configs_shows_and_changes_group_configs(broker: BrokerProcess) -> None:
    changed = ok(broker, "groups", "configs", "cli-configured", "--config", "share.record.lock.duration.ms=20000",
                 "--config", "share.auto.offset.reset=earliest").out
    rows = [line.split() for line in changed.splitlines()]
    assert ["share.record.lock.duration.ms", "20000", "GROUP_CONFIG"] in rows
    assert ["share.delivery.count.limit", "5", "DEFAULT_CONFIG"] in rows
    refused = moldau(broker, "groups", "configs", "cli-configured", "--config", "share.record.lock.duration.ms=10")
    assert_clean_error(refused, "INVALID_CONFIG", "share.record.lock.duration.ms")
    reverted = ok(broker, "groups", "configs", "cli-configured", "--delete-config", "share.record.lock.duration.ms").out
    assert ["share.record.lock.duration.ms", "2000", "STATIC_BROKER_CONFIG"] in [
        line.split() for line in reverted.splitlines()]


def test_group_configs_reach_consumer_and_share_group_heartbeats(broker: BrokerProcess) -> None:
    """consumer.heartbeat.interval.ms and share.heartbeat.interval.ms of one group are what its members are told."""
    topic = new_topic(broker, [])
    assert alter_group_configs(broker, "kip848-configured", {"consumer.heartbeat.interval.ms": "7000"}).error_code == 0
    join = ConsumerGroupHeartbeatRequest(
        group_id=GroupId("kip848-configured"), member_id="", member_epoch=i32(0), instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        subscribed_topic_names=(TopicName(topic),), server_assignor=None,
        topic_partitions=())
    with RawClient(broker.bootstrap) as client:
        joined = wait_until(lambda: (r := client.request(join)).error_code != ErrorCode.coordinator_not_available
                            and r, 30.0, "the group coordinator")
        assert joined.error_code == ErrorCode.none, joined.error_message
        assert joined.heartbeat_interval == datetime.timedelta(milliseconds=7000)
        assert alter_group_configs(broker, "kip848-configured",
                                   {"consumer.heartbeat.interval.ms": "9000"}).error_code == 0
        again = client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("kip848-configured"), member_id=joined.member_id, member_epoch=joined.member_epoch,
            instance_id=None, rack_id=None, rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=None, server_assignor=None, topic_partitions=None))
        assert again.heartbeat_interval == datetime.timedelta(milliseconds=9000)  # no restart needed
        client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("kip848-configured"), member_id=joined.member_id, member_epoch=i32(-1), instance_id=None,
            rack_id=None, rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
            subscribed_topic_names=None,
            server_assignor=None, topic_partitions=None))

    assert alter_group_configs(broker, "share-configured", {"share.heartbeat.interval.ms": "800"}).error_code == 0
    with RawClient(broker.bootstrap) as client:
        share_join = ShareGroupHeartbeatRequest(group_id=GroupId("share-configured"), member_id=uuid.uuid4().hex[:22],
                                                member_epoch=i32(0), rack_id=None,
                                                subscribed_topic_names=(TopicName(topic),))
        answered = client.request(share_join)
    assert answered.error_code == ErrorCode.none and answered.heartbeat_interval == datetime.timedelta(milliseconds=800)


def test_group_configs_and_reset_offsets_survive_a_restart(broker: BrokerProcess) -> None:
    """Group configs are in the metadata log and a reset in __share_group_state: both are there after a restart.
    Last in the module: it restarts the shared broker."""
    topic = new_topic(broker, [b"a", b"b", b"c", b"d"])
    group = f"restart-{uuid.uuid4().hex[:6]}"
    assert alter_group_configs(broker, group, {"share.delivery.count.limit": "3"}).error_code == 0
    wait_until(lambda: offsets_set(alter_offsets(broker, group, topic, {0: 2})), 30.0,
               "the coordinators (their topics are created on first use)")
    broker.restart()
    assert group_configs(broker, group)["share.delivery.count.limit"] == ("3", 8)
    (described,) = wait_until(lambda: describe_offsets(broker, group).topics if describe_offsets(
        broker, group).error_code == ErrorCode.none else None, 30.0, "the share coordinator after the restart")
    assert [(p.partition_index, p.start_offset) for p in described.partitions] == [(0, 2)]
    with share_consumer(broker, group, topic) as consumer:
        got = poll_until(consumer, lambda got: len(got) >= 2)
    assert sorted(m.value() for m in got) == [b"c", b"d"]
