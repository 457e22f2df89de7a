"""ConsumerGroupHeartbeat (key 68): the next-generation consumer group protocol (KIP-848).

One request joins (member epoch 0), stays alive and reports owned partitions, or leaves (-1; -2 for a static
member that will come back); the answer carries the member epoch and, when it changed, the partitions the
member may consume. Topics travel as ids: owned partitions of unknown ids are ignored (the topic is gone).
From v1 the client generates its member id; v0 lets the coordinator generate one for an empty id. Subscribed
topic names the principal may not DESCRIBE are refused before (TOPIC_AUTHORIZATION_FAILED, `security.acl.rules`);
a regex resolves only to topics it may DESCRIBE (the principal is kept in the member's record for that). A share group's
id gets GROUP_ID_NOT_FOUND ("not a consumer group", `GroupShard.consumer_heartbeat`), as in Kafka.
"""

from __future__ import annotations

import datetime
from typing import Any

from moldau.coordinator.group.consumer import HeartbeatRequest, HeartbeatResult, TPs
from moldau.metadata.image import MetadataImage
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, error_message, ms_from_timedelta
from moldau.server.handlers.join_group import client_host

CLIENT_MEMBER_ID_FROM = 1


async def handle(ctx: RequestContext, request: Any) -> Any:
    problem = _invalid(ctx, request)
    if problem is not None:
        return _response(ctx, HeartbeatResult(ErrorCode.invalid_request, message=problem))
    image = ctx.broker.image
    heartbeat = HeartbeatRequest(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=ms_from_timedelta(request.rebalance_timeout),
        subscribed_topics=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        # v0 has no regex field (it came with v1, KIP-848's regex support); "no change" is null.
        subscribed_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=None if request.topic_partitions is None else _owned(image, request.topic_partitions),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.peer),
        principal=str(ctx.principal),
    )
    return _response(ctx, await ctx.broker.groups.consumer_heartbeat(request.group_id, heartbeat))


def _invalid(ctx: RequestContext, request: Any) -> str | None:
    """Kafka's request-level checks, which need no group state."""
    if not request.group_id:
        return "group id can't be empty"
    if ctx.version >= CLIENT_MEMBER_ID_FROM and not request.member_id:
        return "member id can't be empty"
    if request.instance_id is not None and not request.instance_id:
        return "instance id can't be empty"
    if request.rack_id is not None and not request.rack_id:
        return "rack id can't be empty"
    return None


def _owned(image: MetadataImage, topics: Any) -> TPs:
    out: set[tuple[str, int]] = set()
    for t in topics:
        topic = image.topics_by_id.get(t.topic_id)
        if topic is not None:
            out.update((topic.name, int(p)) for p in t.partitions)
    return frozenset(out)


def _response(ctx: RequestContext, result: HeartbeatResult) -> Any:
    assignment = None
    if result.assignment is not None and result.error == ErrorCode.none:
        assignment = make(ctx.nested("Assignment"), topic_partitions=_topic_partitions(ctx, result.assignment))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=result.error,
                error_message=error_message(result.error.name, result.message),
                member_id=result.member_id or None, member_epoch=result.member_epoch,
                heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
                assignment=assignment)


def _topic_partitions(ctx: RequestContext, tps: TPs) -> tuple[Any, ...]:
    image = ctx.broker.image
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    cls = ctx.nested("TopicPartitions")
    return tuple(make(cls, topic_id=image.topics_by_name[name].topic_id, partitions=tuple(ps))
                 for name, ps in by_topic.items() if name in image.topics_by_name)


API = Api(key=68, name="ConsumerGroupHeartbeat", min_version=0, max_version=1, handle=handle)
