"""How share-partition leaders reach the share coordinator: the `StateStore` of `moldau.share.manager`.

The coordinator of a share-partition's state is the leader of its `__share_group_state` partition (see
`moldau.coordinator.share`): on this broker it is called directly; on another one it gets ReadShareGroupState v0
or WriteShareGroupState v0 on its `inter.broker.listener.name` endpoint, as Kafka's persister sends them.
Coordinator trouble (not there yet, moved, the topic being created) comes back as KafkaError or an error code;
the callers retry later.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import kio.schema.read_share_group_state.v0.request as read_req
import kio.schema.write_share_group_state.v0.request as write_req

from moldau.coordinator.share.records import ShareSnapshot, StateBatch, StateKey
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from moldau.server.broker import Broker

REQUEST_TIMEOUT_S = 10.0


class ShareStateLinks:
    def __init__(self, broker: Broker, authenticator: Authenticator | None = None) -> None:
        self._broker = broker
        self._pool = ConnectionPool(f"moldau-share-{broker.node_id}", broker.inter_broker_security, authenticator)

    def close(self) -> None:
        self._pool.close()

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
            response = await self._pool.request(*address, request, REQUEST_TIMEOUT_S)
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
            response = await self._pool.request(*address, request, REQUEST_TIMEOUT_S)
        except (ConnectionFailed, TimeoutError):
            return ErrorCode.coordinator_not_available
        ((result,),) = [r.partitions for r in response.results]
        return ErrorCode(result.error_code)
