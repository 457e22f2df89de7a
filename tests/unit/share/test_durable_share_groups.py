"""The broker's share-partitions over a real share coordinator on an in-memory log: started durably, acknowledged
durably, and releases written too, so a new leader (a new `ShareGroups` over the same log) counts every delivery
that ended."""

from __future__ import annotations

import asyncio
import uuid

from moldau.clock import ManualClock
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import SHARE_STATE_TOPIC
from moldau.protocol.errors import ErrorCode
from moldau.share.manager import ShareGroups
from moldau.share.partition import AckBatch, AckType, ShareSettings
from moldau.share.settings import ShareBrokerSettings
from tests.support.share_state import DirectStateStore
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

TOPIC_ID = uuid.UUID(int=42)
KEY = ("g", "t", 0)


class CoordinatorStore(DirectStateStore):
    """One share coordinator over `log`, called directly."""

    def __init__(self, log: MemoryLog) -> None:
        image = image_with(SHARE_STATE_TOPIC, 1)
        super().__init__(ShareCoordinator(NODE_ID, ShareStateSettings(num_partitions=1), lambda: image,
                                          lambda: None, log))
        self.coordinator.on_image(None, image)


def leader(log: MemoryLog, clock: ManualClock, store: CoordinatorStore | None = None) -> ShareGroups:
    settings = ShareBrokerSettings(partition=ShareSettings(auto_offset_reset="earliest"))
    return ShareGroups(settings, clock, None, store or CoordinatorStore(log))  # type: ignore[arg-type]


async def scenario() -> list[tuple[int, int, int]]:
    log, clock = MemoryLog(SHARE_STATE_TOPIC, 1), ManualClock()
    first = leader(log, clock)
    partition = await first.share_partition("g", "t", 0, TOPIC_ID, 0, 0, 4)
    partition.acquire("a", 4, 4, first.now_ms())
    partition.acknowledge("a", [AckBatch(0, 0, (AckType.ACCEPT,))], first.now_ms())
    assert await first.persist(KEY) == ErrorCode.none
    first.release("g", "a")  # a's session ended: 1-3 are released (written in the background)
    partition.acquire("b", 4, 4, first.now_ms())  # their second delivery (an acquisition is not written)
    first.release("g", "b")  # ... which ends with b's session: written, so counted by the next leader
    while first._writes:
        await asyncio.sleep(0)
    second = leader(log, clock)
    restored = await second.share_partition("g", "t", 0, TOPIC_ID, 1, 0, 4)
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in restored.acquire("b", 10, 4, 0)]


def test_a_new_leader_goes_on_from_the_acknowledged_and_released_state() -> None:
    assert asyncio.run(scenario()) == [(1, 3, 3)]


async def reset_scenario() -> list[object]:
    """An administrator moves the start of a share-partition another leader still holds: the stale leader's next
    write is fenced (FENCED_STATE_EPOCH) and it reads the new start back; a deletion makes it start over."""
    log, clock = MemoryLog(SHARE_STATE_TOPIC, 1), ManualClock()
    store = CoordinatorStore(log)  # one share coordinator, two brokers calling it
    holder, admin = leader(log, clock, store), leader(log, clock, store)
    held = await holder.share_partition("g", "t", 0, TOPIC_ID, 0, 0, 10)
    held.acquire("a", 2, 10, 0)
    held.acknowledge("a", [AckBatch(0, 1, (AckType.ACCEPT,))], 0)
    assert await holder.persist(KEY) == ErrorCode.none
    seen: list[object] = [await admin.start_offset("g", "t", 0, TOPIC_ID, 0)]
    assert await admin.reset("g", "t", 0, TOPIC_ID, 0, 7) == ErrorCode.none
    seen.append(await admin.start_offset("g", "t", 0, TOPIC_ID, 0))
    held.acquire("a", 1, 10, 0)
    held.acknowledge("a", [AckBatch(2, 2, (AckType.ACCEPT,))], 0)
    seen.append(await holder.persist(KEY))  # the stale state is refused at its next write ...
    again = await holder.share_partition("g", "t", 0, TOPIC_ID, 0, 0, 10)  # ... and read back
    seen.append(again.start_offset)
    assert await admin.reset("g", "t", 0, TOPIC_ID, 0, None) == ErrorCode.none
    seen.append(await admin.start_offset("g", "t", 0, TOPIC_ID, 0))
    fresh = await leader(log, clock, store).share_partition("g", "t", 0, TOPIC_ID, 0, 3, 10)  # earliest: the log start
    seen.append(fresh.start_offset)
    return seen


def test_a_reset_fences_the_leader_holding_the_old_state() -> None:
    assert asyncio.run(reset_scenario()) == [(2, 0, 0), (7, 0, 0), ErrorCode.fenced_state_epoch, 7, None, 3]


def test_a_groups_own_configs_replace_the_broker_settings() -> None:
    broker = ShareBrokerSettings(partition=ShareSettings(delivery_count_limit=5, auto_offset_reset="latest"))
    mine = broker.for_group({"share.delivery.count.limit": "2", "share.auto.offset.reset": "by_duration:PT1M",
                             "share.isolation.level": "READ_COMMITTED", "share.heartbeat.interval.ms": "700",
                             "errors.deadletterqueue.topic.name": "dead", "errors.deadletterqueue.copy.record.enable":
                             "true"})
    assert (mine.partition.delivery_count_limit, mine.partition.auto_offset_reset) == (2, "by_duration:PT1M")
    assert mine.partition.isolation_level == "read_committed" and mine.partition.dead_letter
    assert mine.membership.heartbeat_interval_ms == 700
    assert mine.membership.session_timeout_ms == broker.membership.session_timeout_ms
    assert (mine.dead_letter_topic, mine.dead_letter_copy_record) == ("dead", True)
    assert broker.for_group({}) is broker


async def in_flight_scenario() -> list[object]:
    """What describing a share group's offsets sees of records in flight: the leader holding the share-partition
    counts every acquisition; another broker reading the durable state sees acquisitions only once the leader
    has written them (with its next acknowledgement), as Available records with deliveries."""
    log, clock = MemoryLog(SHARE_STATE_TOPIC, 1), ManualClock()
    store = CoordinatorStore(log)
    holder, other = leader(log, clock, store), leader(log, clock, store)
    held = await holder.share_partition("g", "t", 0, TOPIC_ID, 0, 0, 10)
    held.acquire("a", 5, 10, 0)  # 0-4 acquired, nothing written yet
    seen: list[object] = [await holder.start_offset("g", "t", 0, TOPIC_ID, 0),
                          await other.start_offset("g", "t", 0, TOPIC_ID, 0)]
    held.acknowledge("a", [AckBatch(0, 1, (AckType.ACCEPT,)), AckBatch(2, 2, (AckType.RELEASE,))], 0)
    assert await holder.persist(KEY) == ErrorCode.none  # 0-1 done; 2 available again; 3-4 written as available
    held.acquire("a", 2, 10, 0)  # 2 again and 5: not written
    seen += [await holder.start_offset("g", "t", 0, TOPIC_ID, 0), await other.start_offset("g", "t", 0, TOPIC_ID, 0)]
    return seen


def test_records_in_flight_are_live_on_the_leader_and_durable_elsewhere() -> None:
    assert asyncio.run(in_flight_scenario()) == [(0, 0, 5), (0, 0, 0), (2, 0, 4), (2, 0, 3)]
