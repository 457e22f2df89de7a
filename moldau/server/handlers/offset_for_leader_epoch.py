"""OffsetForLeaderEpoch (key 23): the end offset of a leader epoch in the leader's log (KIP-101, KIP-279).

Consumers send it after a leader change to check that their position is still on the leader's log
(KIP-320); followers send it (with their replica id, v3+) to find where to truncate. Both are answered the
same way, by the partition's leader only: (the largest epoch <= the requested one, where that epoch ends),
see `LeaderEpochCache.end_offset_for`. An epoch the log cannot place is answered with no error and
(-1, -1), as Kafka does. Versions 0 and 1 (removed in Kafka 4.0) are not served.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE

UNDEFINED_EPOCH = UNDEFINED_OFFSET = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    topic_cls = ctx.nested("OffsetForLeaderTopicResult")
    # A follower (replica id >= 0, v3+) needs CLUSTER_ACTION on the cluster, a consumer DESCRIBE on each topic.
    follower = getattr(request, "replica_id", -1) >= 0
    may_replicate = follower and ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed(topic: str) -> bool:
        return may_replicate if follower else ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    topics = tuple(
        make(topic_cls, topic=t.topic, partitions=tuple(_partition(ctx, t.topic, p) if allowed(t.topic) else
                                                        _refused(ctx, p) for p in t.partitions))
        for t in request.topics
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics)


def _refused(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.nested("EpochEndOffset"), partition=request.partition,
                error_code=ErrorCode.topic_authorization_failed, leader_epoch=UNDEFINED_EPOCH,
                end_offset=UNDEFINED_OFFSET)


def _partition(ctx: RequestContext, topic: str, request: Any) -> Any:
    cls = ctx.nested("EpochEndOffset")
    index = request.partition
    try:
        replicas = ctx.broker.replicas
        hosted = replicas.leader_partition(topic, index)
        replicas.check_leader_epoch(hosted, request.current_leader_epoch)
        epoch, end_offset = hosted.log.end_offset_for_epoch(request.leader_epoch)
    except KafkaError as exc:
        return make(cls, partition=index, error_code=exc.code, leader_epoch=UNDEFINED_EPOCH,
                    end_offset=UNDEFINED_OFFSET)
    return make(cls, partition=index, error_code=ErrorCode.none, leader_epoch=epoch, end_offset=end_offset)


API = Api(key=23, name="OffsetForLeaderEpoch", min_version=2, max_version=4, handle=handle)
