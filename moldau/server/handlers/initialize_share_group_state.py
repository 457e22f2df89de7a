"""InitializeShareGroupState (key 83): start the durable state of share-partitions at a start offset with nothing in
flight; the share-partition leader sends it to the share coordinator (`moldau.coordinator.share`) the first time
a share group reads a partition that has no state.

A share-partition that has a state already keeps it (answered without error). After DeleteShareGroupState the new
state gets a higher state epoch than the deleted one, so a leader still holding the old one is fenced
(FENCED_STATE_EPOCH) on its next write; WriteShareGroupState of a state never initialized is INVALID_REQUEST.

Errors per partition: NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (no group id or topic id, a
negative start offset). Between brokers: CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.coordinator.share.records import StateKey
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.share_common import may_cluster_action


async def handle(ctx: RequestContext, request: Any) -> Any:
    results = []
    for t in request.topics:
        codes = await asyncio.gather(*(_initialize(ctx, request.group_id, t.topic_id, p) for p in t.partitions))
        results.append(make(ctx.nested("InitializeStateResult"), topic_id=t.topic_id, partitions=tuple(
            make(ctx.nested("PartitionResult"), partition=p.partition, error_code=code, error_message=None)
            for p, code in zip(t.partitions, codes, strict=True))))
    return make(ctx.schema.response_type, results=tuple(results))


async def _initialize(ctx: RequestContext, group_id: str, topic_id: Any, p: Any) -> ErrorCode:
    if not may_cluster_action(ctx):
        return ErrorCode.cluster_authorization_failed
    if topic_id is None or not group_id or p.start_offset < 0:
        return ErrorCode.invalid_request
    return await ctx.broker.share_state.initialize(StateKey(group_id, topic_id, p.partition), p.state_epoch,
                                                   p.start_offset, ctx.broker.clock.time_ms())


API = Api(key=83, name="InitializeShareGroupState", min_version=0, max_version=0, handle=handle)
