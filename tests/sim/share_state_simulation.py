"""The share-partition simulation with its state made durable through the share coordinator, and the leader
crashing: a seeded run of `ShareSimulation` where the share-partition is the broker's (`ShareGroups`), every
acknowledgement, release and expired lock is written to a `ShareCoordinator` over an in-memory log (as ShareUpdate
records, a ShareSnapshot every few updates, the number drawn per seed), and now and then the leader and the
coordinator both crash: a new coordinator replays the log (snapshot plus updates) and a new leader reads the state
back.

On top of the rules of `ShareSimulation`:

- no record accepted before a crash is delivered again after it (an acknowledgement is answered only once durable);
- no record is lost: at the end each is accepted exactly once or archived (rejected, or its deliveries used up);
- delivery counts may fall back after a crash only for records acquired since their last write (an acquisition is
  not durable), never below what was last written;
- with a dead-letter topic, the records given up on reach it through the broker's path (announced once their
  archiving is durable), each once.
"""

from __future__ import annotations

import asyncio
import uuid

from moldau.clock import ManualClock
from moldau.coordinator.log import LogRecord, read_partition
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.share.records import SHARE_STATE_TOPIC
from moldau.protocol.errors import ErrorCode
from moldau.share.manager import PartitionKey, ShareGroups
from moldau.share.partition import ArchivedRecord, SharePartition
from moldau.share.settings import ShareBrokerSettings
from tests.sim.share_simulation import ShareSimulation
from tests.support.share_state import DirectStateStore
from tests.unit.coordinator.memory_log import NODE_ID, MemoryLog, image_with

TOPIC_ID = uuid.UUID(int=9)
KEY = ("g", "t", 0)


class DurableShareSimulation(ShareSimulation):
    def __init__(self, seed: int, steps: int = 300) -> None:
        super().__init__(seed, steps)
        self.state_log = MemoryLog(SHARE_STATE_TOPIC, 1)
        self.updates_per_snapshot = self.rng.choice([0, 1, 3, 10])
        self.leader_epoch = 0
        self.crashes = 0
        self.uncertain: set[int] = set()  # acquired since their last write when the leader crashed
        self.sent_dead_letters: list[ArchivedRecord] = []  # what the broker handed to the dead-letter topic
        self.groups = self._new_leader()

    def _new_leader(self) -> ShareGroups:
        image = image_with(SHARE_STATE_TOPIC, 1)
        coordinator = ShareCoordinator(NODE_ID, ShareStateSettings(num_partitions=1,
                                                                   updates_per_snapshot=self.updates_per_snapshot),
                                       lambda: image, lambda: None, self.state_log)
        coordinator.on_image(None, image)
        self.coordinator = coordinator
        settings = ShareBrokerSettings(partition=self.settings,
                                       dead_letter_topic="dead-letters" if self.settings.dead_letter else "")
        return ShareGroups(settings, ManualClock(), None, DirectStateStore(coordinator),  # type: ignore[arg-type]
                           dead_letters=self._dead_letter_sink)

    async def _dead_letter_sink(self, key: PartitionKey, settings: ShareBrokerSettings,
                                archived: list[ArchivedRecord]) -> None:
        self.sent_dead_letters.extend(archived)

    def run(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        self.partition = await self._load()
        for _ in range(self.steps):
            if self.rng.random() < 0.03:
                await self._crash_leader()
            else:
                self.step()
            await self._persist()
            self.check()
        self.drain()
        self.check_final()

    async def _load(self) -> SharePartition:
        return await self.groups.share_partition(*KEY, TOPIC_ID, self.leader_epoch, 0, self.log_end)

    async def _persist(self) -> None:
        """What the broker writes after acknowledgements, releases and expired locks; every write must succeed."""
        written = await self.groups.persist(KEY)
        if written != ErrorCode.none:
            self.fail(f"writing the share-partition state failed: {written!r}")
        await asyncio.sleep(0)  # the dead-letter hand-off runs as a task of its own

    def check(self) -> None:
        # The broker takes the archived events when it writes the state: they arrive through the sink.
        sent, self.sent_dead_letters = self.sent_dead_letters, []
        self.check_dead_letters(sent)
        super().check()

    async def _crash_leader(self) -> None:
        """The leader and the share coordinator go: what members held is lost with them, and a new leader (a higher
        leader epoch) reads the state the coordinator replays from the log."""
        self.crashes += 1
        for offset in list(self.model.holder):
            del self.model.holder[offset]
            self.uncertain.add(offset)
        self.leader_epoch += 1
        self.groups = self._new_leader()
        self.partition = await self._load()

    def record_delivery(self, member: str, offset: int, delivery_count: int) -> None:
        if offset in self.uncertain:
            # Its last acquisition was not durable: the count goes on from what was written, at most one behind.
            self.uncertain.discard(offset)
            seen = self.model.deliveries.get(offset, 0)
            if not seen - 1 <= delivery_count - 1 <= seen:
                self.fail(f"offset {offset} delivered with count {delivery_count} after a crash, "
                          f"{seen} deliveries seen")
            self.model.deliveries[offset] = delivery_count - 1
        super().record_delivery(member, offset, delivery_count)

    def coordinator_updates(self) -> int:
        """How many ShareUpdate records the log holds."""
        return sum(1 for item in read_partition(self.state_log, 0)
                   if isinstance(item, LogRecord) and item.key[:2] == b"\x00\x01")
