"""AlterShareGroupOffsets (key 91, KIP-932): set the share-partition start offset of partitions of a share group.

Only while the group is empty: NON_EMPTY_GROUP otherwise (top level), as are GROUP_AUTHORIZATION_FAILED (no READ on
the group), NOT_COORDINATOR and GROUP_ID_NOT_FOUND (a classic or consumer group). A group with no members yet may
be given offsets before it first consumes. Each partition then answers on its own: TOPIC_AUTHORIZATION_FAILED
without READ on the topic, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST for a negative offset, or the share
coordinator's error. The new start has nothing in flight: its records are delivered afresh.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.share_offsets_common import check_empty, readable_topic
from moldau.server.share_group_records import write_group


async def handle(ctx: RequestContext, request: Any) -> Any:
    try:
        check_empty(ctx, request.group_id)
    except KafkaError as exc:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=exc.code,
                    error_message=exc.message, responses=())
    ctx.broker.share.ensure_group(request.group_id)
    written = await write_group(ctx.broker, request.group_id, add=(t.topic_name for t in request.topics
                                                            if t.topic_name in ctx.broker.image.topics_by_name))
    if written != ErrorCode.none:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=written,
                    error_message="the share group could not be written", responses=())
    responses = tuple([await _topic(ctx, request.group_id, t) for t in request.topics])
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                responses=responses)


async def _topic(ctx: RequestContext, group_id: str, wanted: Any) -> Any:
    cls = ctx.nested("AlterShareGroupOffsetsResponseTopic")
    try:
        topic = readable_topic(ctx, wanted.topic_name, AclOperation.READ)
    except KafkaError as exc:
        return make(cls, topic_name=wanted.topic_name, topic_id=None,
                    partitions=tuple(_partition(ctx, p.partition_index, exc.code, exc.message)
                                     for p in wanted.partitions))
    out = []
    for p in wanted.partitions:
        image = topic.partitions.get(p.partition_index)
        if image is None:
            out.append(_partition(ctx, p.partition_index, ErrorCode.unknown_topic_or_partition,
                                  f"{topic.name} has no partition {p.partition_index}"))
        elif p.start_offset < 0:
            out.append(_partition(ctx, p.partition_index, ErrorCode.invalid_request,
                                  f"start offset {p.start_offset} is negative"))
        else:
            written = await ctx.broker.share.reset(group_id, topic.name, p.partition_index, topic.topic_id,
                                                   image.leader_epoch, p.start_offset)
            out.append(_partition(ctx, p.partition_index, written,
                                  None if written == ErrorCode.none else "the share coordinator refused the change"))
    return make(cls, topic_name=topic.name, topic_id=topic.topic_id, partitions=tuple(out))


def _partition(ctx: RequestContext, index: int, error: ErrorCode, message: str | None) -> Any:
    return make(ctx.nested("AlterShareGroupOffsetsResponsePartition"), partition_index=index, error_code=error,
                error_message=message)


API = Api(key=91, name="AlterShareGroupOffsets", min_version=0, max_version=0, handle=handle)
