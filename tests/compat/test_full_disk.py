"""A full disk: produce fails with KAFKA_STORAGE_ERROR, acknowledged records stay readable, the broker keeps
serving, and it accepts writes again once space is freed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, create_topic

DISK_BYTES = 6 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(bootstrap: str, topic: str, count: int) -> tuple[dict[bytes, tuple[int, int]], list[str]]:
    """Produce `count` 20 kB records; returns the acknowledged ones and the names of the errors."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "batch.size": 40_000,
                         "message.timeout.ms": 10_000, "retries": 0})
    acked: dict[bytes, tuple[int, int]] = {}
    errors: list[str] = []  # names: librdkafka's error objects must not outlive the producer

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            acked[msg.value()[:16]] = (msg.partition(), msg.offset())
        else:
            errors.append(err.name())

    for i in range(count):
        producer.produce(topic, value=f"{i:016d}".encode() + bytes(20_000), on_delivery=on_delivery)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked, errors


def test_full_disk_fails_writes_cleanly_and_keeps_data(small_disk: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "run", {"log.dirs": str(small_disk / "logs"), "log.segment.bytes": "1048576",
                                              "log.index.size.max.bytes": "4096",
                                              # Free deleted files at once (Kafka waits a minute by default).
                                              "log.segment.delete.delay.ms": "0"})
    (tmp_path / "run").mkdir()
    broker.start()
    try:
        create_topic(broker.bootstrap, "ballast")
        create_topic(broker.bootstrap, "victim")
        ballast, _ = fill(broker.bootstrap, "ballast", 100)  # about 2 MB we can delete later
        assert len(ballast) == 100
        acked, errors = fill(broker.bootstrap, "victim", 400)  # about 8 MB: more than is left
        assert errors, "the disk never filled up"
        assert set(errors) == {"KAFKA_STORAGE_ERROR"}
        assert len(acked) > 10
        # Every acknowledged record is readable at its offset, and the broker still answers.
        got = ck_consume(broker.bootstrap, "victim", len(acked), timeout_s=30)
        stored = {(r.partition, r.offset): (r.value or b"")[:16] for r in got}
        assert all(stored.get(pos) == key for key, pos in acked.items())
        # Free space by deleting the ballast topic; writes succeed again, after the acknowledged ones.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.delete_topics(["ballast"])["ballast"].result(10)
        deadline = time.monotonic() + 15  # files go in the broker's next maintenance pass
        while shutil.disk_usage(small_disk).free < 1024 * 1024 and time.monotonic() < deadline:
            time.sleep(0.2)
        more, more_errors = fill(broker.bootstrap, "victim", 20)
        assert not more_errors and len(more) == 20
        assert min(o for _, o in more.values()) == max(o for _, o in acked.values()) + 1
    finally:
        broker.cleanup()


def test_a_broker_killed_on_a_full_disk_starts_again_and_serves_reads(small_disk: Path, tmp_path: Path) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(1536 * 1024))  # freed at the end, to give the broker room again
    broker = BrokerProcess(tmp_path / "run", {"log.dirs": str(small_disk / "logs"), "log.segment.bytes": "1048576",
                                              "log.index.size.max.bytes": "4096"})
    (tmp_path / "run").mkdir()
    broker.start()
    try:
        create_topic(broker.bootstrap, "victim")
        acked, errors = fill(broker.bootstrap, "victim", 400)
        assert errors and len(acked) > 10
        broker.kill()
        assert shutil.disk_usage(small_disk).free < 64 * 1024
        broker.start()  # on the still-full disk: recovery cannot write its indexes, and must not need to
        got = ck_consume(broker.bootstrap, "victim", len(acked), timeout_s=30)
        stored = {(r.partition, r.offset): (r.value or b"")[:16] for r in got}
        assert all(stored.get(pos) == key for key, pos in acked.items())
        # The disk may still hold a record or two (how much the restart used depends on what it had to write).
        squeezed_in, refused = fill(broker.bootstrap, "victim", 5)
        assert refused and set(refused) == {"KAFKA_STORAGE_ERROR"}
        acked.update(squeezed_in)
        ballast.unlink()
        more, more_errors = fill(broker.bootstrap, "victim", 20)
        assert not more_errors and len(more) == 20
        assert min(o for _, o in more.values()) == max(o for _, o in acked.values()) + 1
        log_text = broker.log_path.read_text(errors="replace")
        assert "Traceback" not in log_text, log_text[log_text.index("Traceback") - 2000:][:6000]
    finally:
        broker.cleanup()
