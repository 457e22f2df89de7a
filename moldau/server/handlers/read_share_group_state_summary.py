"""ReadShareGroupStateSummary (key 87): what the share coordinator (`moldau.coordinator.share`) holds for
share-partitions, without their batches: state epoch, leader epoch, the SPSO, and (v1, KIP-1226) how many records
at or past the SPSO are done (DeliveryCompleteCount). Describing a share group's offsets reads it.

A share-partition without state answers state epoch -1 and start offset -1. The leader epoch in the request is
neither checked nor recorded: describing is not leading. Errors per partition: NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST (no group id or topic id). Between brokers: CLUSTER_ACTION on the
cluster.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.share.records import StateKey
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.share_common import may_cluster_action
from moldau.server.share_state_links import StateSummary, summary_of


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.schema.response_type, results=tuple(
        make(ctx.nested("ReadStateSummaryResult"), topic_id=t.topic_id,
             partitions=tuple(_answer(ctx, p.partition, _summary(ctx, request.group_id, t.topic_id, p.partition))
                              for p in t.partitions))
        for t in request.topics))


def _summary(ctx: RequestContext, group_id: str, topic_id: Any, partition: int) -> StateSummary:
    if not may_cluster_action(ctx):
        return StateSummary(ErrorCode.cluster_authorization_failed)
    if topic_id is None or not group_id:
        return StateSummary(ErrorCode.invalid_request)
    try:
        return summary_of(ctx.broker.share_state.summary(StateKey(group_id, topic_id, partition)))
    except KafkaError as exc:
        return StateSummary(exc.code)


def _answer(ctx: RequestContext, partition: int, s: StateSummary) -> Any:
    return make(ctx.nested("PartitionResult"), partition=partition, error_code=s.error, error_message=None,
                state_epoch=s.state_epoch, leader_epoch=s.leader_epoch, start_offset=s.start_offset,
                delivery_complete_count=s.delivery_complete_count)


API = Api(key=87, name="ReadShareGroupStateSummary", min_version=0, max_version=1, handle=handle)
