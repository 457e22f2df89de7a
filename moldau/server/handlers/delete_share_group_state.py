"""DeleteShareGroupState (key 86): delete the durable state of share-partitions from the share coordinator
(`moldau.coordinator.share`), as DeleteGroups of a share group does, so a share group created again under the
same id starts afresh.

Deleting a share-partition that has no state is no error. Errors per partition: NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (no group id or topic id). Between brokers: CLUSTER_ACTION on the
cluster.
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
        codes = await asyncio.gather(*(_delete(ctx, request.group_id, t.topic_id, p) for p in t.partitions))
        results.append(make(ctx.nested("DeleteStateResult"), topic_id=t.topic_id, partitions=tuple(
            make(ctx.nested("PartitionResult"), partition=p.partition, error_code=code, error_message=None)
            for p, code in zip(t.partitions, codes, strict=True))))
    return make(ctx.schema.response_type, results=tuple(results))


async def _delete(ctx: RequestContext, group_id: str, topic_id: Any, p: Any) -> ErrorCode:
    if not may_cluster_action(ctx):
        return ErrorCode.cluster_authorization_failed
    if topic_id is None or not group_id:
        return ErrorCode.invalid_request
    return await ctx.broker.share_state.delete(StateKey(group_id, topic_id, p.partition),
                                               ctx.broker.clock.time_ms())


API = Api(key=86, name="DeleteShareGroupState", min_version=0, max_version=0, handle=handle)
