"""What ShareFetch and ShareAcknowledge share: applying a member's acknowledgements to share-partitions led here,
and the leader fields of their partition answers (with KIP-951's hints where a partition is not led here)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.replication.replica_manager import HostedPartition
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.leader_hints import current_leader, leader_endpoints
from moldau.share.partition import AckBatch, AcknowledgeError

NO_LEADER = (-1, -1)


@dataclass(slots=True)
class PartitionOutcome:
    """What one partition's answer says: an error, an acknowledgement error, and the leader."""

    error: ErrorCode = ErrorCode.none
    message: str | None = None
    ack_error: ErrorCode = ErrorCode.none
    ack_message: str | None = None
    leader: tuple[int, int] = NO_LEADER


def led_partition(ctx: RequestContext, topic_id: uuid.UUID | None, partition: int) -> tuple[str, HostedPartition]:
    """The topic name and the partition, led here and readable by the principal; raises KafkaError."""
    topic = ctx.broker.image.topics_by_id.get(topic_id) if topic_id is not None else None
    if topic is None:
        raise KafkaError(ErrorCode.unknown_topic_id, f"no topic with id {topic_id}")
    if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name):
        raise KafkaError(ErrorCode.topic_authorization_failed, f"{ctx.principal} may not READ {topic.name}")
    return topic.name, ctx.broker.replicas.leader_partition(topic.name, partition)


def may_cluster_action(ctx: RequestContext) -> bool:
    """The inter-broker share state APIs are for brokers: CLUSTER_ACTION on the cluster."""
    return ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)


def leader_of(ctx: RequestContext, hosted: HostedPartition) -> tuple[int, int]:
    return ctx.broker.node_id, hosted.leader_epoch


async def acknowledge(ctx: RequestContext, group_id: str, member_id: str, topic_id: uuid.UUID | None,
                      partition: int, batches: Any) -> PartitionOutcome:
    """Apply one partition's AcknowledgementBatches and make them durable; the outcome names the
    acknowledgement's error (the write's, when the share coordinator refused it)."""
    share = ctx.broker.share
    try:
        name, hosted = led_partition(ctx, topic_id, partition)
    except KafkaError as exc:
        return PartitionOutcome(ack_error=exc.code, ack_message=exc.message)
    outcome = PartitionOutcome(leader=leader_of(ctx, hosted))
    plog = hosted.log
    try:
        found = await share.share_partition(group_id, name, partition, hosted.topic_id, hosted.leader_epoch,
                                            plog.log_start_offset, plog.high_watermark)
        found.acknowledge(member_id, [AckBatch(b.first_offset, b.last_offset,
                                               tuple(int(t) for t in b.acknowledge_types)) for b in batches],
                          share.now_ms())
    except KafkaError as exc:
        outcome.ack_error, outcome.ack_message = exc.code, exc.message
        return outcome
    except AcknowledgeError as exc:
        outcome.ack_error, outcome.ack_message = exc.code, exc.message
        return outcome
    share.notify()
    written = await share.persist((group_id, name, partition))
    if written != ErrorCode.none:
        outcome.ack_error, outcome.ack_message = written, "the acknowledgement could not be made durable"
    return outcome


def leader_hints(ctx: RequestContext, outcomes: Mapping[tuple[uuid.UUID, int], PartitionOutcome]) -> tuple[Any, ...]:
    """KIP-951 as ShareFetch and ShareAcknowledge carry it: a partition refused with NOT_LEADER_OR_FOLLOWER names
    its leader (`moldau.server.handlers.leader_hints`); the response's NodeEndpoints give those leaders' addresses."""
    leaders = set()
    for (topic_id, partition), outcome in outcomes.items():
        if ErrorCode.not_leader_or_follower in (outcome.error, outcome.ack_error):
            leader = current_leader(ctx, topic_id, partition)
            if leader is not None:
                outcome.leader = leader
                leaders.add(leader[0])
    return tuple(make(ctx.nested("NodeEndpoint"), node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
                 for e in leader_endpoints(ctx, leaders))


def leader_field(ctx: RequestContext, outcome: PartitionOutcome) -> Any:
    leader_id, epoch = outcome.leader
    return make(ctx.nested("LeaderIdAndEpoch"), leader_id=leader_id, leader_epoch=epoch)
