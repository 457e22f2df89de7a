"""CreatePartitions (key 37): add partitions to existing topics.

Kafka only ever grows a topic: the new count must be larger than the current one (INVALID_PARTITIONS
otherwise), since shrinking would lose data and change the key-to-partition mapping. Assignments, when given,
list the replicas of each new partition only, one list per new partition (INVALID_REPLICA_ASSIGNMENT if they
do not match). A topic named twice in one request fails with INVALID_REQUEST and is not changed.
`validate_only` checks everything and changes nothing. The controller commits before answering, so the
request's timeout never expires.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized


async def handle(ctx: RequestContext, request: Any) -> Any:
    refusals = {i: _result(ctx, t.name, ErrorCode.topic_authorization_failed,
                           f"{ctx.principal} may not alter {t.name}")
                for i, t in enumerate(request.topics)
                if not ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, t.name)}
    forwarded = await forward_authorized(ctx, request, "topics", "results", refusals)
    if forwarded is not None:
        return forwarded
    counts = Counter(t.name for t in request.topics)
    results = tuple([
        refusals[i] if i in refusals else
        _result(ctx, t.name, ErrorCode.invalid_request, "duplicate topic in request")
        if counts[t.name] > 1 else await _create(ctx, t, request.validate_only)
        for i, t in enumerate(request.topics)
    ])
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=results)


async def _create(ctx: RequestContext, topic: Any, validate_only: bool) -> Any:
    assignments = None
    if topic.assignments is not None:
        assignments = [tuple(a.broker_ids) for a in topic.assignments]
    try:
        await ctx.broker.controller.create_partitions(topic.name, topic.count, assignments, validate_only)
    except KafkaError as exc:
        return _result(ctx, topic.name, exc.code, exc.message)
    return _result(ctx, topic.name, ErrorCode.none, None)


def _result(ctx: RequestContext, name: str, code: ErrorCode, message: str | None) -> Any:
    return make(ctx.nested("CreatePartitionsTopicResult"), name=name, error_code=code, error_message=message)


API = Api(key=37, name="CreatePartitions", min_version=0, max_version=3, handle=handle)
