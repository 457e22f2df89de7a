"""ConsumerGroupDescribe (key 69): consumer groups of the KIP-848 protocol, with each member's current and
target assignment.

A group that does not exist here, or is a classic group, gets GROUP_ID_NOT_FOUND, as in Kafka; a group
coordinated elsewhere gets NOT_COORDINATOR. Authorized operations (KIP-430) are answered from the ACLs when asked.
A group whose members subscribe to or are assigned a topic the principal may not DESCRIBE gets
TOPIC_AUTHORIZATION_FAILED and no description, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from moldau.coordinator.group.consumer import MemberDescription, TPs
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.security.acl.rules import check_group_topics
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import AUTHORIZED_OPERATIONS_OMITTED, NO_THROTTLE, requested_operations


async def handle(ctx: RequestContext, request: Any) -> Any:
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                groups=tuple(_describe(ctx, request, group_id) for group_id in request.group_ids))


def _describe(ctx: RequestContext, request: Any, group_id: str) -> Any:
    cls = ctx.nested("DescribedGroup")
    coordinator = ctx.broker.groups.coordinator
    try:
        if not group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "group id can't be empty")
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            raise KafkaError(ErrorCode.group_authorization_failed, f"{ctx.principal} may not describe {group_id}")
        shard = coordinator.shard(group_id)
    except KafkaError as exc:
        return _failed(cls, group_id, exc.code, exc.message)
    group = shard.consumer_groups.get(group_id)
    if group is None:
        return _failed(cls, group_id, ErrorCode.group_id_not_found, f"group {group_id} is not a consumer group")
    members = group.describe()
    try:
        check_group_topics(ctx, group_id, _topics(members))
    except KafkaError as exc:
        return _failed(cls, group_id, exc.code, exc.message)
    return make(cls, error_code=ErrorCode.none, error_message=None, group_id=group_id,
                group_state=group.state, group_epoch=group.epoch, assignment_epoch=group.target_epoch,
                assignor_name=group.assignor_name(), members=tuple(_member(ctx, m) for m in members),
                authorized_operations=requested_operations(ctx, request, "include_authorized_operations",
                                                           ResourceType.GROUP, group_id))




def _failed(cls: Any, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return make(cls, error_code=error, error_message=message, group_id=group_id, group_state="Dead",
                group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


# MemberType (v1, KIP-1099): which protocol the member speaks; classic members join through JoinGroup.
_CLASSIC, _CONSUMER = 0, 1


def _topics(members: list[MemberDescription]) -> Iterator[str]:
    """Every topic the description would name."""
    for m in members:
        yield from m.metadata.subscribed_topics
        yield from (topic for topic, _ in m.current.assigned | m.target)


def _member(ctx: RequestContext, m: MemberDescription) -> Any:
    meta = m.metadata
    return make(ctx.nested("Member"), member_id=m.member_id, instance_id=meta.instance_id, rack_id=meta.rack_id,
                member_epoch=m.current.member_epoch, client_id=meta.client_id, client_host=meta.client_host,
                subscribed_topic_names=meta.subscribed_topics, subscribed_topic_regex=meta.subscribed_regex,
                assignment=_assignment(ctx, m.current.assigned), target_assignment=_assignment(ctx, m.target),
                member_type=_CLASSIC if meta.classic is not None else _CONSUMER)


def _assignment(ctx: RequestContext, tps: TPs) -> Any:
    image = ctx.broker.image
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(tps):
        by_topic.setdefault(topic, []).append(partition)
    cls = ctx.nested("TopicPartitions")
    parts = tuple(make(cls, topic_id=image.topics_by_name[name].topic_id, topic_name=name, partitions=tuple(ps))
                  for name, ps in by_topic.items() if name in image.topics_by_name)
    return make(ctx.nested("Assignment"), topic_partitions=parts)


API = Api(key=69, name="ConsumerGroupDescribe", min_version=0, max_version=1, handle=handle)
