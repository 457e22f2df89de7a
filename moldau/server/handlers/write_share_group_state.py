"""WriteShareGroupState (key 85): a share-partition leader writes the state of its share-partition to the share
coordinator (`moldau.coordinator.share`): the SPSO and the state batches that changed, laid over the state held
(a ShareUpdate record, or a ShareSnapshot every so often), answered once durable.

Errors per partition: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE (retriable), FENCED_LEADER_EPOCH (the writer is
no longer the share-partition's leader), FENCED_STATE_EPOCH (the state was initialized again since),
INVALID_REQUEST (the state was never initialized, or was deleted). Between brokers: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.coordinator.share.records import ShareSnapshot, StateBatch, StateKey
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import CLUSTER_NAME, AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for t in request.topics:
        codes = await asyncio.gather(*(_write(ctx, request.group_id, t.topic_id, p) for p in t.partitions))
        results.append(make(ctx.nested("WriteStateResult"), topic_id=t.topic_id, partitions=tuple(
            make(ctx.nested("PartitionResult"), partition=p.partition, error_code=code, error_message=None)
            for p, code in zip(t.partitions, codes, strict=True))))
    return make(ctx.schema.response_type, results=tuple(results))


async def _write(ctx: RequestContext, group_id: str, topic_id: Any, p: Any) -> Any:
    if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.cluster_authorization_failed
    if topic_id is None or not group_id:
        return ErrorCode.invalid_request
    snapshot = ShareSnapshot(0, p.state_epoch, p.leader_epoch, p.start_offset, tuple(
        StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches))
    return await ctx.broker.share_state.write(StateKey(group_id, topic_id, p.partition), snapshot,
                                              ctx.broker.clock.time_ms())


API = Api(key=85, name="WriteShareGroupState", min_version=0, max_version=0, handle=handle)
