"""Client quotas and connection limits against a real broker, with real clients.

A `producer_byte_rate` / `consumer_byte_rate` quota set through `moldau quotas` holds a confluent-kafka client
(by client id) to within 20% of its rate, while a client with another client id on the same broker keeps its
throughput; quotas survive a restart; `max.connections.per.ip` closes the connection over the limit.

The quota broker measures rates over 2 windows of 1 s (`quota.window.num=2`): with Kafka's 11 windows a client
may burst ten seconds' worth of its quota before it is held back, which a test of a few seconds cannot average
out. Rates are measured on the client after a second of start-up, over four seconds (two spans of the windows).

`controller_mutation_rate` (KIP-599) is checked with kafka-python's admin client, which speaks the strict versions
(CreateTopics v7, CreatePartitions v3, DeleteTopics v6: a topic over the quota is refused with
THROTTLING_QUOTA_EXCEEDED), and with confluent-kafka's, whose librdkafka speaks the permissive ones (CreateTopics
v4: every topic is created and the client throttled). The broker's mutation buckets hold two seconds of the quota
(`controller.quota.window.num=2`), so a quota of 10 partitions per second allows a burst of 20.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, Producer, ThrottleEvent

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka.admin import KafkaAdminClient
from kafka.errors import NodeNotReadyError
from kio.schema.api_versions.v0.request import ApiVersionsRequest

from moldau.net.client import ClientConnection
from tests.support.broker_process import BrokerProcess
from tests.support.cli_runner import moldau, ok
from tests.support.quota_rates import MESSAGE, produce_for, rate

QUOTA = 200_000  # bytes per second
# Rates are measured over two spans of the quota's windows (2 x 1 s): a rate measured in windows lets a client
# burst when a window falls out of it, and is held to the quota on average over each span.
WARMUP_S, MEASURE_S = 1.0, 4.0


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("quota-broker"), {"quota.window.num": "2",
                                                                       "controller.quota.window.num": "2"})
    proc.start()
    yield proc
    try:
        assert proc.stop() == 0
    finally:
        proc.cleanup()


def _create_topic(bootstrap: str, topic: str) -> None:
    ok(bootstrap, "topics", "create", topic, "--partitions", "1")


@pytest.mark.exclusive  # measures a rate: alone, as in a serial run
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


@pytest.mark.exclusive  # measures a rate: alone, as in a serial run
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


API_VERSIONS_V0 = bytes.fromhex("0000000e" "0012" "0000" "00000001" "0004") + b"test"


def _answer_times(port: int, count: int, timeout_s: float = 15.0) -> list[float | None]:
    """Open `count` connections at once, send ApiVersions on each, and return when each was answered (seconds
    from the start), None for one closed without an answer."""
    started = time.monotonic()
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    for sock in sockets:
        sock.sendall(API_VERSIONS_V0)
    times: list[float | None] = [None] * count

    def wait(i: int) -> None:
        sockets[i].settimeout(timeout_s)
        with contextlib.suppress(OSError):
            if sockets[i].recv(4):
                times[i] = time.monotonic() - started

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for sock in sockets:
        sock.close()
    return times


@pytest.mark.broker_config({"max.connection.creation.rate": "5", "quota.window.num": "2"})
def test_connections_over_the_creation_rate_wait_their_turn(broker: BrokerProcess) -> None:
    """KIP-612: fifteen connections at once against five a second are all served, spread over about two seconds
    (the rate is measured over 2 windows of 1 s here)."""
    times = _answer_times(broker.port, 15)
    assert all(t is not None for t in times), times
    served = sorted(t for t in times if t is not None)
    assert served[4] < 1.0 and served[-1] >= 1.5, served


@pytest.mark.broker_config({"quota.window.num": "2"})
def test_an_address_over_its_connection_creation_rate_is_refused(broker: BrokerProcess) -> None:
    """The `connection_creation_rate` quota of an ip entity (`moldau quotas --ip`, kafka-configs' `--entity-type
    ips`): connections over it are closed unanswered; removing it lets every connection in again."""
    bootstrap = broker.bootstrap
    ok(bootstrap, "quotas", "alter", "--ip", "127.0.0.1", "--add-config", "connection_creation_rate=3")
    assert "ip=127.0.0.1" in ok(bootstrap, "quotas", "describe", "--entity-type", "ips", "--entity-name",
                                "127.0.0.1")
    refused = moldau(bootstrap, "quotas", "alter", "--ip", "127.0.0.1", "--add-config", "producer_byte_rate=10")
    assert refused.returncode == 1 and "connection_creation_rate" in refused.stderr
    time.sleep(2.5)  # the CLI's own connections fall out of the rate's windows
    times = _answer_times(broker.port, 8)
    assert sum(t is not None for t in times) == 3, times
    assert "the connection_creation_rate of 127.0.0.1 is exceeded" in broker.log_tail(200)
    time.sleep(2.5)
    ok(bootstrap, "quotas", "alter", "--ip-defaults", "--add-config", "connection_creation_rate=100")
    ok(bootstrap, "quotas", "delete", "--ip", "127.0.0.1")  # the default's 100 a second applies now
    time.sleep(2.5)
    assert all(t is not None for t in _answer_times(broker.port, 8))


T = TypeVar("T")
MUTATION_RATE = 10  # partitions per second; the bucket holds 2 s of it
THROTTLING_QUOTA_EXCEEDED = 89


def _mutation_quota(bootstrap: str, client_id: str) -> None:
    ok(bootstrap, "quotas", "alter", "--entity-type", "clients", "--entity-name", client_id,
       "--add-config", f"controller_mutation_rate={MUTATION_RATE}")


def _new_topics(names: list[str], partitions: int) -> dict[str, dict[str, int]]:
    return {name: {"num_partitions": partitions, "replication_factor": 1} for name in names}


def _when_unthrottled(call: Callable[[], T]) -> T:
    """kafka-python refuses to send while the broker throttles its connection (KIP-219): wait it out."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return call()
        except NodeNotReadyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.exclusive  # measures a rate: alone, as in a serial run
def test_controller_mutation_rate_refuses_topics_over_the_quota_in_strict_mode(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    prefix = f"mut-{uuid.uuid4().hex[:8]}"
    for client_id in ("strict-creator", "strict-grower", "strict-deleter"):
        _mutation_quota(bootstrap, client_id)
    creator = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict-creator")
    free = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="free-admin")
    grower = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict-grower")
    deleter = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strict-deleter")
    try:
        # 20 tokens: the first topic leaves 5, the second is still admitted (-10), the others are refused.
        limited = [f"{prefix}-limited-{i}" for i in range(4)]
        result = creator.create_topics(_new_topics(limited, 15), raise_errors=False)
        codes = [t["error_code"] for t in result["topics"]]
        assert codes == [0, 0, THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED], result
        assert "controller mutation quota" in result["topics"][2]["error_message"]
        # validate_only creates nothing: it is not held to the quota.
        checked = _when_unthrottled(lambda: creator.create_topics(_new_topics([f"{prefix}-checked"], 15),
                                                                  validate_only=True, raise_errors=False))
        assert [t["error_code"] for t in checked["topics"]] == [0], checked
        # A client without the quota is not held back.
        unlimited = [f"{prefix}-free-{i}" for i in range(4)]
        result = free.create_topics(_new_topics(unlimited, 15), raise_errors=False)
        assert [t["error_code"] for t in result["topics"]] == [0, 0, 0, 0], result
        listed = set(free.list_topics())
        assert set(limited[:2]) | set(unlimited) <= listed and not set(limited[2:]) & listed
        # CreatePartitions v3 counts the partitions added, DeleteTopics v6 those deleted, each per client id.
        grown = grower.create_partitions({name: 30 for name in unlimited}, raise_errors=False)
        assert [r.error_code for r in grown.results] == [0, 0, THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED]
        assert 0 < grown.throttle_time_ms <= 1000, grown  # until the bucket is back at zero: 10 tokens short
        # The first two topics have 30 partitions now: deleting one of them would empty the bucket at once.
        deleted = deleter.delete_topics(unlimited[2:] + unlimited[:2], raise_errors=False)
        assert [t["error_code"] for t in deleted["topics"]] == [0, 0, THROTTLING_QUOTA_EXCEEDED,
                                                                THROTTLING_QUOTA_EXCEEDED], deleted
        # Creating topics in a loop: held to the quota over time, with a burst of one topic.
        accepted = refused = 0
        start = time.monotonic()
        for i in range(12):
            name = f"{prefix}-loop-{i}"
            result = _when_unthrottled(functools.partial(creator.create_topics, _new_topics([name], 5),
                                                         raise_errors=False))
            code = result["topics"][0]["error_code"]
            assert code in (0, THROTTLING_QUOTA_EXCEEDED), result
            accepted += code == 0
            refused += code == THROTTLING_QUOTA_EXCEEDED
        elapsed = time.monotonic() - start
        assert refused > 0 and accepted > 0, (accepted, refused)
        # At most a full bucket (2 s of the quota) at the start, what it earns meanwhile, and one topic's burst.
        assert accepted * 5 <= MUTATION_RATE * (2 + elapsed) + 5, (accepted, refused, elapsed)
    finally:
        for admin in (creator, free, grower, deleter):
            admin.close()


def test_topics_that_fail_do_not_count_against_the_mutation_quota(quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    prefix = f"fail-{uuid.uuid4().hex[:8]}"
    ok(bootstrap, "topics", "create", f"{prefix}-existing", "--partitions", "1")
    _mutation_quota(bootstrap, "careful-admin")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="careful-admin")
    try:
        existing = admin.create_topics(_new_topics([f"{prefix}-existing"], 50), raise_errors=False)
        assert [t["error_code"] for t in existing["topics"]] == [36], existing  # TOPIC_ALREADY_EXISTS
        unknown = admin.delete_topics([f"{prefix}-unknown"], raise_errors=False)
        assert [t["error_code"] for t in unknown["topics"]] == [3], unknown  # UNKNOWN_TOPIC_OR_PARTITION
        # Had the 50 partitions counted, the bucket (20) would be 30 short and the first topic refused.
        result = admin.create_topics(_new_topics([f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"], 15),
                                     raise_errors=False)
        assert [t["error_code"] for t in result["topics"]] == [0, 0, THROTTLING_QUOTA_EXCEEDED], result
    finally:
        admin.close()


@pytest.mark.exclusive  # measures a rate: alone, as in a serial run
def test_controller_mutation_rate_throttles_older_request_versions_without_refusing(
        quota_broker: BrokerProcess) -> None:
    bootstrap = quota_broker.bootstrap
    prefix = f"perm-{uuid.uuid4().hex[:8]}"
    _mutation_quota(bootstrap, "permissive-creator")
    throttles: list[float] = []

    def throttled(event: ThrottleEvent) -> None:
        throttles.append(event.throttle_time)

    # AdminClient's stubs allow only scalar config values, though librdkafka's callbacks go in the same dict.
    admin = AdminClient({"bootstrap.servers": bootstrap, "client.id": "permissive-creator",
                         "throttle_cb": throttled})  # type: ignore[dict-item]
    # librdkafka sends CreateTopics v4: 45 partitions against a bucket of 20 are all created, 25 tokens short.
    futures = admin.create_topics([NewTopic(f"{prefix}-{i}", 15, 1) for i in range(3)])
    for future in futures.values():
        future.result(30)
    answered = time.monotonic()
    admin.poll(1)
    assert throttles and 1.5 <= max(throttles) <= 2.5, throttles
    # The next request is created too, once the connection's throttle (muted by the broker) is over.
    for future in admin.create_topics([NewTopic(f"{prefix}-late", 1, 1)]).values():
        future.result(30)
    assert time.monotonic() - answered >= max(throttles) - 0.3, (throttles, time.monotonic() - answered)
