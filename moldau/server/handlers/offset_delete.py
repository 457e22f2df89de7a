"""OffsetDelete (key 47): delete a group's committed offsets for some partitions.

The group must exist (GROUP_ID_NOT_FOUND); a group with members must use the consumer protocol (else
NON_EMPTY_GROUP), and partitions of topics it still subscribes to get GROUP_SUBSCRIBED_TO_TOPIC. Partitions of
unknown topics get UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return make(ctx.schema.response_type, error_code=ErrorCode.group_authorization_failed,
                    throttle_time=NO_THROTTLE, topics=())
    image = ctx.broker.image
    known: list[tuple[str, int]] = []
    refused = {t.name for t in request.topics if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)}
    for topic in request.topics:
        found = image.topics_by_name.get(topic.name) if topic.name not in refused else None
        known += [(topic.name, p.partition_index) for p in topic.partitions
                  if found is not None and p.partition_index in found.partitions]
    error, errors = ctx.broker.groups.delete_offsets(request.group_id, known)
    if error != ErrorCode.none:
        return make(ctx.schema.response_type, error_code=error, throttle_time=NO_THROTTLE, topics=())
    by_partition = dict(zip(known, errors, strict=True))
    part_cls = ctx.nested("OffsetDeleteResponsePartition")
    topics = tuple(
        make(ctx.nested("OffsetDeleteResponseTopic"), name=t.name, partitions=tuple(
            make(part_cls, partition_index=p.partition_index,
                 error_code=ErrorCode.topic_authorization_failed if t.name in refused else
                 by_partition.get((t.name, p.partition_index), ErrorCode.unknown_topic_or_partition))
            for p in t.partitions))
        for t in request.topics
    )
    return make(ctx.schema.response_type, error_code=ErrorCode.none, throttle_time=NO_THROTTLE, topics=topics)


API = Api(key=47, name="OffsetDelete", min_version=0, max_version=0, handle=handle)
