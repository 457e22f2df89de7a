"""JBOD: several log.dirs on one broker, placement across them, and AlterReplicaLogDirs moving a replica between
them while it serves (KIP-113), tested against a real broker with two log directories."""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaStorageError,
    LogDirNotFoundError,
    NoError,
    UnknownTopicOrPartitionError,
)

from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import moldau, ok
from tests.support.clients import ck_consume, ck_consume_to_end, ck_produce, create_topic
from tests.support.cluster import metadata_at
from tests.support.polling import wait_until

TIMEOUT_S = 60.0


@pytest.fixture
def two_dirs(tmp_path: Path) -> Iterator[tuple[BrokerProcess, Path, Path]]:
    first, second = tmp_path / "disk-a", tmp_path / "disk-b"
    broker = BrokerProcess(tmp_path, {"log.dirs": f"{first},{second}", "log.segment.bytes": "1048576",
                                      "log.segment.delete.delay.ms": "0"})
    broker.start()
    try:
        yield broker, first, second
        if broker.running:
            assert broker.stop() == 0, broker.log_tail()
        log_text = broker.log_path.read_text(errors="replace")
        assert "Traceback" not in log_text, log_text[log_text.index("Traceback") - 2000:][:6000]
    finally:
        broker.cleanup()


def _admin(broker: BrokerProcess) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=30_000)


def _props(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def _partition_dirs(log_dir: Path, topic: str) -> set[str]:
    return {p.name for p in log_dir.iterdir() if p.is_dir() and p.name.startswith(f"{topic}-")}


def _where(admin: KafkaAdminClient, topic: str) -> dict[str, dict[int, dict[str, Any]]]:
    """Per log dir: partition -> its DescribeLogDirs entry (future replicas included)."""
    (result,) = admin.describe_log_dirs()
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for log_dir in result["log_dirs"]:
        assert log_dir["error_code"] == 0
        parts = out.setdefault(log_dir["log_dir"], {})
        for t in log_dir["topics"]:
            if t["name"] == topic:
                parts.update({p["partition_index"]: p for p in t["partitions"]})
    return out


def _wait_moved(admin: KafkaAdminClient, topic: str, partition: int, target: Path) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        where = _where(admin, topic)
        holders = [d for d, parts in where.items() if partition in parts]
        if holders == [str(target)] and not where[str(target)][partition]["is_future_key"]:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic}-{partition} did not move to {target}: {_where(admin, topic)}")


def test_dirs_carry_meta_properties_and_new_partitions_spread_over_them(
        two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    a, b = _props(first / "meta.properties"), _props(second / "meta.properties")
    assert a["cluster.id"] == b["cluster.id"] and a["node.id"] == b["node.id"] == "1"
    assert a["directory.id"] and b["directory.id"] and a["directory.id"] != b["directory.id"]
    create_topic(broker.bootstrap, "spread", partitions=6)
    assert len(_partition_dirs(first, "spread")) == len(_partition_dirs(second, "spread")) == 3
    admin = _admin(broker)
    try:
        where = _where(admin, "spread")
        assert sorted(where) == sorted([str(first), str(second)])
        assert len(where[str(first)]) == len(where[str(second)]) == 3
    finally:
        admin.close()
    broker.restart()  # the same dirs (and directory ids) again, each partition found where it is
    assert _props(first / "meta.properties")["directory.id"] == a["directory.id"]
    create_topic(broker.bootstrap, "more", partitions=2)
    assert len(_partition_dirs(first, "more")) == len(_partition_dirs(second, "more")) == 1


class _Producing:
    """An acks=all producer writing to one partition in the background until stopped; keeps what was acked."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: dict[bytes, int] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                                   "enable.idempotence": True, "message.timeout.ms": 30_000})
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked[msg.value()[:16]] = msg.offset()
        else:
            self.errors.append(err.name())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            try:
                self._producer.produce(self._topic, partition=0, value=f"{i:016d}".encode() + bytes(2000),
                                       on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self._producer.poll(0.001 if i % 50 == 0 else 0)

    def __enter__(self) -> _Producing:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(30) == 0


def _check_all_readable(bootstrap: str, topic: str, acked: dict[bytes, int]) -> None:
    last = max(acked.values())
    got = ck_consume(bootstrap, topic, last + 1, partitions=[0], timeout_s=TIMEOUT_S)
    stored = {r.offset: (r.value or b"")[:16] for r in got}
    missing = [(key, offset) for key, offset in acked.items() if stored.get(offset) != key]
    assert not missing, f"{len(missing)} acknowledged records not readable, e.g. {missing[:3]}"


def _new_topic_dirs(broker: BrokerProcess, topic: str, first: Path, second: Path) -> tuple[Path, Path]:
    """Create a one-partition topic: the dir it was placed in, and the other one."""
    create_topic(broker.bootstrap, topic)
    (source,) = [d for d in (first, second) if _partition_dirs(d, topic)]
    return source, second if source == first else first


def test_a_replica_moves_under_an_acks_all_producer_and_loses_nothing(
        two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    topic = "moving"
    source, target = _new_topic_dirs(broker, topic, first, second)
    admin = _admin(broker)
    try:
        with _Producing(broker.bootstrap, topic) as producing:
            while len(producing.acked) < 5000:  # about 10 MB: several segments and copy steps
                time.sleep(0.05)
            result = admin.alter_replica_log_dirs({(topic, 0, 1): str(target)})
            assert set(result.values()) == {NoError}
            _wait_moved(admin, topic, 0, target)
            moved_at = len(producing.acked)
            while len(producing.acked) < moved_at + 500:  # the producer goes on, now into the new dir
                time.sleep(0.05)
        assert not producing.errors, producing.errors[:5]
        _check_all_readable(broker.bootstrap, topic, producing.acked)
        assert _partition_dirs(source, topic) == set()  # nothing left behind, no -delete, no -future
        assert _partition_dirs(target, topic) == {f"{topic}-0"}
        assert any(p.suffix == ".log" and p.stat().st_size > 0 for p in (target / f"{topic}-0").iterdir())
    finally:
        admin.close()
    broker.restart()  # found in its new directory at the next start
    _check_all_readable(broker.bootstrap, topic, producing.acked)


def test_a_move_interrupted_by_a_crash_resumes_or_completes_at_restart(
        two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    topic = "crashing"
    source, target = _new_topic_dirs(broker, topic, first, second)
    admin = _admin(broker)
    try:
        with _Producing(broker.bootstrap, topic) as producing:
            while len(producing.acked) < 20_000:  # about 40 MB: the kill falls during the copy
                time.sleep(0.05)
        result = admin.alter_replica_log_dirs({(topic, 0, 1): str(target)})
        assert set(result.values()) == {NoError}
    finally:
        admin.close()
    broker.kill()
    broker.start()
    admin = _admin(broker)
    try:
        _wait_moved(admin, topic, 0, target)  # the future log left by the crash was resumed (or promoted)
    finally:
        admin.close()
    _check_all_readable(broker.bootstrap, topic, producing.acked)
    assert _partition_dirs(source, topic) == set()
    # A crash between the swap's two renames: the current log renamed away, the complete future log left.
    assert broker.stop() == 0
    shutil.copytree(target / f"{topic}-0", source / f"{topic}-0.{uuid.uuid4().hex}-future")
    (target / f"{topic}-0").rename(target / f"{topic}-0.{uuid.uuid4().hex}-delete")
    broker.start()
    _check_all_readable(broker.bootstrap, topic, producing.acked)
    assert _partition_dirs(source, topic) == {f"{topic}-0"} and _partition_dirs(target, topic) == set()


def test_alter_replica_log_dirs_errors(two_dirs: tuple[BrokerProcess, Path, Path], tmp_path: Path) -> None:
    broker, first, _ = two_dirs
    create_topic(broker.bootstrap, "stays")
    admin = _admin(broker)
    try:
        result = admin.alter_replica_log_dirs({
            ("stays", 0, 1): str(tmp_path / "not-a-log-dir"),
            ("no-such-topic", 0, 1): str(first),
        })
        assert result[next(k for k in result if k.topic == "stays")] is LogDirNotFoundError
        assert result[next(k for k in result if k.topic == "no-such-topic")] is UnknownTopicOrPartitionError
        relative = admin.alter_replica_log_dirs({("stays", 0, 1): "disk-a"})
        assert set(relative.values()) == {LogDirNotFoundError}
    finally:
        admin.close()


def test_a_partition_in_two_log_dirs_stops_the_start(two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    create_topic(broker.bootstrap, "twice")
    broker.stop()
    (source,) = [d for d in (first, second) if _partition_dirs(d, "twice")]
    other = second if source == first else first
    (other / "twice-0").mkdir()
    with pytest.raises(RuntimeError, match="twice-0 is in two log directories"):
        broker.start()
    (other / "twice-0").rmdir()
    broker.start()


def test_moving_a_replica_needs_alter_on_the_cluster(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path, {
        "log.dirs": f"{tmp_path / 'disk-a'},{tmp_path / 'disk-b'}",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
    })
    broker.start()
    try:
        admin = _admin(broker)
        try:
            result = admin.alter_replica_log_dirs({("any", 0, 1): str(tmp_path / "disk-b")})
            assert set(result.values()) == {ClusterAuthorizationFailedError}
        finally:
            admin.close()
    finally:
        broker.stop()
        broker.cleanup()


def test_a_reassignment_plan_with_log_dirs_moves_replicas_and_the_cli_lists_dirs(
        two_dirs: tuple[BrokerProcess, Path, Path], tmp_path: Path) -> None:
    broker, first, second = two_dirs
    topic = "planned"
    create_topic(broker.bootstrap, topic, partitions=2)
    ck_produce(broker.bootstrap, topic, [{"value": b"x" * 1000, "partition": p} for p in (0, 1) for _ in range(50)])
    (zero_at,) = [d for d in (first, second) if f"{topic}-0" in _partition_dirs(d, topic)]
    target = second if zero_at == first else first
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [str(target)]},
        {"topic": topic, "partition": 1, "replicas": [1], "log_dirs": ["any"]},
    ]}))
    verified = moldau(broker.bootstrap, "partitions", "reassign", "--verify", "--plan", str(plan))
    assert verified.returncode == 1 and f"{topic}-0 on broker 1: in {zero_at}, not {target}" in verified.stdout
    done = ok(broker.bootstrap, "partitions", "reassign", "--execute", "--plan", str(plan), "--timeout", "60",
              "--replica-alter-log-dirs-throttle", "50000000")
    assert "1 replica in their log directories" in done
    assert "the log directory throttle limit is 50000000 B/s on brokers 1" in done
    assert "log directory throttle removed" in done
    admin = _admin(broker)
    try:
        assert _throttle_of(admin) != "50000000"  # back to the default
    finally:
        admin.close()
    assert _partition_dirs(target, topic) == {f"{topic}-0", f"{topic}-1"}
    assert "1 of 1 replica in their log directories" in ok(
        broker.bootstrap, "partitions", "reassign", "--verify", "--plan", str(plan))
    listing = ok(broker.bootstrap, "partitions", "log-dirs", "--topics", topic)
    assert f"broker 1 {target}: ok" in listing and f"broker 1 {zero_at}: ok" in listing
    assert f"  {topic}-0  " in listing.split(f"broker 1 {target}")[1].split("broker 1")[0]
    as_json = json.loads(ok(broker.bootstrap, "partitions", "log-dirs", "--topics", topic, "--output", "json"))
    in_target = next(d for d in as_json if d["log_dir"] == str(target))
    assert sorted((p["topic"], p["partition"]) for p in in_target["partitions"]) == [(topic, 0), (topic, 1)]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": ["/a", "/b"]}]}))
    refused = moldau(broker.bootstrap, "partitions", "reassign", "--execute", "--plan", str(bad))
    assert refused.returncode != 0 and "one directory (or \"any\") per replica" in refused.stderr


def _produce_errors(bootstrap: str, topic: str, partition: int, count: int, size: int,
                    timeout_ms: int = 10_000) -> list[str]:
    """Produce `count` records of `size` bytes to one partition; the names of the errors (empty: all written)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retries": 0,
                         "message.timeout.ms": timeout_ms})
    errors: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err.name())

    for _ in range(count):
        producer.produce(topic, partition=partition, value=bytes(size), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def test_a_failed_log_dir_takes_only_its_partitions_offline(two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    topic = "halves"
    create_topic(broker.bootstrap, topic, partitions=4)
    in_second = sorted(int(name.rsplit("-", 1)[1]) for name in _partition_dirs(second, topic))
    in_first = sorted(int(name.rsplit("-", 1)[1]) for name in _partition_dirs(first, topic))
    assert len(in_second) == len(in_first) == 2
    victim, neighbour = in_second
    for p in range(4):
        assert _produce_errors(broker.bootstrap, topic, p, 10, 1000) == []
    # The disk loses a partition's files: the next segment roll fails, and with it the whole directory.
    shutil.rmtree(second / f"{topic}-{victim}")
    errors = _produce_errors(broker.bootstrap, topic, victim, 30, 50_000, timeout_ms=3000)
    assert "KAFKA_STORAGE_ERROR" in errors  # then, once the controller took the replica offline, no leader

    def reported_offline() -> bool:  # KIP-858: the heartbeat names the directory, the controller applies it
        partitions = {p.partition_index: p for t in metadata_at(broker.bootstrap, [topic]).topics
                      for p in t.partitions}
        return all(partitions[p].leader_id == -1 and list(partitions[p].offline_replicas) == [1] for p in in_second)

    # No other replica can lead them. The report may land after the producer gave up on a loaded machine.
    wait_until(reported_offline, 15, "the failed directory's partitions offline, without a leader")
    assert _produce_errors(broker.bootstrap, topic, neighbour, 1, 100, timeout_ms=2000)
    for p in in_first:  # the other directory's partitions carry on, for writes and reads
        assert _produce_errors(broker.bootstrap, topic, p, 5, 100) == []
        assert len(ck_consume(broker.bootstrap, topic, 15, partitions=[p])) == 15
    admin = _admin(broker)
    try:
        (result,) = admin.describe_log_dirs()
        errors_by_dir = {d["log_dir"]: d["error_code"] for d in result["log_dirs"]}
        assert errors_by_dir == {str(first): 0, str(second): 56}  # KAFKA_STORAGE_ERROR
        moved = admin.alter_replica_log_dirs({(topic, in_first[0], 1): str(second)})
        assert set(moved.values()) == {KafkaStorageError}
    finally:
        admin.close()
    create_topic(broker.bootstrap, "after", partitions=2)  # new partitions go to the working directory
    assert _partition_dirs(first, "after") == {"after-0", "after-1"}


def test_a_log_dir_unusable_at_start_is_offline_and_the_broker_serves_the_others(
        two_dirs: tuple[BrokerProcess, Path, Path], tmp_path: Path) -> None:
    broker, first, second = two_dirs
    topic = "unplugged"
    create_topic(broker.bootstrap, topic, partitions=4)
    in_first = sorted(int(name.rsplit("-", 1)[1]) for name in _partition_dirs(first, topic))
    in_second = sorted(int(name.rsplit("-", 1)[1]) for name in _partition_dirs(second, topic))
    for p in range(4):
        assert _produce_errors(broker.bootstrap, topic, p, 10, 100) == []
    assert broker.stop() == 0
    second.rename(tmp_path / "disk-b-unplugged")
    second.write_text("the disk is gone")  # neither creatable nor readable as a directory
    broker.start()
    for p in in_first:
        assert _produce_errors(broker.bootstrap, topic, p, 5, 100) == []
        assert len(ck_consume(broker.bootstrap, topic, 15, partitions=[p])) == 15
    # The controller knows these replicas are in the lost directory (KIP-858): offline, with no other replica to
    # lead them, and not created afresh in the other directory.
    partitions = {p.partition_index: p for t in metadata_at(broker.bootstrap, [topic]).topics
                  for p in t.partitions}
    for p in in_second:
        assert partitions[p].leader_id == -1 and list(partitions[p].offline_replicas) == [1], partitions[p]
        assert _produce_errors(broker.bootstrap, topic, p, 1, 100, timeout_ms=2000)
    for p in in_first:
        assert partitions[p].leader_id == 1 and not partitions[p].offline_replicas
    assert _partition_dirs(first, topic) == {f"{topic}-{p}" for p in in_first}
    # A new topic cannot be in the lost directory: the controller assigns its replica to the one directory the broker
    # registered (KIP-858, as Kafka's controller does), where it is made and serves.
    create_topic(broker.bootstrap, "while-unplugged")
    assert _produce_errors(broker.bootstrap, "while-unplugged", 0, 1, 100) == []
    assert _partition_dirs(first, "while-unplugged") == {"while-unplugged-0"}
    admin = _admin(broker)
    try:
        (result,) = admin.describe_log_dirs()
        assert {d["log_dir"]: d["error_code"] for d in result["log_dirs"]} == {str(first): 0, str(second): 56}
    finally:
        admin.close()
    assert broker.stop() == 0
    second.unlink()
    (tmp_path / "disk-b-unplugged").rename(second)
    broker.start()  # the disk is back: every partition with every record
    counts = Counter(r.partition for r in ck_consume_to_end(broker.bootstrap, topic))
    assert counts == {p: 15 if p in in_first else 10 for p in range(4)}
    assert _produce_errors(broker.bootstrap, "while-unplugged", 0, 1, 100) == []
    assert len(ck_consume_to_end(broker.bootstrap, "while-unplugged")) == 2


def _throttle_of(admin: KafkaAdminClient) -> Any:
    described = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")])["broker"]["1"]
    return described.get("replica.alter.log.dirs.io.max.bytes.per.second", {}).get("value")


def test_moves_copy_no_faster_than_the_throttle(two_dirs: tuple[BrokerProcess, Path, Path]) -> None:
    broker, first, second = two_dirs
    topic = "throttled"
    create_topic(broker.bootstrap, topic)
    ck_produce(broker.bootstrap, topic, [{"value": bytes(10_000), "partition": 0} for _ in range(100)])
    (source,) = [d for d in (first, second) if _partition_dirs(d, topic)]
    target = second if source == first else first
    admin = _admin(broker)
    try:
        # 1 MB at 250 kB/s: at least 3 s (the first 250 kB go at once), where unthrottled takes milliseconds.
        admin.alter_configs([ConfigResource(ConfigResourceType.BROKER, "1", configs={
            "replica.alter.log.dirs.io.max.bytes.per.second": "250000"})])
        # The broker applies its config from the metadata log a moment after the controller commits it: a move
        # started before that would copy unthrottled.
        wait_until(lambda: _throttle_of(admin) == "250000", 30, "the throttle applied on the broker")
        started = time.monotonic()
        assert set(admin.alter_replica_log_dirs({(topic, 0, 1): str(target)}).values()) == {NoError}
        _wait_moved(admin, topic, 0, target)
        assert time.monotonic() - started >= 3.0
    finally:
        admin.close()
    assert len(ck_consume(broker.bootstrap, topic, 100, partitions=[0])) == 100
