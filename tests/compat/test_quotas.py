"""Client quotas and connection limits against a real broker, with real clients.

A `producer_byte_rate` / `consumer_byte_rate` quota set through `moldau quotas` holds a confluent-kafka client
(by client id) to within 20% of its rate, while a client with another client id on the same broker keeps its
throughput; quotas survive a restart; `max.connections.per.ip` closes the connection over the limit.

The quota broker measures rates over 2 windows of 1 s (`quota.window.num=2`): with Kafka's 11 windows a client
may burst ten seconds' worth of its quota before it is held back, which a test of a few seconds cannot average
out. Rates are measured on the client after a second of start-up, over four seconds (two spans of the windows).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.net.client import ClientConnection
from tests.support.broker_process import BrokerProcess
from tests.support.quota_rates import MESSAGE, produce_for, rate

REPO = Path(__file__).resolve().parents[2]
QUOTA = 200_000  # bytes per second
# Rates are measured over two spans of the quota's windows (2 x 1 s): a rate measured in windows lets a client
# burst when a window falls out of it, and is held to the quota on average over each span.
WARMUP_S, MEASURE_S = 1.0, 4.0


def moldau(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", *args, "-b", bootstrap], capture_output=True, text=True,
                          cwd=REPO, timeout=60, check=False)


def ok(bootstrap: str, *args: str) -> str:
    result = moldau(bootstrap, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("quota-broker"), {"quota.window.num": "2"})
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def _create_topic(bootstrap: str, topic: str) -> None:
    ok(bootstrap, "topics", "create", topic, "--partitions", "1")


def test_producer_byte_rate_holds_one_client_id_and_not_another(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    topic = f"quota-produce-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    ok(bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", "slow-producer",
       "--add-config", f"producer_byte_rate={QUOTA}")
    slow: list[tuple[float, int]] = []
    fast: list[tuple[float, int]] = []
    start = time.monotonic()
    seconds = WARMUP_S + MEASURE_S
    threads = [threading.Thread(target=produce_for, args=(bootstrap, topic, "slow-producer", seconds, slow)),
               threading.Thread(target=produce_for, args=(bootstrap, topic, "fast-producer", seconds, fast))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    window = (start + WARMUP_S, start + seconds)
    slow_rate, fast_rate = rate(slow, *window), rate(fast, *window)
    assert 0.8 * QUOTA <= slow_rate <= 1.2 * QUOTA, (slow_rate, fast_rate)
    assert fast_rate > 3 * QUOTA, (slow_rate, fast_rate)


def _consume_for(bootstrap: str, topic: str, client_id: str, seconds: float, out: list[tuple[float, int]]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "max.partition.fetch.bytes": 4096, "fetch.max.bytes": 8192, "message.max.bytes": 8192,
                         "queued.max.messages.kbytes": 256})
    consumer.subscribe([topic])
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                out.append((time.monotonic(), len(msg.value() or b"")))
    finally:
        consumer.close()


def test_consumer_byte_rate_holds_one_client_id_and_not_another(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    topic = f"quota-consume-{uuid.uuid4().hex[:8]}"
    _create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": "loader", "linger.ms": 20,
                         "batch.size": 4096})  # small batches: a fetch returns at least one whole batch
    for _ in range(12000):  # 6 MB: more than the throttled consumer reads in the test
        while True:
            try:
                producer.produce(topic, MESSAGE)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(30) == 0
    ok(bootstrap, "quotas", "alter", "--client", "slow-consumer", "--add-config", f"consumer_byte_rate={QUOTA}")
    slow: list[tuple[float, int]] = []
    fast: list[tuple[float, int]] = []
    threads = [threading.Thread(target=_consume_for, args=(bootstrap, topic, "slow-consumer", 9.0, slow)),
               threading.Thread(target=_consume_for, args=(bootstrap, topic, "fast-consumer", 9.0, fast))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert slow and fast
    # Measured from the first message on: the group join takes a variable time on a loaded machine.
    start = slow[0][0] + WARMUP_S
    slow_rate = rate(slow, start, start + MEASURE_S)
    assert 0.8 * QUOTA <= slow_rate <= 1.2 * QUOTA, slow_rate
    fast_start = fast[0][0]
    fast_total = sum(n for _, n in fast)
    assert fast_total >= 5_000_000 or rate(fast, fast_start, fast_start + MEASURE_S) > 3 * QUOTA, fast_total
    assert fast_total > 2 * sum(n for _, n in slow), (fast_total, sum(n for _, n in slow))


def test_quotas_through_the_cli_and_across_a_restart(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap
    ok(bootstrap, "quotas", "alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
       "clients", "--entity-default", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    ok(bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-default",
       "--add-config", "request_percentage=25.5")
    refused = moldau(bootstrap, "quotas", "alter", "--client", "app", "--add-config", "producer_byte_rate=-1")
    assert refused.returncode == 1 and "INVALID_REQUEST" in refused.stderr and "Traceback" not in refused.stderr
    broker.stop()
    broker.start()
    listing = ok(bootstrap, "quotas", "describe")
    assert "user=alice, client=<default>  consumer_byte_rate  2097152" in listing, listing
    assert "user=alice, client=<default>  producer_byte_rate  1048576" in listing, listing
    assert "client=<default>" in listing and "25.5" in listing
    ok(bootstrap, "quotas", "alter", "--user", "alice", "--client-defaults", "--delete-config", "producer_byte_rate")
    assert "producer_byte_rate" not in ok(bootstrap, "quotas", "describe", "--user", "alice", "--client-defaults")
    ok(bootstrap, "quotas", "delete", "--client-defaults")
    listing = ok(bootstrap, "quotas", "describe")
    assert "request_percentage" not in listing and "consumer_byte_rate" in listing


async def _api_versions(port: int) -> int:
    conn = ClientConnection("127.0.0.1", port, "limit-test")
    try:
        response = await conn.request(ApiVersionsRequest(), 10.0)
        return len(response.api_keys)
    finally:
        conn.close()


@pytest.mark.broker_config({"max.connections.per.ip": "2"})
def test_a_connection_over_the_per_ip_limit_is_closed_and_the_others_keep_working(broker: BrokerProcess) -> None:
    first = socket.create_connection(("127.0.0.1", broker.port))
    second = socket.create_connection(("127.0.0.1", broker.port))
    try:
        third = socket.create_connection(("127.0.0.1", broker.port))
        third.settimeout(10)
        with contextlib.suppress(ConnectionResetError):  # closed by the broker as it was accepted
            assert third.recv(1) == b""
        third.close()
        frame = bytes.fromhex("0000000e" "0012" "0000" "00000001" "0004") + b"test"
        first.sendall(frame)
        first.settimeout(10)
        assert first.recv(4)  # the first connection is still served
    finally:
        second.close()
    # With one slot free again, a new connection is served.
    deadline = time.monotonic() + 10
    while True:
        try:
            assert asyncio.run(_api_versions(broker.port)) > 0
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    first.close()
    assert "max.connections.per.ip=2 reached for 127.0.0.1" in broker.log_tail()
