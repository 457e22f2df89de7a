"""ShareGroupDescribe (key 77): share groups with their members, epochs and assignments.

A group id this broker coordinates but that is not a share group gets GROUP_ID_NOT_FOUND, as in Kafka; one
coordinated elsewhere gets NOT_COORDINATOR. A group whose members subscribe to or are assigned a topic the
principal may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED and no description, as in Kafka.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.acl.rules import check_group_topics
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE, requested_operations
from moldau.share.group import ASSIGNOR_NAME, ShareMember, TopicPartitions


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                groups=tuple(_describe(ctx, request, group_id) for group_id in request.group_ids))


def _describe(ctx: RequestContext, request: Any, group_id: str) -> Any:
    cls = ctx.nested("DescribedGroup")
    try:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "group id can't be empty")
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            raise KafkaError(ErrorCode.group_authorization_failed, f"{ctx.principal} may not describe {group_id}")
        ctx.broker.groups.coordinator.shard(group_id)
    except KafkaError as exc:
        return _failed(cls, group_id, exc.code, exc.message)
    group = ctx.broker.share.describe(group_id)
    if group is None:
        return _failed(cls, group_id, ErrorCode.group_id_not_found, f"group {group_id} is not a share group")
    try:
        check_group_topics(ctx, group_id, (t for m in group.members.values()
                                           for t in (*m.subscribed_topics, *(topic for topic, _ in m.assignment))))
    except KafkaError as exc:
        return _failed(cls, group_id, exc.code, exc.message)
    return make(cls, error_code=ErrorCode.none, error_message=None, group_id=group_id, group_state=group.state,
                group_epoch=group.epoch, assignment_epoch=group.epoch, assignor_name=ASSIGNOR_NAME,
                members=tuple(_member(ctx, m) for _, m in sorted(group.members.items())),
                authorized_operations=requested_operations(ctx, request, "include_authorized_operations",
                                                           ResourceType.GROUP, group_id))


def _failed(cls: Any, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return make(cls, error_code=error, error_message=message, group_id=group_id, group_state="Dead",
                group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _member(ctx: RequestContext, m: ShareMember) -> Any:
    return make(ctx.nested("Member"), member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
                client_id=m.client_id, client_host=m.client_host, subscribed_topic_names=m.subscribed_topics,
                assignment=_assignment(ctx, m.assignment))


def _assignment(ctx: RequestContext, tps: TopicPartitions) -> Any:
    image = ctx.broker.image
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    cls = ctx.nested("TopicPartitions")
    parts = tuple(make(cls, topic_id=image.topics_by_name[name].topic_id, topic_name=name, partitions=tuple(ps))
                  for name, ps in by_topic.items() if name in image.topics_by_name)
    return make(ctx.nested("Assignment"), topic_partitions=parts)


API = Api(key=77, name="ShareGroupDescribe", min_version=1, max_version=1, handle=handle)
