"""How transactions reach other brokers: markers to partition leaders, and KIP-890 checks with the coordinator.

- `write_markers` (the coordinator's `MarkerWriter`): groups a transaction's partitions by leader, writes the
  markers of partitions led here directly and sends WriteTxnMarkers v1 to the other leaders, on their
  `inter.broker.listener.name` endpoints. Partitions of deleted topics count as done: nobody can read them.
- `verify` (the produce path): before a producer's first transactional write to a partition, ask the
  transaction coordinator, here or remote (AddPartitionsToTxn v4 with verify_only), whether the partition is in the
  producer's open transaction. Coordinator trouble is answered NOT_ENOUGH_REPLICAS, a retriable error for every
  producer, as Kafka does, rather than an error that would abort the transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import kio.schema.add_partitions_to_txn.v4.request as aptxn_req
import kio.schema.write_txn_markers.v1.request as wtm_req

from moldau.coordinator.txn.coordinator import MarkerJob
from moldau.coordinator.txn.records import TopicPartition
from moldau.net.client import Authenticator, ConnectionFailed, ConnectionPool
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.handlers import write_txn_markers
from moldau.server.handlers.write_txn_markers import MarkerSpec

if TYPE_CHECKING:
    from moldau.server.broker import Broker

_RETRIABLE_VERIFY_ERRORS = (ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                            ErrorCode.coordinator_load_in_progress)


class TxnLinks:
    def __init__(self, broker: Broker, authenticator: Authenticator | None = None) -> None:
        self._broker = broker
        self._pool = ConnectionPool(f"moldau-txn-{broker.node_id}", broker.inter_broker_security, authenticator,
                                    broker.client_timeouts.setup)
        self._timeout_s = broker.client_timeouts.request_timeout_s  # request.timeout.ms

    def close(self) -> None:
        self._pool.close()

    # -- markers ---------------------------------------------------------------------------------------------

    async def write_markers(self, job: MarkerJob, partitions: frozenset[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        results: dict[TopicPartition, ErrorCode] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        image = self._broker.image
        for topic, partition in sorted(partitions):
            found = image.topics_by_name.get(topic)
            if found is None or partition not in found.partitions:
                results[(topic, partition)] = ErrorCode.none  # deleted: no reader is left to protect
                continue
            leader = found.partitions[partition].leader
            if leader < 0:
                results[(topic, partition)] = ErrorCode.leader_not_available
                continue
            by_leader.setdefault(leader, []).append((topic, partition))
        answers = await asyncio.gather(*(self._write_on(leader, job, tps) for leader, tps in by_leader.items()))
        for answer in answers:
            results.update(answer)
        return results

    async def _write_on(self, leader: int, job: MarkerJob, partitions: list[TopicPartition]
                        ) -> dict[TopicPartition, ErrorCode]:
        spec = MarkerSpec(job.producer_id, job.producer_epoch, job.commit, job.coordinator_epoch, tuple(partitions))
        if leader == self._broker.node_id:
            return await write_txn_markers.write_markers(self._broker, spec)
        address = self._broker.inter_broker_address(leader)
        if address is None:
            return dict.fromkeys(partitions, ErrorCode.leader_not_available)
        try:
            response = await self._pool.request(*address, _marker_request(spec), self._timeout_s)
        except (ConnectionFailed, TimeoutError):
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        return {(t.name, p.partition_index): ErrorCode(p.error_code)
                for marker in response.markers for t in marker.topics for p in t.partitions}

    # -- verification ----------------------------------------------------------------------------------------

    async def verify(self, transactional_id: str, producer_id: int, epoch: int,
                     partition: TopicPartition) -> ErrorCode:
        """Whether `partition` is in the producer's open transaction (ErrorCode.none if so)."""
        txn = self._broker.txn
        try:
            node = txn.coordinator.coordinator_node(transactional_id)
        except KafkaError:
            return ErrorCode.not_enough_replicas
        if node == self._broker.node_id:
            code = txn.verify_partitions(transactional_id, producer_id, epoch, [partition])[partition]
        else:
            code = await self._verify_remote(node, transactional_id, producer_id, epoch, partition)
        return ErrorCode.not_enough_replicas if code in _RETRIABLE_VERIFY_ERRORS else code

    async def _verify_remote(self, node: int, transactional_id: str, producer_id: int, epoch: int,
                             partition: TopicPartition) -> ErrorCode:
        address = self._broker.inter_broker_address(node)
        if address is None:
            return ErrorCode.coordinator_not_available
        request = make(aptxn_req.AddPartitionsToTxnRequest, transactions=(make(
            aptxn_req.AddPartitionsToTxnTransaction, transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=epoch, verify_only=True,
            topics=(make(aptxn_req.AddPartitionsToTxnTopic, name=partition[0], partitions=(partition[1],)),)),))
        try:
            response = await self._pool.request(*address, request, self._timeout_s)
        except (ConnectionFailed, TimeoutError):
            return ErrorCode.coordinator_not_available
        if response.error_code != ErrorCode.none:
            return ErrorCode(response.error_code)
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    return ErrorCode(p.partition_error_code)
        return ErrorCode.unknown_server_error


def _marker_request(spec: MarkerSpec) -> Any:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in spec.partitions:
        by_topic.setdefault(topic, []).append(partition)
    topics: Sequence[Any] = tuple(make(wtm_req.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                                  for t, ps in by_topic.items())
    marker = make(wtm_req.WritableTxnMarker, producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                  transaction_result=spec.commit, topics=topics, coordinator_epoch=spec.coordinator_epoch)
    return make(wtm_req.WriteTxnMarkersRequest, markers=(marker,))
