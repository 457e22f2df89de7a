"""How a broker's replica manager reaches other nodes: leaders to fetch from, and the controller for ISR changes.

Followers connect to a leader's endpoint on `inter.broker.listener.name` (the leader's registration lists one
endpoint per listener), each replica fetcher over a connection pool of its own (one connection per fetcher and
leader, as Kafka's fetcher threads have), so replication traffic never queues behind a client's requests, nor one
fetcher's long poll behind another's. ISR changes go to the active controller as AlterPartition v3, or straight
to the controller object when this node is the active controller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import kio.schema.alter_partition.v3.request as ap_req
import kio.schema.alter_partition.v3.response as ap_resp

from moldau.net.client import Authenticator, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.replication.fetcher import ReplicaFetcher
from moldau.replication.replica_manager import IsrAnswer, IsrProposal, ReplicaManager
from moldau.server.controller_channel import ControllerUnavailable, not_controller_in
from moldau.server.handlers import alter_partition

if TYPE_CHECKING:
    from moldau.server.broker import Broker

ALTER_PARTITION_TIMEOUT_S = 10.0


class ReplicaLinks:
    def __init__(self, broker: Broker, replicas: ReplicaManager, authenticator: Authenticator | None = None) -> None:
        self._broker = broker
        self._replicas = replicas
        self._authenticator = authenticator
        replicas.alter_isr = self.alter_isr
        replicas.start_fetcher = self.start_fetcher
        replicas.broker_epoch = self.broker_epoch

    def broker_epoch(self) -> int:
        lifecycle = self._broker.lifecycle
        return lifecycle.broker_epoch if lifecycle is not None else -1

    def start_fetcher(self, leader_id: int, fetcher_id: int) -> ReplicaFetcher:
        broker = self._broker
        # TLS and SASL on each connection as the inter-broker listener's protocol asks (moldau.security).
        pool = ConnectionPool(f"moldau-replica-fetcher-{broker.node_id}-{fetcher_id}", broker.inter_broker_security,
                              self._authenticator, broker.client_timeouts.setup,
                              receive_buffer_bytes=broker.config.replica_socket_receive_buffer_bytes)
        return ReplicaFetcher(leader_id, self._replicas, pool, broker.inter_broker_address,
                              self._replicas.fetcher_settings, broker.clock, fetcher_id)

    async def alter_isr(self, proposal: IsrProposal) -> IsrAnswer:
        broker_epoch = self.broker_epoch()
        part = make(ap_req.PartitionData, partition_index=proposal.partition, leader_epoch=proposal.leader_epoch,
                    new_isr_with_epochs=tuple(make(ap_req.BrokerState, broker_id=b, broker_epoch=e)
                                              for b, e in zip(proposal.isr, proposal.member_epochs, strict=True)),
                    partition_epoch=proposal.partition_epoch)
        request = make(ap_req.AlterPartitionRequest, broker_id=self._broker.node_id, broker_epoch=broker_epoch,
                       topics=(make(ap_req.TopicData, topic_id=proposal.topic_id, partitions=(part,)),))
        controller = self._broker.controller

        async def local(req: Any) -> Any:
            return await alter_partition.serve(controller, req, ap_resp, ap_resp.AlterPartitionResponse)

        try:
            response = await self._broker.channel.call(request, local, ALTER_PARTITION_TIMEOUT_S,
                                                       retry_if=not_controller_in)
        except ControllerUnavailable:
            return IsrAnswer(ErrorCode.request_timed_out)
        return _answer(response)


def _answer(response: Any) -> IsrAnswer:
    if response.error_code != ErrorCode.none:
        return IsrAnswer(ErrorCode(response.error_code))
    for topic in response.topics:
        for part in topic.partitions:
            if part.error_code != ErrorCode.none:
                return IsrAnswer(ErrorCode(part.error_code))
            return IsrAnswer(ErrorCode.none, tuple(part.isr), part.leader_epoch, part.partition_epoch)
    return IsrAnswer(ErrorCode.unknown_server_error)
