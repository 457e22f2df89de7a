"""The skeleton every coordinator shares: keys placed on the partitions of an internal topic, and the shards of
the partitions this node leads, loaded by replaying their log and dropped when leadership moves.

A coordinator (groups, transactions, and later share groups) owns one `CoordinatorShards`, parameterised by its
shard type, and supplies what differs: how a partition's records replay into a shard (the `load` callback given
to `follow`) and what to do with a shard it no longer holds. What is the same lives here:

- `partition_of(key)`: Kafka's placement, `abs(javaStringHashCode(key)) % partitions`, over the topic's
  partition count once it exists, else the configured count;
- `coordinator_node(key)`: the node leading the key's partition, asking for the topic to be created first;
- `shard(key)` / `find(key)`: the key's shard if this node coordinates it (raising NOT_COORDINATOR or
  COORDINATOR_NOT_AVAILABLE, or None, never creating the topic);
- `follow(image, load)`: following a metadata image, unload the shards of partitions no longer led here (or
  whose leader epoch a coordinator keys its shards by has moved), then load those newly led, in partition order.

Nothing here reads a clock or awaits; appends and reads go through the coordinator's `CoordinatorLog`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from moldau.coordinator.log import CoordinatorLog
from moldau.coordinator.record_codec import partition_for
from moldau.metadata.image import MetadataImage
from moldau.protocol.errors import ErrorCode, KafkaError

__all__ = ["CoordinatorShards"]

S = TypeVar("S")

# Whether a loaded shard still stands, given its partition's leader epoch in the new image.
Keep = Callable[[S, int], bool]


class CoordinatorShards(Generic[S]):
    """The shards (of type S) of the internal-topic partitions this node leads, and where keys live.

    `recheck_after_request`: after asking for the topic, look again, for a caller that creates it at once.
    `no_leader_message`: COORDINATOR_NOT_AVAILABLE's message when the key's partition has no leader."""

    def __init__(self, node_id: int, log: CoordinatorLog, default_partitions: Callable[[], int],
                 image: Callable[[], MetadataImage], request_topic: Callable[[], None], *,
                 recheck_after_request: bool = False, no_leader_message: str | None = None) -> None:
        self.node_id = node_id
        self.log = log
        self.topic = log.topic
        self._default_partitions = default_partitions
        self._image = image
        self._request_topic = request_topic
        self._recheck_after_request = recheck_after_request
        self._no_leader_message = no_leader_message
        self.shards: dict[int, S] = {}

    # -- where keys live -----------------------------------------------------------------------------------

    def topic_exists(self) -> bool:
        return self.topic in self._image().topics_by_name

    def ensure_topic(self) -> None:
        """Raise COORDINATOR_NOT_AVAILABLE, and ask for the topic to be created, if it does not exist.

        Creation goes through the active controller, possibly on another node, so it usually cannot finish
        inside this call; clients retry on COORDINATOR_NOT_AVAILABLE, as they do against Kafka."""
        if self.topic_exists():
            return
        self._request_topic()
        if self._recheck_after_request and self.topic_exists():
            return
        raise KafkaError(ErrorCode.coordinator_not_available, f"{self.topic} is being created")

    def partition_of(self, key: str) -> int:
        topic = self._image().topics_by_name.get(self.topic)
        count = len(topic.partitions) if topic else self._default_partitions()
        return partition_for(key, count)

    def coordinator_node(self, key: str) -> int:
        """The node leading the key's partition, asking for the topic first if need be. Raises KafkaError."""
        self.ensure_topic()
        topic = self._image().topics_by_name[self.topic]
        leader = topic.partitions[self.partition_of(key)].leader
        if leader < 0:
            if self._no_leader_message is None:
                raise KafkaError(ErrorCode.coordinator_not_available)
            raise KafkaError(ErrorCode.coordinator_not_available, self._no_leader_message)
        return leader

    def shard(self, key: str) -> S:
        """The shard of a key coordinated here. Raises KafkaError (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
        self.ensure_topic()
        shard = self.shards.get(self.partition_of(key))
        if shard is None:
            raise KafkaError(ErrorCode.not_coordinator)
        return shard

    def find(self, key: str) -> S | None:
        """The key's shard if it is loaded here; never asks for the topic."""
        if not self.topic_exists():
            return None
        return self.shards.get(self.partition_of(key))

    # -- following leadership --------------------------------------------------------------------------------

    def led(self, image: MetadataImage) -> dict[int, int]:
        """The partitions of the topic this node leads in `image`, and their leader epochs."""
        topic = image.topics_by_name.get(self.topic)
        if topic is None:
            return {}
        return {p.partition: p.leader_epoch for p in topic.partitions.values() if p.leader == self.node_id}

    def follow(self, image: MetadataImage, load: Callable[[int, int], S | None],
               keep: Keep[S] | None = None) -> list[S]:
        """Unload the shards not led here in `image` (or that `keep` refuses), then load those newly led with
        `load(partition, leader_epoch)` (None: not loadable yet, a later image retries). Returns the unloaded
        shards, for the coordinator to answer whatever waited on them."""
        led = self.led(image)
        unloaded: list[S] = []
        for partition in sorted(self.shards):
            epoch = led.get(partition)
            if epoch is None or (keep is not None and not keep(self.shards[partition], epoch)):
                unloaded.append(self.shards.pop(partition))
        for partition, epoch in sorted(led.items()):
            if partition not in self.shards:
                shard = load(partition, epoch)
                if shard is not None:
                    self.shards[partition] = shard
        return unloaded

    def is_loadable(self, partition: int) -> bool:
        """Whether the log has the partition led here yet: the image may move ahead of the replica manager, or
        the partition could not be created (a full disk). A later image loads it."""
        try:
            self.log.leader_epoch(partition)
        except KafkaError:
            return False
        return True

    def clear(self) -> list[S]:
        """Drop every shard (closing); returns them."""
        shards = list(self.shards.values())
        self.shards.clear()
        return shards
