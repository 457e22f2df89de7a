"""ShareGroupHeartbeat (key 76): joining, staying in and leaving a share group (KIP-932).

The member generates its id; epoch 0 joins (with the subscribed topic names), -1 leaves, any other epoch must be
the member's current one. The answer carries the member epoch and, when it changed, the partitions the member
may fetch from (every partition of its subscribed topics: see `moldau.share.group`). Share groups are served by
the broker that coordinates the group id (FindCoordinator's answer); any other answers NOT_COORDINATOR. A group id
taken by a classic or consumer group gets GROUP_ID_NOT_FOUND ("not a share group"), as in Kafka. A heartbeat that
moves the group epoch (a join, a leave, a new subscription) or a member's epoch, or subscribes the group to a new
topic, writes the group and its members to `__consumer_offsets` before answering (`share_group_records`).
"""

from __future__ import annotations

import datetime
from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE, error_message
from moldau.server.handlers.join_group import client_host
from moldau.server.share_group_records import write_expired, write_group
from moldau.share.group import Heartbeat, HeartbeatAnswer, TopicPartitions


async def handle(ctx: RequestContext, request: Any) -> Any:
    problem = _invalid(request)
    if problem is not None:
        return _response(ctx, HeartbeatAnswer(ErrorCode.invalid_request, message=problem))
    try:
        shard = ctx.broker.groups.coordinator.shard(request.group_id)
        # Share-partition state lives in __share_group_state: have it before members start fetching.
        ctx.broker.share_state.ensure_topic()
    except KafkaError as exc:
        return _response(ctx, HeartbeatAnswer(exc.code, message=exc.message))
    if request.group_id in shard.groups or request.group_id in shard.consumer_groups:
        return _response(ctx, HeartbeatAnswer(ErrorCode.group_id_not_found,
                                              message=f"group {request.group_id} is not a share group"))
    heartbeat = Heartbeat(
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        rack_id=request.rack_id,
        subscribed_topics=None if request.subscribed_topic_names is None else tuple(request.subscribed_topic_names),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.peer),
    )
    image = ctx.broker.image

    def partitions_of(topic: str) -> int | None:
        found = image.topics_by_name.get(topic)
        return None if found is None else len(found.partitions)

    answer = ctx.broker.share.heartbeat(request.group_id, heartbeat, partitions_of)
    if answer.error == ErrorCode.none:
        written = await write_group(ctx.broker, request.group_id)
        if written != ErrorCode.none:
            return _response(ctx, HeartbeatAnswer(written, message="the share group could not be written"))
    await write_expired(ctx.broker)  # members this heartbeat found silent, in any group
    return _response(ctx, answer)


def _invalid(request: Any) -> str | None:
    """Kafka's request-level checks, which need no group state."""
    if not request.group_id:
        return "group id can't be empty"
    if not request.member_id:
        return "member id can't be empty"
    if request.member_epoch < -1:
        return f"member epoch {request.member_epoch} is not valid"
    if request.rack_id is not None and not request.rack_id:
        return "rack id can't be empty"
    return None


def _response(ctx: RequestContext, answer: HeartbeatAnswer) -> Any:
    assignment = None
    if answer.assignment is not None and answer.error == ErrorCode.none:
        assignment = make(ctx.nested("Assignment"), topic_partitions=_topic_partitions(ctx, answer.assignment))
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=answer.error,
                error_message=error_message(answer.error.name, answer.message),
                member_id=answer.member_id or None, member_epoch=answer.member_epoch,
                heartbeat_interval=datetime.timedelta(milliseconds=answer.heartbeat_interval_ms),
                assignment=assignment)


def _topic_partitions(ctx: RequestContext, tps: TopicPartitions) -> tuple[Any, ...]:
    image = ctx.broker.image
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    cls = ctx.nested("TopicPartitions")
    return tuple(make(cls, topic_id=image.topics_by_name[name].topic_id, partitions=tuple(ps))
                 for name, ps in by_topic.items() if name in image.topics_by_name)


API = Api(key=76, name="ShareGroupHeartbeat", min_version=1, max_version=1, handle=handle)
