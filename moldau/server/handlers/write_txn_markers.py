"""WriteTxnMarkers (key 27): end a transaction on partitions led here by writing its commit or abort marker.

Sent by transaction coordinators (and by `moldau transactions abort`, Kafka's abortTransaction admin call, to
end a hanging transaction whose coordinator has forgotten it). Each marker is appended as a control batch and
answered once it is on every in-sync replica, as Kafka writes markers with acks=all. A marker on a
`__consumer_offsets` partition also tells the group coordinator to make the transaction's offsets visible (commit)
or drop them (abort).

Per-partition errors: UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS (ISR below
min.insync.replicas), INVALID_PRODUCER_EPOCH (a marker older than the producer's epoch),
TRANSACTION_COORDINATOR_FENCED (a marker from an older coordinator), REQUEST_TIMED_OUT.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from moldau.coordinator.group.records import OFFSETS_TOPIC
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api

if TYPE_CHECKING:
    from moldau.replication.replica_manager import HostedPartition
    from moldau.server.services import BrokerServices

MARKER_ACK_TIMEOUT_MS = 10_000

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class MarkerSpec:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    specs = [MarkerSpec(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                        tuple((t.name, p) for t in m.topics for p in t.partition_indexes)) for m in request.markers]
    if ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        answers = await asyncio.gather(*(write_markers(ctx.broker, spec) for spec in specs))
    else:  # only nodes (transaction coordinators) may write markers
        answers = [dict.fromkeys(spec.partitions, ErrorCode.cluster_authorization_failed) for spec in specs]
    partition_cls = ctx.nested("WritableTxnMarkerPartitionResult")
    topic_cls = ctx.nested("WritableTxnMarkerTopicResult")
    for spec, answer in zip(specs, answers, strict=True):
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in answer.items():
            by_topic.setdefault(topic, []).append(make(partition_cls, partition_index=partition, error_code=code))
        topics = tuple(make(topic_cls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
        results.append(make(ctx.nested("WritableTxnMarkerResult"), producer_id=spec.producer_id, topics=topics))
    return make(ctx.schema.response_type, markers=tuple(results))


async def write_markers(broker: BrokerServices, spec: MarkerSpec) -> dict[TopicPartition, ErrorCode]:
    """Append the marker to each partition (led here) and wait for the ISR; one error per partition."""
    replicas = broker.replicas
    results: dict[TopicPartition, ErrorCode] = {}
    written: list[tuple[TopicPartition, HostedPartition, int]] = []
    for topic, partition in spec.partitions:
        try:
            hosted = replicas.leader_partition(topic, partition)
            appended = replicas.append_marker(hosted, spec.producer_id, spec.producer_epoch, spec.commit,
                                              spec.coordinator_epoch)
        except KafkaError as exc:
            results[(topic, partition)] = exc.code
            continue
        written.append(((topic, partition), hosted, appended.last_offset + 1))
    codes = await asyncio.gather(*(replicas.wait_for_acks(hosted, end, MARKER_ACK_TIMEOUT_MS)
                                   for _, hosted, end in written))
    for (tp, _, _), code in zip(written, codes, strict=True):
        results[tp] = code
        if code == ErrorCode.none and tp[0] == OFFSETS_TOPIC:
            broker.groups.complete_transaction(tp[1], spec.producer_id, spec.commit)
    return results


API = Api(key=27, name="WriteTxnMarkers", min_version=1, max_version=1, handle=handle)
