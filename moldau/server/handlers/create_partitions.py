"""CreatePartitions (key 37): add partitions to existing topics.

Kafka only ever grows a topic: the new count must be larger than the current one (INVALID_PARTITIONS
otherwise), since shrinking would lose data and change the key-to-partition mapping. Assignments, when given,
list the replicas of each new partition only, one list per new partition (INVALID_REPLICA_ASSIGNMENT if they
do not match). A topic named twice in one request fails with INVALID_REQUEST and is not changed.
`validate_only` checks everything and changes nothing. With a `controller_mutation_rate` quota on the client,
the added partitions count against it (not with `validate_only`); from v3 a topic over the quota is refused with
THROTTLING_QUOTA_EXCEEDED, before v3 it grows and the client is throttled (KIP-599; see
`moldau.server.handlers.mutations`). The controller commits before answering, so the
request's timeout never expires. A request adding more than 10,000 partitions in all fails whole, every topic
with POLICY_VIOLATION (the bound Kafka's controller puts on CreateTopics).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from moldau.metadata.controller import MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, forward_authorized
from moldau.server.handlers.mutations import Mutations, mutation_quota, serve_metered

_FIRST_STRICT_VERSION = 3  # KIP-599: THROTTLING_QUOTA_EXCEEDED per topic from here, throttling only before
_NAMED_TWICE = "duplicate topic in request"


async def handle(ctx: RequestContext, request: Any) -> Any:
    quota = None if request.validate_only else mutation_quota(ctx, _FIRST_STRICT_VERSION)
    if quota is None:
        return await _handle(ctx, request)
    return await serve_metered(ctx, request, quota, Mutations(
        "topics", "results", key=lambda t: t.name, refusal=lambda t: _refusal(ctx, t), count=lambda t: _added(ctx, t),
        duplicate=lambda t: _result(ctx, t.name, ErrorCode.invalid_request, _NAMED_TWICE),
        throttled=lambda t, message: _result(ctx, t.name, ErrorCode.throttling_quota_exceeded, message),
        serve=_handle))


def _added(ctx: RequestContext, topic: Any) -> int:
    """The partitions growing `topic` to its new count adds (0 for a topic this node does not know)."""
    current = ctx.broker.image.topics_by_name.get(topic.name)
    return max(0, topic.count - len(current.partitions)) if current is not None else 0


def _refusal(ctx: RequestContext, topic: Any) -> Any | None:
    """TOPIC_AUTHORIZATION_FAILED for a topic the principal may not ALTER."""
    if ctx.authorize(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
        return None
    return _result(ctx, topic.name, ErrorCode.topic_authorization_failed, f"{ctx.principal} may not alter {topic.name}")


async def _handle(ctx: RequestContext, request: Any) -> Any:
    refusals = {i: refusal for i, t in enumerate(request.topics) if (refusal := _refusal(ctx, t)) is not None}
    forwarded = await forward_authorized(ctx, request, "topics", "results", refusals)
    if forwarded is not None:
        return forwarded
    counts = Counter(t.name for t in request.topics)
    if sum(_added(ctx, t) for i, t in enumerate(request.topics) if i not in refusals) > MAX_PARTITIONS_PER_REQUEST:
        results = tuple(refusals.get(i) or _result(ctx, t.name, ErrorCode.policy_violation, TOO_MANY_PARTITIONS)
                        for i, t in enumerate(request.topics))
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, results=results)
    results = tuple([
        refusals[i] if i in refusals else
        _result(ctx, t.name, ErrorCode.invalid_request, _NAMED_TWICE)
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
