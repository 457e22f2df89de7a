"""ShareAcknowledge (key 79): a share group member's acknowledgements, without fetching (KIP-932).

It continues the member's share session on this broker (epoch 0 cannot open one: INVALID_SHARE_SESSION_EPOCH)
or, with epoch -1, closes it once the acknowledgements are applied, releasing whatever the member still holds
here. Each partition answers with the result of its acknowledgements: INVALID_RECORD_STATE for offsets the member
does not hold (never acquired, acknowledged already, or its lock expired), all or none per partition.
RENEW (type 4, from v2) extends the locks of the records named.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, error_message
from moldau.server.handlers.share_common import PartitionOutcome, acknowledge, leader_field, leader_hints
from moldau.share.sessions import CLOSE_EPOCH


async def handle(ctx: RequestContext, request: Any) -> Any:
    share = ctx.broker.share
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    if not group_id or not member_id:
        return _response(ctx, {}, ErrorCode.invalid_request, "group id and member id must be set")
    try:
        share.sessions.acknowledge(group_id, member_id, epoch, share.now_ms(), ctx.peer)
    except KafkaError as exc:
        return _response(ctx, {}, exc.code, exc.message)
    outcomes = {(t.topic_id, p.partition_index): await acknowledge(ctx, group_id, member_id, t.topic_id,
                                                                   p.partition_index, p.acknowledgement_batches)
                for t in request.topics for p in t.partitions}
    if epoch == CLOSE_EPOCH:
        share.sessions.close(group_id, member_id)
        share.release(group_id, member_id)
    return _response(ctx, outcomes)


def _response(ctx: RequestContext, outcomes: dict[tuple[uuid.UUID, int], PartitionOutcome],
              code: ErrorCode = ErrorCode.none, message: str | None = None) -> Any:
    endpoints = leader_hints(ctx, outcomes)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic_id, partition), o in outcomes.items():
        by_topic.setdefault(topic_id, []).append(make(
            ctx.nested("PartitionData"), partition_index=partition, error_code=o.ack_error,
            error_message=error_message(o.ack_error.name, o.ack_message), current_leader=leader_field(ctx, o)))
    responses = tuple(make(ctx.nested("ShareAcknowledgeTopicResponse"), topic_id=t, partitions=tuple(ps))
                      for t, ps in by_topic.items())
    lock = datetime.timedelta(milliseconds=ctx.broker.share.settings.partition.record_lock_duration_ms)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=code,
                error_message=error_message(code.name, message), acquisition_lock_timeout=lock,
                responses=responses, node_endpoints=endpoints)


API = Api(key=79, name="ShareAcknowledge", min_version=1, max_version=2, handle=handle)
