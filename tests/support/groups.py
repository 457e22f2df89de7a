"""Consumer-group members for tests: real confluent-kafka consumers that record what they were given."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from tests.support.clients import ck_produce
from tests.support.messages import offset_of, partition_of, value_of


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def produce_spread(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    """Records v<start>..v<start+count-1>, spread round-robin over the partitions."""
    ck_produce(bootstrap, topic, [{"value": f"v{i}".encode(), "partition": i % partitions}
                                  for i in range(start, start + count)])


class GroupMember:
    """A subscribed consumer that tracks its assignment, rebalance callbacks and the records it read.

    Assignment is tracked by adding assigned and removing revoked partitions: that is right for incremental
    (cooperative, KIP-848) rebalances and also for eager ones, which revoke everything before assigning.
    """

    def __init__(self, bootstrap: str, group: str, topic: str, base_conf: Mapping[str, Any], **conf: Any) -> None:
        self.assigned: set[int] = set()
        self.assigns = 0
        self.revokes = 0
        self.revoked: list[int] = []
        self.records: list[tuple[int, int, bytes]] = []
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, **base_conf, **conf})
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.closed = False

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.assigns += 1
        self.assigned |= {p.partition for p in partitions}

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self.revokes += 1
        self.revoked += [p.partition for p in partitions]
        self.assigned -= {p.partition for p in partitions}

    def poll(self) -> None:
        for msg in self.consumer.consume(500, 0.05):
            assert msg.error() is None, msg.error()
            self.records.append((partition_of(msg), offset_of(msg), value_of(msg)))

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def poll_until(members: Sequence[GroupMember], done: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if done():
            return
    raise AssertionError(f"not reached in {timeout_s}s; assignments {[sorted(m.assigned) for m in members]}")


def covers(members: Sequence[GroupMember], partitions: int) -> bool:
    """Every partition is owned by exactly one member: no overlap and no gap."""
    return sorted(p for m in members for p in m.assigned) == list(range(partitions))


def balanced(members: Sequence[GroupMember], partitions: int) -> bool:
    sizes = [len(m.assigned) for m in members]
    return covers(members, partitions) and max(sizes) - min(sizes) <= 1


def values(members: Sequence[GroupMember]) -> list[bytes]:
    return sorted(v for m in members for _, _, v in m.records)
