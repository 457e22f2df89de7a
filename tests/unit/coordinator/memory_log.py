"""An in-memory `CoordinatorLog`, and a metadata image placing an internal topic, so that coordinators run in unit
tests and simulations without files, replicas or sockets.

The log keeps real v2 batches (the coordinators' own bytes, with the base offset the log assigns), so replay
decodes exactly what a partition log would hold. Durability is modelled by a high watermark per partition:
with `auto_replicate` it follows the log end at once (a single in-sync replica); without it, appended batches
stay above the high watermark until `replicate` is called, and `lose_unreplicated` drops them, as a failover to
a replica that never fetched them would. Not modelled: producer-state checks on transactional batches (epoch
fencing, KIP-890 verification) and compaction.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from moldau.coordinator.log import Appended
from moldau.metadata.image import MetadataImage
from moldau.metadata.records import MetadataRecord, PartitionRecord, TopicRecord
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.protocol.record_batch import split_batches
from moldau.storage.control_batch import build_marker_batch

NODE_ID = 1


def image_with(topic: str, partitions: int, leader: int = NODE_ID, leader_epoch: int = 0,
               image: MetadataImage | None = None) -> MetadataImage:
    """`image` (or an empty one) with `topic` created, every partition led by `leader` at `leader_epoch`."""
    topic_id = uuid.uuid5(uuid.NAMESPACE_OID, topic)
    records: list[MetadataRecord] = [TopicRecord(topic, topic_id)]
    records += [PartitionRecord(topic_id, p, (leader,), (leader,), leader, leader_epoch, leader_epoch)
                for p in range(partitions)]
    base = image or MetadataImage()
    return base.apply(records, base.offset + 1)


@dataclass
class _Partition:
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # (base offset, next offset, bytes)
    end: int = 0
    high_watermark: int = 0
    leader_epoch: int = 0
    led: bool = True
    waiters: list[tuple[int, asyncio.Future[ErrorCode]]] = field(default_factory=list)


class MemoryLog:
    """The partitions of one internal topic, in memory: a `CoordinatorLog`."""

    def __init__(self, topic: str, partitions: int, *, auto_replicate: bool = True) -> None:
        self._topic = topic
        self.auto_replicate = auto_replicate
        self.refuse: ErrorCode | None = None  # when set, every append fails with it
        self.parts = {p: _Partition() for p in range(partitions)}

    @property
    def topic(self) -> str:
        return self._topic

    def _leader(self, partition: int) -> _Partition:
        part = self.parts.get(partition)
        if part is None:
            raise KafkaError(ErrorCode.unknown_topic_or_partition)
        if not part.led:
            raise KafkaError(ErrorCode.not_leader_or_follower)
        return part

    # -- CoordinatorLog ----------------------------------------------------------------------------------------

    def append(self, partition: int, batch: bytes, verification_guard: object | None = None) -> Appended:
        part = self._leader(partition)
        if self.refuse is not None:
            raise KafkaError(self.refuse, "refused by the test")
        ((header, _),) = split_batches(batch, from_client=False)
        stored = part.end.to_bytes(8, "big", signed=True) + batch[8:]  # the base offset is outside the CRC
        first, last = part.end, part.end + header.last_offset_delta
        part.batches.append((first, last + 1, stored))
        part.end = last + 1
        if self.auto_replicate:
            self.replicate(partition)
        return Appended(first, last)

    async def await_durable(self, partition: int, end_offset: int, timeout_ms: int) -> ErrorCode:
        part = self.parts.get(partition)
        if part is None or not part.led:
            return ErrorCode.not_leader_or_follower
        if part.high_watermark >= end_offset:
            return ErrorCode.none
        future: asyncio.Future[ErrorCode] = asyncio.get_running_loop().create_future()
        part.waiters.append((end_offset, future))
        try:
            return await asyncio.wait_for(future, timeout_ms / 1000)
        except TimeoutError:
            return ErrorCode.request_timed_out

    def read_for_replay(self, partition: int) -> Iterator[bytes]:
        part = self._leader(partition)
        for _, _, data in list(part.batches):
            yield data

    def high_watermark(self, partition: int) -> int:
        return self._leader(partition).high_watermark

    def log_end_offset(self, partition: int) -> int:
        return self._leader(partition).end

    def leader_epoch(self, partition: int) -> int:
        return self._leader(partition).leader_epoch

    def needs_verification(self, partition: int, producer_id: int, producer_epoch: int) -> bool:
        self._leader(partition)
        return False

    def verification_guard(self, partition: int, producer_id: int) -> object:
        self._leader(partition)
        return object()

    # -- what tests do to it -----------------------------------------------------------------------------------

    def replicate(self, partition: int) -> None:
        """Every in-sync replica now has the whole log: the high watermark reaches the log end."""
        part = self.parts[partition]
        part.high_watermark = part.end
        keep = []
        for offset, future in part.waiters:
            if future.done():
                continue
            if offset <= part.high_watermark:
                future.set_result(ErrorCode.none)
            else:
                keep.append((offset, future))
        part.waiters = keep

    def lose_unreplicated(self, partition: int) -> int:
        """A failover to a replica that has only what is below the high watermark: the rest is gone, and those
        waiting on it are told leadership moved. Returns the number of batches lost."""
        part = self.parts[partition]
        kept = [b for b in part.batches if b[1] <= part.high_watermark]
        lost = len(part.batches) - len(kept)
        part.batches = kept
        part.end = kept[-1][1] if kept else 0
        part.high_watermark = min(part.high_watermark, part.end)
        self.move_leadership(partition)
        return lost

    def move_leadership(self, partition: int) -> None:
        """A new leader epoch (the same node leads again): waiters are told leadership moved."""
        part = self.parts[partition]
        for _, future in part.waiters:
            if not future.done():
                future.set_result(ErrorCode.not_leader_or_follower)
        part.waiters = []
        part.leader_epoch += 1

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                      timestamp_ms: int = 0) -> Appended:
        """A transaction marker, as the transaction coordinator would have it written."""
        return self.append(partition, build_marker_batch(producer_id, producer_epoch, commit, 0, timestamp_ms))

    def records_count(self, partition: int) -> int:
        return sum(next_offset - base for base, next_offset, _ in self.parts[partition].batches)
