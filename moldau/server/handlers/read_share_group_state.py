"""ReadShareGroupState (key 84): a share-partition leader reads the durable state of its share-partition from
the share coordinator (`moldau.coordinator.share`).

A share-partition never written answers state epoch -1 (its leader then starts it from
`share.auto.offset.reset`). NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and FENCED_LEADER_EPOCH (a leader older
than the last one seen) are per partition. Between brokers: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.share.records import StateKey
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import error_message


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.schema.response_type, results=tuple(
        make(ctx.nested("ReadStateResult"), topic_id=t.topic_id,
             partitions=tuple(_read(ctx, request.group_id, t.topic_id, p) for p in t.partitions))
        for t in request.topics))


def _read(ctx: RequestContext, group_id: str, topic_id: Any, p: Any) -> Any:
    cls = ctx.nested("PartitionResult")
    try:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            raise KafkaError(ErrorCode.cluster_authorization_failed, f"{ctx.principal} may not CLUSTER_ACTION")
        if topic_id is None or not group_id:
            raise KafkaError(ErrorCode.invalid_request, "a group id and a topic id are required")
        snapshot = ctx.broker.share_state.read(StateKey(group_id, topic_id, p.partition), p.leader_epoch)
    except KafkaError as exc:
        return make(cls, partition=p.partition, error_code=exc.code, error_message=exc.message, state_epoch=-1,
                    start_offset=-1, state_batches=())
    if snapshot is None:
        return make(cls, partition=p.partition, error_code=ErrorCode.none, error_message=None, state_epoch=-1,
                    start_offset=-1, state_batches=())
    batch = ctx.nested("StateBatch")
    return make(cls, partition=p.partition, error_code=ErrorCode.none,
                error_message=error_message("none", None), state_epoch=snapshot.state_epoch,
                start_offset=snapshot.start_offset,
                state_batches=tuple(make(batch, first_offset=b.first_offset, last_offset=b.last_offset,
                                         delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                    for b in snapshot.batches))


API = Api(key=84, name="ReadShareGroupState", min_version=0, max_version=0, handle=handle)
