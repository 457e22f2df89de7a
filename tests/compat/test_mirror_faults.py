"""The mirror source connector through faults between real brokers: a network partition between the mirror
and the source cluster (a proxy that black-holes the link) heals and replication catches up; the source
cluster goes down and comes back and replication goes on. In both, every record reaches the target exactly
once (the worker itself never crashed)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from moldau.net.ports import free_port
from tests.support.broker_process import BrokerProcess
from tests.support.connect_worker import WorkerProcess, wait_for
from tests.support.mirror import Load, copied, fresh_topic
from tests.support.proxy import LinkProxy

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


class Source:
    """A source broker with a second listener, MIRROR, advertised at a proxy's port: the mirror reaches the
    broker only through the proxy, while the test's own clients use the direct listener."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.mirror_port = free_port()
        self.proxy = LinkProxy(0, "127.0.0.1", self.mirror_port)
        port = free_port()
        self.broker = BrokerProcess(directory, port=port, overrides={
            "listeners": f"PLAINTEXT://127.0.0.1:{port},MIRROR://127.0.0.1:{self.mirror_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},MIRROR://{self.proxy.address}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MIRROR:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT"})

    @property
    def mirror_bootstrap(self) -> str:
        return self.proxy.address


@pytest.fixture
def source(tmp_path: Path) -> Iterator[Source]:
    source = Source(tmp_path / "source")
    source.broker.start()
    try:
        yield source
    finally:
        source.proxy.close()
        try:
            source.broker.stop()
        finally:
            source.broker.cleanup()


def mirror(worker: WorkerProcess, source: Source, target: BrokerProcess, topic: str) -> None:
    config = {"connector.class": "MirrorSourceConnector", "source.cluster.alias": "src",
              "target.cluster.alias": "dst", "source.cluster.bootstrap.servers": source.mirror_bootstrap,
              "target.cluster.bootstrap.servers": target.bootstrap, "topics": topic, "tasks.max": "1",
              "key.converter": BYTES, "value.converter": BYTES, "replication.factor": "1",
              "offset-syncs.topic.replication.factor": "1", "sync.topic.acls.enabled": "false",
              # librdkafka gives up on a silent connection after this long and reconnects
              "source.consumer.socket.timeout.ms": "5000"}
    status, body = worker.request("POST", "/connectors", {"name": f"mirror-{topic}", "config": config})
    assert status == 201, body


def agree(source: Source, target: BrokerProcess, topic: str, acked: set[int], timeout_s: float) -> None:
    remote = f"src.{topic}"
    wait_for(lambda: len(set(copied(target.bootstrap, remote))) >= len(acked), timeout_s, "the mirror to catch up")
    values = copied(target.bootstrap, remote)
    assert set(values) >= acked, sorted(acked - set(values))[:10]
    assert len(values) == len(set(values)), "a record was copied twice"


def test_a_partition_between_mirror_and_source_heals_and_replication_catches_up(
        source: Source, shared_broker: BrokerProcess, tmp_path: Path) -> None:
    topic = fresh_topic(source.broker.bootstrap)
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap)
    worker.start()
    try:
        mirror(worker, source, shared_broker, topic)
        with Load(source.broker.bootstrap, topic) as load:
            wait_for(lambda: len(load.acked) > 200, 30, "records written")
            source.proxy.cut()
            time.sleep(1)
            during = len(copied(shared_broker.bootstrap, f"src.{topic}"))
            time.sleep(5)  # longer than the consumer's socket timeout: the mirror sees a dead link
            # The proxy is the mirror's only way to the source: nothing was copied while it was cut.
            assert len(copied(shared_broker.bootstrap, f"src.{topic}")) == during
            source.proxy.heal()
            time.sleep(2)
        agree(source, shared_broker, topic, load.acked, 90)
    finally:
        worker.stop()


def test_the_source_cluster_goes_down_and_comes_back(source: Source, shared_broker: BrokerProcess,
                                                     tmp_path: Path) -> None:
    topic = fresh_topic(source.broker.bootstrap)
    worker = WorkerProcess(tmp_path / "worker", shared_broker.bootstrap)
    worker.start()
    try:
        mirror(worker, source, shared_broker, topic)
        with Load(source.broker.bootstrap, topic) as load:
            wait_for(lambda: len(load.acked) > 200, 30, "records written")
        before = set(load.acked)
        source.broker.stop()
        time.sleep(3)
        source.broker.start()
        with Load(source.broker.bootstrap, topic) as more:
            wait_for(lambda: len(more.acked) > 200, 30, "records written after the restart")
        # The second load numbers its records from 0 again: tell them apart by count, not by value.
        expected = len(before) + len(more.acked)
        remote = f"src.{topic}"
        wait_for(lambda: len(copied(shared_broker.bootstrap, remote)) >= expected, 90, "the mirror to catch up")
        assert len(copied(shared_broker.bootstrap, remote)) == expected  # nothing lost, nothing twice
    finally:
        worker.stop()
