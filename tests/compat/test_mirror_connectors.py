"""MirrorMaker 2's connectors on Moldau's Connect runtime, between two real brokers: the source connector
copies records (key, value, headers, timestamp, partition) into `<alias>.<topic>` and picks up new topics and
partitions; the checkpoint connector translates a consumer group's offsets without ever skipping a record and
commits them to the target's idle group; the heartbeat connector beats."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.mirror.records import Checkpoint, Heartbeat
from tests.support.broker_process import BrokerProcess
from tests.support.clients import RECENT_TIMESTAMP_MS
from tests.support.connect_worker import WorkerProcess, wait_for
from tests.support.messages import offset_of, partition_of

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


# Brokers with an authorizer, so topic ACLs can be copied; PLAINTEXT clients are User:ANONYMOUS, a super user.
SECURED = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "super.users": "User:ANONYMOUS"}


def _broker(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[BrokerProcess]:
    broker = BrokerProcess(tmp_path_factory.mktemp(name), overrides=SECURED)
    broker.start()
    yield broker
    try:
        broker.stop()
    finally:
        broker.cleanup()


@pytest.fixture(scope="module")
def source_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory, "mirror-east")


@pytest.fixture(scope="module")
def other_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    yield from _broker(tmp_path_factory, "mirror-west")


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)


def _produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions,
                         headers=[("trace", f"t{i}".encode())], timestamp=RECENT_TIMESTAMP_MS + i)
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages: list[Any] = []
    try:
        def enough() -> bool:
            messages.extend(m for m in consumer.consume(500, 0.5) if m.error() is None)
            return len(messages) >= expected
        wait_for(enough, 60, f"{expected} records in {topic}")
    finally:
        consumer.close()
    return messages


def _record_count(bootstrap: str, topic: str) -> int:
    """How many records `topic` holds (its partitions' end offsets: nothing is ever deleted here)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-count"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def _mirror_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", "mirror", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def _connector(name: str, cls: str, source: BrokerProcess, target: BrokerProcess, **extra: str) -> dict[str, str]:
    return {"name": name, "connector.class": cls, "source.cluster.alias": "east", "target.cluster.alias": "west",
            "source.cluster.bootstrap.servers": source.bootstrap,
            "target.cluster.bootstrap.servers": target.bootstrap,
            "key.converter": BYTES, "value.converter": BYTES, "replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1", "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1", **extra}


def test_mirror_source_checkpoint_and_heartbeat(source_broker: BrokerProcess, shared_broker: BrokerProcess,
                                                tmp_path: Path) -> None:
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    _create(source_broker.bootstrap, topic, 3)
    _produce(source_broker.bootstrap, topic, 300, 3)
    # A group on the source that read part of the topic.
    group = f"billing-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": source_broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition(topic, 0, 40), TopicPartition(topic, 1, 100), TopicPartition(topic, 2, 0)],
                    asynchronous=False)
    consumer.close()

    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap)
    worker.start()
    try:
        connectors = [
            _connector("mirror-source", "MirrorSourceConnector", source_broker, shared_broker, topics=f"{topic}.*",
                       **{"tasks.max": "2", "refresh.topics.interval.seconds": "2"}),
            _connector("mirror-checkpoint", "org.apache.kafka.connect.mirror.MirrorCheckpointConnector",
                       source_broker, shared_broker, topics=f"{topic}.*", groups=group,
                       **{"emit.checkpoints.interval.seconds": "0.5", "sync.group.offsets.enabled": "true",
                          "sync.group.offsets.interval.seconds": "0.5"}),
            _connector("mirror-heartbeat", "MirrorHeartbeatConnector", source_broker, shared_broker,
                       **{"emit.heartbeats.interval.seconds": "0.2"}),
        ]
        for config in connectors:
            status, body = worker.request("POST", "/connectors", {"name": config["name"], "config": config})
            assert status == 201, body

        remote = f"east.{topic}"
        copied = _read_all(shared_broker.bootstrap, remote, 3, 300)
        assert len(copied) == 300 and _record_count(shared_broker.bootstrap, remote) == 300  # no restart: once
        for message in copied:
            i = int(message.key()[1:])
            assert message.partition() == i % 3
            assert message.value() == f"v{i}".encode()
            assert message.headers() == [("trace", f"t{i}".encode())]
            assert message.timestamp()[1] == RECENT_TIMESTAMP_MS + i
        # The remote topic is new, so each record sits at the same offset as upstream (key k<i>: partition
        # i % 3, upstream offset i // 3): order is kept, and offsets translate one to one.
        assert all(m.offset() == int(m.key()[1:]) // 3 for m in copied)

        # Checkpoints: the group's offsets, translated, never past the record the group is to read next.
        def checkpoints() -> dict[tuple[str, int], Checkpoint]:
            found = {}
            for message in _read_all(shared_broker.bootstrap, "east.checkpoints.internal", 1, 1):
                checkpoint = Checkpoint.from_record(message.key(), message.value())
                if checkpoint.group == group:
                    found[(checkpoint.topic, checkpoint.partition)] = checkpoint
            return found
        # Once the mirror has committed, the newest offset syncs are out: a group at the end of a partition then
        # translates exactly to its end (before that, it may translate to an earlier sync, which is also safe).
        latest = wait_for(lambda: (c := checkpoints()) and len(c) == 3 and c[(remote, 1)].downstream_offset == 100
                          and c, 60, "a checkpoint per partition")
        committed = {0: 40, 1: 100, 2: 0}
        for (remote_topic, partition), checkpoint in latest.items():
            assert remote_topic == remote
            assert checkpoint.upstream_offset == committed[partition]
            assert 0 <= checkpoint.downstream_offset <= checkpoint.upstream_offset, checkpoint

        # The target's idle group got the translated offsets.
        admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})

        def target_offsets() -> dict[int, int]:
            result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
            return {tp.partition: tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}
        synced = wait_for(lambda: (o := target_offsets()) and len(o) == 3 and o, 60, "offsets synced to the target")
        assert synced == {p: latest[(remote, p)].downstream_offset for p in range(3)}

        # `moldau mirror failover` prints the same offsets, commits them, and refuses while the group is active.
        mm2 = tmp_path / "mm2.properties"
        mm2.write_text(f"clusters = east, west\neast.bootstrap.servers = {source_broker.bootstrap}\n"
                       f"west.bootstrap.servers = {shared_broker.bootstrap}\neast->west.enabled = true\n")
        printed = _mirror_cli("failover", str(mm2), "--group", group, "--execute")
        assert printed.returncode == 0, printed.stderr
        assert sorted(printed.stdout.splitlines()) == sorted(
            f"{remote}\t{p}\t{latest[(remote, p)].downstream_offset}" for p in range(3))
        # The group goes on at the target from there: nothing it had not read on the source is skipped.
        resumed = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group,
                            "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        resumed.subscribe([remote])
        first: dict[int, int] = {}
        try:
            def every_partition_started() -> bool:
                for m in resumed.consume(100, 0.5):
                    if m.error() is None:
                        first.setdefault(partition_of(m), offset_of(m))
                return {0, 2} <= set(first)
            wait_for(every_partition_started, 60, "the failed-over group to read")
            assert first[0] <= committed[0] and first[2] <= committed[2], first
            assert 1 not in first  # the group had read all of partition 1 on the source
            refused = _mirror_cli("failover", str(mm2), "--group", group, "--execute")
            assert refused.returncode == 1 and "active members" in refused.stderr, refused.stderr
        finally:
            resumed.close()

        # New partitions and new topics are picked up.
        source_admin = AdminClient({"bootstrap.servers": source_broker.bootstrap})
        source_admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
        second = f"{topic}-more"
        _create(source_broker.bootstrap, second, 1)
        _produce(source_broker.bootstrap, second, 10, 1)
        assert len(_read_all(shared_broker.bootstrap, f"east.{second}", 1, 10)) == 10
        wait_for(lambda: len(admin.list_topics(topic=remote, timeout=10).topics[remote].partitions) == 4, 60,
                 "the remote topic to grow to 4 partitions")

        # Heartbeats on the target.
        beats = [Heartbeat.from_record(m.key(), m.value())
                 for m in _read_all(shared_broker.bootstrap, "heartbeats", 1, 2)]
        assert {(b.source_alias, b.target_alias) for b in beats} == {("east", "west")}
    finally:
        worker.stop()


def _acls(bootstrap: str, topic: str) -> set[tuple[str, str, str]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = admin.describe_acls(AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                                                 # The stubs type principal and host as str; None matches any.
                                                 None, None,  # type: ignore[arg-type]
                                                 AclOperation.ANY, AclPermissionType.ANY)).result(30)
    return {(b.principal, b.operation.name, b.permission_type.name) for b in found}


def test_a_transform_on_the_source_connector_sees_every_record(source_broker: BrokerProcess,
                                                                shared_broker: BrokerProcess, tmp_path: Path) -> None:
    """With a transform configured, records take the ordinary Connect path (not the pass-through one): here a
    Filter drops the records that carry a `drop` header, and the rest arrive unchanged."""
    topic = f"filtered-{uuid.uuid4().hex[:6]}"
    _create(source_broker.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": source_broker.bootstrap})
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                         headers=[("drop", b"1")] if i % 2 else [("keep", b"1")])
    assert producer.flush(30) == 0
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap)
    worker.start()
    try:
        config = _connector("mirror-filtered", "MirrorSourceConnector", source_broker, shared_broker, topics=topic,
                            **{"transforms": "skip", "transforms.skip.type": "Filter",
                               "transforms.skip.predicate": "dropped", "predicates": "dropped",
                               "predicates.dropped.type": "HasHeaderKey", "predicates.dropped.name": "drop"})
        status, body = worker.request("POST", "/connectors", {"name": config["name"], "config": config})
        assert status == 201, body
        copied = _read_all(shared_broker.bootstrap, f"east.{topic}", 1, 10)
        assert [(m.key(), m.value(), m.headers()) for m in copied] == [
            (f"k{i}".encode(), f"v{i}".encode(), [("keep", b"1")]) for i in range(0, 20, 2)]
    finally:
        worker.stop()


def test_active_active_copies_each_record_once_each_way_and_topic_acls(
        source_broker: BrokerProcess, other_broker: BrokerProcess, tmp_path: Path) -> None:
    east, west = source_broker, other_broker
    topic = f"ledger-{uuid.uuid4().hex[:6]}"
    for broker in (east, west):
        _create(broker.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": east.bootstrap})
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                       AclPermissionType.ALLOW)
            for principal, op in (("User:alice", AclOperation.READ), ("User:alice", AclOperation.WRITE),
                                  ("User:bob", AclOperation.ALL))]
    for future in admin.create_acls(acls).values():
        future.result(30)

    # One worker per direction, each writing to its target; the topic filter lets remote topics through, so
    # only the cycle rule keeps west.<topic> on east from going back to west.
    workers = []
    for source, target, source_alias, target_alias in ((east, west, "east", "west"), (west, east, "west", "east")):
        worker = WorkerProcess(tmp_path / f"to-{target_alias}", target.bootstrap)
        worker.start()
        workers.append(worker)
        config = {**_connector(f"{source_alias}-to-{target_alias}", "MirrorSourceConnector", source, target,
                               topics=f".*{topic}", **{"refresh.topics.interval.seconds": "1",
                                                        "sync.topic.acls.interval.seconds": "1"}),
                  "source.cluster.alias": source_alias, "target.cluster.alias": target_alias}
        status, body = worker.request("POST", "/connectors", {"name": config["name"], "config": config})
        assert status == 201, body
    try:
        _produce(east.bootstrap, topic, 100, 2)
        _produce(west.bootstrap, topic, 60, 2)
        assert len(_read_all(west.bootstrap, f"east.{topic}", 2, 100)) == 100
        assert len(_read_all(east.bootstrap, f"west.{topic}", 2, 60)) == 60
        # ACLs: READ copied, ALL turned into READ, WRITE left out (only the mirror writes a remote topic).
        wait_for(lambda: _acls(west.bootstrap, f"east.{topic}") == {("User:alice", "READ", "ALLOW"),
                                                                    ("User:bob", "READ", "ALLOW")},
                 30, "the topic ACLs on the remote topic")
        time.sleep(3)  # several refresh rounds: a cycle would have shown by now
        for broker, looped in ((east, f"east.west.{topic}"), (west, f"west.east.{topic}")):
            names = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=10).topics
            assert looped not in names
        assert _record_count(west.bootstrap, f"east.{topic}") == 100  # still once each
        assert _record_count(east.bootstrap, f"west.{topic}") == 60
    finally:
        for worker in workers:
            worker.stop()
