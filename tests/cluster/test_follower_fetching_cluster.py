"""Fetch from the closest replica (KIP-392) on a real three-node cluster, one broker per rack (a, b, c), with
Kafka's rack-aware replica selector: librdkafka consumers with `client.rack` read from the follower in their
rack, records reach them without waiting for the next append, raw Fetch requests get Kafka's answers, and a
consumer whose follower dies goes on reading from the leader.

`replica.fetch.wait.max.ms` is long (15 s) on purpose: a follower that learned the high watermark only from
its next records, or when its fetch's wait runs out, would keep a consumer reading from it that long.
"""

from __future__ import annotations

import datetime
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.fetch.v10 import request as fetch_v10
from kio.schema.fetch.v12 import request as fetch_v12

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.replication.replica_selector import RACK_AWARE_SELECTOR
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.raw_client import RawClient
from tests.support.replicated import FAST_FAILOVER

pytestmark = pytest.mark.slow

RACKS = {1: "a", 2: "b", 3: "c"}
# An idle follower fetches every replica.fetch.wait.max.ms, so the ISR's lag allowance must be longer (Kafka
# refuses a shorter one too).
SETTINGS = {**FAST_FAILOVER, "replica.selector.class": RACK_AWARE_SELECTOR, "replica.fetch.wait.max.ms": "15000",
            "replica.lag.time.max.ms": "20000", "offsets.topic.num.partitions": "1",
            "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    racks = {node: {"broker.rack": rack} for node, rack in RACKS.items()}
    with LocalCluster(tmp_path_factory.mktemp("racks"), 3, overrides=SETTINGS, node_overrides=racks) as started:
        started.active_controller(timeout_s=30)
        yield started


def _topic(cluster: LocalCluster) -> tuple[str, int, list[int], int]:
    """A new one-partition topic on all three brokers: (name, leader, followers, leader epoch)."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    name = f"racks-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, 1, 3, config={"min.insync.replicas": "2"})])[name].result(timeout=30)

    def settled() -> Any:
        meta = metadata_at(str(cluster.node(1).kafka_address), [name])
        part = next(p for t in meta.topics if t.name == name for p in t.partitions)
        return part if part.leader_id >= 0 and len(part.isr_nodes) == 3 else None

    part = cluster.wait_until(settled, 30, f"{name} led, with three replicas in sync")
    followers = [b for b in part.replica_nodes if b != part.leader_id]
    return name, part.leader_id, followers, part.leader_epoch


def _produce(bootstrap: str, topic: str, values: list[bytes], acks: str = "all") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0


class _RackConsumer:
    """A librdkafka consumer of one topic that says its rack, and remembers from its statistics which broker it
    fetches the partition from."""

    def __init__(self, bootstrap: str, topic: str, rack: str | None) -> None:
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                "statistics.interval.ms": 200, "stats_cb": self._stats,
                                "fetch.wait.max.ms": 100}
        if rack is not None:
            conf["client.rack"] = rack
        self.topic = topic
        self.fetched_from: set[int] = set()
        self.fetching_from = -1  # in the latest statistics
        self._values: list[bytes] = []
        self.consumer = Consumer(conf)
        self.consumer.subscribe([topic])

    def _stats(self, text: str) -> None:
        partition = json.loads(text).get("topics", {}).get(self.topic, {}).get("partitions", {}).get("0")
        if partition is not None and partition.get("broker", -1) >= 0 and partition.get("fetch_state") == "active":
            self.fetched_from.add(partition["broker"])
            self.fetching_from = partition["broker"]

    def read(self, count: int, timeout_s: float) -> list[bytes]:
        """The next `count` values (fewer if `timeout_s` runs out)."""
        deadline = time.monotonic() + timeout_s
        while len(self._values) < count and time.monotonic() < deadline:
            self._poll()
        values, self._values = self._values[:count], self._values[count:]
        return values

    def wait_fetching_from(self, broker: int, timeout_s: float) -> None:
        """Poll (statistics come through poll too) until the partition is fetched from `broker`."""
        deadline = time.monotonic() + timeout_s
        while broker not in self.fetched_from:
            assert time.monotonic() < deadline, f"not fetching from broker {broker} (only {self.fetched_from})"
            self._poll()

    def watch(self, seconds: float) -> None:
        """Poll for `seconds`, keeping what arrives, so that statistics are gathered."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self._poll()

    def _poll(self) -> None:
        msg = self.consumer.poll(0.1)
        if msg is not None and msg.error() is None:
            self._values.append(msg.value() or b"")

    def close(self) -> None:
        self.consumer.close()


def test_consumers_read_from_the_follower_in_their_rack(cluster: LocalCluster) -> None:
    topic, leader, followers, _ = _topic(cluster)
    values = [f"v{i}".encode() for i in range(200)]
    _produce(cluster.bootstrap, topic, values)
    # One consumer per follower's rack: of the two followers' fetches, the first to report the records cannot
    # move the high watermark (the other has not got them yet), so it must be told of the advance separately.
    consumers = {near: _RackConsumer(cluster.bootstrap, topic, RACKS[near]) for near in followers}
    try:
        for near, consumer in consumers.items():
            assert consumer.read(200, 30) == values
            # Statistics come every 200 ms; the partition is fetched from the follower once the leader named it.
            consumer.wait_fetching_from(near, 10)
        # Records produced now reach them through the followers too, without waiting for a next append.
        started = time.monotonic()
        _produce(cluster.bootstrap, topic, [b"late"])
        for consumer in consumers.values():
            assert consumer.read(1, 10) == [b"late"]
        assert time.monotonic() - started < 6, "a follower's high watermark waited for replica.fetch.wait.max.ms"
        assert all(consumer.fetching_from == near for near, consumer in consumers.items())
    finally:
        for consumer in consumers.values():
            consumer.close()
    assert leader not in followers


def test_consumers_without_a_rack_or_in_the_leaders_rack_read_from_the_leader(cluster: LocalCluster) -> None:
    topic, leader, _, _ = _topic(cluster)
    values = [f"w{i}".encode() for i in range(50)]
    _produce(cluster.bootstrap, topic, values)
    for rack in (None, RACKS[leader], "elsewhere"):
        consumer = _RackConsumer(cluster.bootstrap, topic, rack)
        try:
            assert consumer.read(50, 30) == values
            consumer.watch(0.6)  # three statistics intervals
            assert consumer.fetched_from == {leader}, f"rack {rack}"
        finally:
            consumer.close()


def _fetch_v12(topic: str, offset: int, rack: str, leader_epoch: int = -1) -> Any:
    part = make(fetch_v12.FetchPartition, partition=0, current_leader_epoch=leader_epoch, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)
    return make(fetch_v12.FetchRequest, cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(0),
                min_bytes=1, max_bytes=1 << 24, isolation_level=0, session_id=0, session_epoch=-1,
                topics=(make(fetch_v12.FetchTopic, topic=topic, partitions=(part,)),),
                forgotten_topics_data=(), rack_id=rack)


def _fetch_v10(topic: str) -> Any:
    part = make(fetch_v10.FetchPartition, partition=0, current_leader_epoch=-1, fetch_offset=0, log_start_offset=-1,
                partition_max_bytes=1 << 20)
    return make(fetch_v10.FetchRequest, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1,
                max_bytes=1 << 24, isolation_level=0, session_id=0, session_epoch=-1,
                topics=(make(fetch_v10.FetchTopic, topic=topic, partitions=(part,)),), forgotten_topics_data=())


def _partition(response: Any) -> Any:
    assert response.error_code == ErrorCode.none
    return response.responses[0].partitions[0]


def test_raw_fetches_get_kafkas_answers(cluster: LocalCluster) -> None:
    topic, leader, followers, epoch = _topic(cluster)
    _produce(cluster.bootstrap, topic, [b"one", b"two", b"three"])
    follower = followers[1]
    with RawClient(str(cluster.node(leader).kafka_address)) as at_leader:
        named = _partition(at_leader.request(_fetch_v12(topic, 0, RACKS[follower])))
        assert named.preferred_read_replica == follower and not named.records
        assert named.high_watermark == 3
        # A rack no replica is in, however long (the largest string the protocol carries), is only compared.
        for rack in ("", RACKS[leader], "elsewhere", "r" * 32767):
            own = _partition(at_leader.request(_fetch_v12(topic, 0, rack)))
            assert own.preferred_read_replica == -1 and own.records, f"rack {rack[:20]!r}"
    with RawClient(str(cluster.node(follower).kafka_address)) as at_follower:
        def caught_up() -> Any:
            read = _partition(at_follower.request(_fetch_v12(topic, 0, RACKS[follower], epoch)))
            return read if read.high_watermark == 3 else None

        served = cluster.wait_until(caught_up, 10, "the follower's high watermark at 3")
        assert served.error_code == ErrorCode.none and served.preferred_read_replica == -1 and served.records
        # Beyond the follower's log: empty for a consumer that gave no leader epoch (it may be on stale metadata),
        # OFFSET_OUT_OF_RANGE for one that did (it then asks the leader).
        blind = _partition(at_follower.request(_fetch_v12(topic, 10, "", -1)))
        assert blind.error_code == ErrorCode.none and not blind.records
        informed = _partition(at_follower.request(_fetch_v12(topic, 10, "", epoch)))
        assert informed.error_code == ErrorCode.offset_out_of_range
        stale = _partition(at_follower.request(_fetch_v12(topic, 0, "", epoch - 1 if epoch > 0 else epoch + 5)))
        assert stale.error_code in (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch)
        # Before v11 consumers read only from leaders.
        old = _partition(at_follower.request(_fetch_v10(topic)))
        assert old.error_code == ErrorCode.not_leader_or_follower


def test_a_consumer_whose_follower_dies_reads_on_from_the_leader(cluster: LocalCluster) -> None:
    topic, _, followers, _ = _topic(cluster)
    near = followers[0]
    _produce(cluster.bootstrap, topic, [f"x{i}".encode() for i in range(20)])
    consumer = _RackConsumer(cluster.bootstrap, topic, RACKS[near])
    try:
        assert len(consumer.read(20, 30)) == 20
        consumer.wait_fetching_from(near, 10)
        cluster.node(near).kill()
        try:
            rest = [f"y{i}".encode() for i in range(20)]
            survivor = next(b for b in RACKS if b != near)
            # acks=1: the follower stays in the ISR until its lag allowance (20 s here) runs out.
            _produce(str(cluster.node(survivor).kafka_address), topic, rest, acks="1")
            assert consumer.read(20, 60) == rest
        finally:
            cluster.node(near).start()
    finally:
        consumer.close()
