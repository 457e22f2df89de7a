"""How share-partition leaders reach the share coordinator: the `StateStore` of `moldau.share.manager`.

The coordinator of a share-partition's state is the leader of its `__share_group_state` partition (see
`moldau.coordinator.share`): on this broker it is called directly; on another one it gets ReadShareGroupState,
WriteShareGroupState, InitializeShareGroupState, DeleteShareGroupState (v0) or ReadShareGroupStateSummary (v1) on
its `inter.broker.listener.name` endpoint, as Kafka's persister sends them. Coordinator trouble (not there yet,
moved, the topic being created) comes back as KafkaError or an error code; the callers retry later.

Besides the `StateStore` calls of one share-partition's leader, two calls span many share-partitions, one request
per coordinator: `delete_group_state` (DeleteGroups of a share group) and `share_state_summary` (what is durable
for each share-partition of a group, to describe its offsets). Describing a share group's lag also needs the high
watermark of partitions led by other brokers: `high_watermarks` asks their leaders (ListOffsets, latest), as
Kafka's group coordinator does for the lag of KIP-1226.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kio.schema.delete_share_group_state.v0.request as delete_req
import kio.schema.initialize_share_group_state.v0.request as init_req
import kio.schema.list_offsets.v8.request as lo_req
import kio.schema.read_share_group_state.v0.request as read_req
import kio.schema.read_share_group_state_summary.v1.request as summary_req
import kio.schema.write_share_group_state.v0.request as write_req

from moldau.coordinator.share.records import ShareSnapshot, StateBatch, StateKey
from moldau.coordinator.share.state import delivery_complete_count
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from moldau.server.broker import Broker

# ListOffsets as a consumer asks it: the latest offset a read_uncommitted consumer may read is the high watermark.
LATEST_TIMESTAMP, CONSUMER_REPLICA_ID, READ_UNCOMMITTED = -1, -1, 0
INITIAL_STATE_EPOCH = 0

Partition = tuple[uuid.UUID, int]  # (topic id, partition)


@dataclass(frozen=True, slots=True)
class StateSummary:
    """What the share coordinator holds for one share-partition (ReadShareGroupStateSummary's answer).
    state_epoch -1 and start_offset -1: no state (never consumed, or deleted); error set: unknown right now."""

    error: ErrorCode
    state_epoch: int = -1
    leader_epoch: int = -1
    start_offset: int = -1
    delivery_complete_count: int = -1


def summary_of(snapshot: ShareSnapshot | None) -> StateSummary:
    if snapshot is None:
        return StateSummary(ErrorCode.none)
    return StateSummary(ErrorCode.none, snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset,
                        delivery_complete_count(snapshot))


class ShareStateLinks:
    def __init__(self, broker: Broker, authenticator: Authenticator | None = None) -> None:
        self._broker = broker
        self._pool = ConnectionPool(f"moldau-share-{broker.node_id}", broker.inter_broker_security, authenticator,
                                    broker.client_timeouts.setup)
        self._timeout_s = broker.client_timeouts.request_timeout_s  # request.timeout.ms

    def close(self) -> None:
        self._pool.close()

    async def _call(self, address: tuple[str, int], request: Any) -> Any:
        """One request to another broker's share coordinator. Raises KafkaError when it cannot be reached."""
        try:
            return await self._pool.request(*address, request, self._timeout_s)
        except (ConnectionFailed, TimeoutError) as exc:
            raise KafkaError(ErrorCode.coordinator_not_available, str(exc)) from exc

    def _address(self, key: StateKey) -> tuple[str, int] | None:
        """None: the coordinator is this broker. Raises KafkaError."""
        node = self._broker.share_state.coordinator_node(key)
        if node == self._broker.node_id:
            return None
        address = self._broker.inter_broker_address(node)
        if address is None:
            raise KafkaError(ErrorCode.coordinator_not_available, f"no address for broker {node}")
        return address

    async def read(self, key: StateKey, leader_epoch: int) -> ShareSnapshot | None:
        """The share-partition's durable state (None: never written). Raises KafkaError."""
        address = self._address(key)
        if address is None:
            return self._broker.share_state.read(key, leader_epoch)
        request = make(read_req.ReadShareGroupStateRequest, group_id=key.group_id, topics=(make(
            read_req.ReadStateData, topic_id=key.topic_id, partitions=(make(
                read_req.PartitionData, partition=key.partition, leader_epoch=leader_epoch),)),))
        try:
            response = await self._pool.request(*address, request, self._timeout_s)
        except (ConnectionFailed, TimeoutError) as exc:
            raise KafkaError(ErrorCode.coordinator_not_available, str(exc)) from exc
        ((result,),) = [r.partitions for r in response.results]
        if result.error_code != ErrorCode.none:
            raise KafkaError(ErrorCode(result.error_code), result.error_message or "")
        if result.state_epoch < 0:
            return None
        return ShareSnapshot(0, result.state_epoch, leader_epoch, result.start_offset, tuple(
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in result.state_batches))

    async def write(self, key: StateKey, snapshot: ShareSnapshot) -> ErrorCode:
        try:
            address = self._address(key)
        except KafkaError as exc:
            return exc.code
        if address is None:
            return await self._broker.share_state.write(key, snapshot, self._broker.clock.time_ms())
        request = make(write_req.WriteShareGroupStateRequest, group_id=key.group_id, topics=(make(
            write_req.WriteStateData, topic_id=key.topic_id, partitions=(make(
                write_req.PartitionData, partition=key.partition, state_epoch=snapshot.state_epoch,
                leader_epoch=snapshot.leader_epoch, start_offset=snapshot.start_offset,
                state_batches=tuple(make(write_req.StateBatch, first_offset=b.first_offset,
                                         last_offset=b.last_offset, delivery_state=b.delivery_state,
                                         delivery_count=b.delivery_count) for b in snapshot.batches)),)),))
        try:
            response = await self._pool.request(*address, request, self._timeout_s)
        except (ConnectionFailed, TimeoutError):
            return ErrorCode.coordinator_not_available
        ((result,),) = [r.partitions for r in response.results]
        return ErrorCode(result.error_code)

    async def initialize(self, key: StateKey, start_offset: int) -> ErrorCode:
        try:
            address = self._address(key)
            if address is None:
                return await self._broker.share_state.initialize(key, INITIAL_STATE_EPOCH, start_offset,
                                                                 self._broker.clock.time_ms())
            response = await self._call(address, make(
                init_req.InitializeShareGroupStateRequest, group_id=key.group_id, topics=(make(
                    init_req.InitializeStateData, topic_id=key.topic_id, partitions=(make(
                        init_req.PartitionData, partition=key.partition, state_epoch=INITIAL_STATE_EPOCH,
                        start_offset=start_offset),)),)))
        except KafkaError as exc:
            return exc.code
        ((result,),) = [r.partitions for r in response.results]
        return ErrorCode(result.error_code)

    async def delete(self, key: StateKey) -> ErrorCode:
        """Delete one share-partition's state (an administrator's DeleteShareGroupOffsets)."""
        codes = await self.delete_group_state(key.group_id, [(key.topic_id, key.partition)])
        return codes[(key.topic_id, key.partition)]

    def _by_coordinator(self, group_id: str, partitions: Iterable[Partition]
                        ) -> tuple[dict[int | None, list[StateKey]], dict[Partition, ErrorCode]]:
        """The share-partitions' keys by coordinator (None: this broker), and those whose coordinator is unknown."""
        by_node: dict[int | None, list[StateKey]] = {}
        failed: dict[Partition, ErrorCode] = {}
        if not self._broker.share_state.partitions.topic_exists():
            return by_node, failed  # no share-partition has a state yet: nothing to ask anyone
        for topic_id, partition in partitions:
            key = StateKey(group_id, topic_id, partition)
            try:
                node = self._broker.share_state.coordinator_node(key)
            except KafkaError as exc:
                failed[(topic_id, partition)] = exc.code
                continue
            by_node.setdefault(None if node == self._broker.node_id else node, []).append(key)
        return by_node, failed

    async def delete_group_state(self, group_id: str, partitions: Iterable[Partition]) -> dict[Partition, ErrorCode]:
        """Delete the group's state of each share-partition (DeleteShareGroupState, one request per coordinator);
        the error of each, ErrorCode.none also where there was no state."""
        partitions = list(partitions)
        out = dict.fromkeys(partitions, ErrorCode.none)
        by_node, failed = self._by_coordinator(group_id, partitions)
        out.update(failed)
        answers = await asyncio.gather(*(self._delete_at(node, group_id, keys) for node, keys in by_node.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _delete_at(self, node: int | None, group_id: str, keys: list[StateKey]) -> dict[Partition, ErrorCode]:
        if node is None:
            now = self._broker.clock.time_ms()
            codes = await asyncio.gather(*(self._broker.share_state.delete(k, now) for k in keys))
            return {(k.topic_id, k.partition): c for k, c in zip(keys, codes, strict=True)}
        topics: dict[uuid.UUID, list[Any]] = {}
        for k in keys:
            topics.setdefault(k.topic_id, []).append(make(delete_req.PartitionData, partition=k.partition))
        request = make(delete_req.DeleteShareGroupStateRequest, group_id=group_id, topics=tuple(
            make(delete_req.DeleteStateData, topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()))
        try:
            response = await self._remote(node, request)
        except KafkaError as exc:
            return {(k.topic_id, k.partition): exc.code for k in keys}
        return {(r.topic_id, p.partition): ErrorCode(p.error_code) for r in response.results for p in r.partitions}

    async def share_state_summary(self, group_id: str, partitions: Iterable[Partition]
                                  ) -> dict[Partition, StateSummary]:
        """What the share coordinators hold for the group on each share-partition (ReadShareGroupStateSummary,
        one request per coordinator): its state epoch, SPSO and how many records past the SPSO are done. Never
        raises: a share-partition whose coordinator cannot be reached gets the error."""
        partitions = list(partitions)
        out = {p: StateSummary(ErrorCode.none) for p in partitions}  # no state, unless a coordinator has one
        by_node, failed = self._by_coordinator(group_id, partitions)
        out.update({p: StateSummary(code) for p, code in failed.items()})
        answers = await asyncio.gather(*(self._summary_at(node, group_id, keys) for node, keys in by_node.items()))
        for answer in answers:
            out.update(answer)
        return out

    async def _summary_at(self, node: int | None, group_id: str, keys: list[StateKey]
                          ) -> dict[Partition, StateSummary]:
        if node is None:
            out = {}
            for k in keys:
                try:
                    out[(k.topic_id, k.partition)] = summary_of(self._broker.share_state.summary(k))
                except KafkaError as exc:
                    out[(k.topic_id, k.partition)] = StateSummary(exc.code)
            return out
        topics: dict[uuid.UUID, list[Any]] = {}
        for k in keys:
            topics.setdefault(k.topic_id, []).append(make(summary_req.PartitionData, partition=k.partition,
                                                          leader_epoch=-1))
        request = make(summary_req.ReadShareGroupStateSummaryRequest, group_id=group_id, topics=tuple(
            make(summary_req.ReadStateSummaryData, topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()))
        try:
            response = await self._remote(node, request)
        except KafkaError as exc:
            return {(k.topic_id, k.partition): StateSummary(exc.code) for k in keys}
        return {(r.topic_id, p.partition): StateSummary(ErrorCode(p.error_code), p.state_epoch, p.leader_epoch,
                                                        p.start_offset, p.delivery_complete_count)
                for r in response.results for p in r.partitions}

    async def high_watermarks(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The high watermark of each (topic, partition) led by another broker, one ListOffsets per leader. Never
        raises: a partition without a leader, or whose leader cannot be asked, is left out."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        topics = self._broker.image.topics_by_name
        for topic, partition in partitions:
            image = topics[topic].partitions.get(partition) if topic in topics else None
            if image is not None and image.leader >= 0 and image.leader != self._broker.node_id:
                by_leader.setdefault(image.leader, []).append((topic, partition))
        out: dict[tuple[str, int], int] = {}
        for answer in await asyncio.gather(*(self._latest_at(node, keys) for node, keys in by_leader.items())):
            out.update(answer)
        return out

    async def _latest_at(self, node: int, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in keys:
            by_topic.setdefault(topic, []).append(make(lo_req.ListOffsetsPartition, partition_index=partition,
                                                       timestamp=LATEST_TIMESTAMP))
        request = make(lo_req.ListOffsetsRequest, replica_id=CONSUMER_REPLICA_ID, isolation_level=READ_UNCOMMITTED,
                       topics=tuple(make(lo_req.ListOffsetsTopic, name=t, partitions=tuple(ps))
                                    for t, ps in by_topic.items()))
        try:
            response = await self._remote(node, request)
        except KafkaError:
            return {}
        return {(t.name, p.partition_index): p.offset for t in response.topics for p in t.partitions
                if p.error_code == ErrorCode.none and p.offset >= 0}

    async def _remote(self, node: int, request: Any) -> Any:
        address = self._broker.inter_broker_address(node)
        if address is None:
            raise KafkaError(ErrorCode.coordinator_not_available, f"no address for broker {node}")
        return await self._call(address, request)
