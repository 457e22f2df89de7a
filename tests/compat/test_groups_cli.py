"""End-to-end tests of `moldau groups`, run as subprocesses against a live broker.

A group of confluent-kafka consumers (classic protocol) consumes and commits; the CLI must then
describe exactly what was produced and committed, and move committed offsets only when told to.
"""

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from tests.compat.test_cli import assert_clean_error, moldau, ok

pytestmark = pytest.mark.broker_config(
    {
        "offsets.topic.num.partitions": "3",
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "500",
    }
)

GROUP_CONF = {
    "session.timeout.ms": 3000,
    "heartbeat.interval.ms": 200,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "enable.metrics.push": False,
}
# Record timestamps: partition 0 one record per second from T0, partition 1 one every two seconds.
T0 = datetime(2024, 1, 1, tzinfo=UTC)
P0_FIRST, P1_RECORDS, P0_LATER = 10, 6, 4
DEADLINE_S = 20


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _produce(bootstrap: str, topic: str, partition: int, seconds: list[int]) -> None:
    """One record per entry, with a create time that many seconds after T0."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.metrics.push": False})
    for second in seconds:
        producer.produce(topic, b"v", partition=partition, timestamp=_ms(T0 + timedelta(seconds=second)))
    assert producer.flush(15) == 0


def _consumer(bootstrap: str, group: str, topic: str, name: str, **extra: Any) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": name, **GROUP_CONF, **extra})
    consumer.subscribe([topic])
    return consumer


def _consume_until(consumers: list[Consumer], count: int) -> list[Any]:
    """Poll every consumer in turn until `count` records arrived; each commits what it read."""
    records: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(records) < count and time.monotonic() < deadline:
        for consumer in consumers:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append(message)
                consumer.commit(message=message, asynchronous=False)
    assert len(records) == count
    return records


def _settle(consumers: list[Consumer], partitions: int) -> None:
    """Keep polling until the members together own every partition (a stable generation)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        for consumer in consumers:
            consumer.poll(0.1)
        if sum(len(c.assignment()) for c in consumers) == partitions:
            return
    raise AssertionError("group did not settle")


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    """Partition -> committed offset, straight from the broker."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in future.result(15).topic_partitions if tp.offset >= 0}


def _offset_rows(out: str, topic: str) -> dict[int, list[str]]:
    """Rows of an offsets table (describe or reset-offsets), keyed by partition, topic dropped."""
    return {int(cells[1]): cells[2:] for line in out.splitlines() if (cells := line.split())[:1] == [topic]}


@pytest.fixture
def consumed(broker: Any) -> Iterator[tuple[str, str, list[Consumer]]]:
    """A 3-partition topic read and committed by a 2-member group, then 4 more records in partition 0.

    Committed: p0 10, p1 6, p2 nothing (it is empty). Log end: p0 14, p1 6, p2 0.
    """
    topic, group = f"gcli-{uuid.uuid4().hex[:8]}", f"grp-{uuid.uuid4().hex[:8]}"
    ok(broker, "topics", "create", topic, "--partitions", "3")
    _produce(broker.bootstrap, topic, 0, list(range(P0_FIRST)))
    _produce(broker.bootstrap, topic, 1, [2 * i for i in range(P1_RECORDS)])
    consumers = [_consumer(broker.bootstrap, group, topic, f"member-{i}") for i in range(2)]
    try:
        _settle(consumers, 3)
        _consume_until(consumers, P0_FIRST + P1_RECORDS)
        _produce(broker.bootstrap, topic, 0, list(range(P0_FIRST, P0_FIRST + P0_LATER)))
        yield topic, group, consumers
    finally:
        for consumer in consumers:
            consumer.close()


def test_list_and_describe_active_group(broker: Any, consumed: tuple[str, str, list[Consumer]]) -> None:
    topic, group, _members = consumed
    listed = ok(broker, "groups", "list").out
    assert [group, "classic", "Stable"] in [line.split() for line in listed.splitlines()]
    assert group not in ok(broker, "groups", "list", "--state", "empty").out
    described = ok(broker, "groups", "describe", group).out
    assert f"Group: {group}" in described
    assert "Stable" in described and "Members:        2" in described
    for name in ("member-0", "member-1"):
        assert name in described
    rows = _offset_rows(described, topic)
    # CURRENT-OFFSET, LOG-END-OFFSET, LAG, then the owning client id.
    assert rows[0][:3] == ["10", "14", "4"]
    assert rows[1][:3] == ["6", "6", "0"]
    assert rows[2][:3] == ["-", "0", "-"]
    assert {rows[p][3] for p in rows} == {"member-0", "member-1"}
    refused = moldau(broker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute")
    assert_clean_error(refused, "inactive", "Stable")
    assert_clean_error(moldau(broker, "groups", "delete", group), "active members")
    assert _committed(broker.bootstrap, group) == {0: 10, 1: 6}


def _reset(broker: Any, group: str, *args: str) -> dict[int, list[str]]:
    """Run an executed reset and return its plan rows."""
    result = ok(broker, "groups", "reset-offsets", group, *args, "--execute")
    return _offset_rows(result.out, args[1].split(":")[0]) if args[0] == "--topic" else {}


def test_reset_offsets_modes(broker: Any, consumed: tuple[str, str, list[Consumer]]) -> None:
    topic, group, consumers = consumed
    for consumer in consumers:
        consumer.close()
    consumers.clear()
    dry = ok(broker, "groups", "reset-offsets", group, "--topic", topic, "--to-earliest")
    assert _offset_rows(dry.out, topic) == {0: ["10", "0"], 1: ["6", "0"], 2: ["-", "0"]}
    assert "dry run" in dry.err
    assert _committed(broker.bootstrap, group) == {0: 10, 1: 6}
    expected = [
        (["--to-earliest"], {0: 0, 1: 0, 2: 0}),
        (["--to-latest"], {0: 14, 1: 6, 2: 0}),
        (["--to-offset", "3"], {0: 3, 1: 3, 2: 0}),
        (["--shift-by", "-2"], {0: 1, 1: 1, 2: 0}),
        (["--shift-by", "100"], {0: 14, 1: 6, 2: 0}),
        (["--to-datetime", (T0 + timedelta(seconds=5)).isoformat()], {0: 5, 1: 3, 2: 0}),
    ]
    for mode, offsets in expected:
        plan = _reset(broker, group, "--topic", topic, *mode)
        assert {p: int(cells[1]) for p, cells in plan.items()} == offsets, mode
        assert _committed(broker.bootstrap, group) == offsets, mode
    _reset(broker, group, "--topic", f"{topic}:1", "--to-offset", "4")
    assert _committed(broker.bootstrap, group) == {0: 5, 1: 4, 2: 0}
    _assert_resumes(broker.bootstrap, group, topic, {0: 5, 1: 4})


def _assert_resumes(bootstrap: str, group: str, topic: str, starts: dict[int, int]) -> None:
    """A new member starts each partition at the committed offset, not at the reset policy's end."""
    consumer = _consumer(bootstrap, group, topic, "resumer", **{"auto.offset.reset": "latest"})
    try:
        first: dict[int, int] = {}
        deadline = time.monotonic() + DEADLINE_S
        while set(first) != set(starts) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                first.setdefault(partition, offset)
        assert first == starts
    finally:
        consumer.close()


def test_all_topics_and_delete(broker: Any, consumed: tuple[str, str, list[Consumer]]) -> None:
    topic, group, consumers = consumed
    for consumer in consumers:
        consumer.close()
    consumers.clear()
    plan = ok(broker, "groups", "reset-offsets", group, "--all-topics", "--to-latest", "--execute")
    # Only partitions with a commit are in scope for --all-topics.
    assert _offset_rows(plan.out, topic) == {0: ["10", "14"], 1: ["6", "6"]}
    assert _committed(broker.bootstrap, group) == {0: 14, 1: 6}
    assert "Empty" in ok(broker, "groups", "describe", group).out
    assert f"deleted group '{group}'" in ok(broker, "groups", "delete", group).out
    assert group not in ok(broker, "groups", "list").out
    assert_clean_error(moldau(broker, "groups", "describe", group), "does not exist")
    assert_clean_error(moldau(broker, "groups", "delete", group), "does not exist")


def test_bad_arguments(broker: Any) -> None:
    assert_clean_error(
        moldau(broker, "groups", "reset-offsets", "g", "--topic", "nope", "--to-latest"), "does not exist"
    )
    both = moldau(broker, "groups", "reset-offsets", "g", "--topic", "t", "--to-latest", "--to-earliest")
    assert both.code == 2 and "not allowed with" in both.err
