"""DeleteShareGroupOffsets (key 92, KIP-932): forget a share group's state of whole topics, so that it starts on
them again from share.auto.offset.reset when it next consumes them.

Only while the group is empty: NON_EMPTY_GROUP otherwise (top level), as are GROUP_AUTHORIZATION_FAILED (no DELETE
on the group), NOT_COORDINATOR and GROUP_ID_NOT_FOUND (a classic or consumer group). Each topic then answers on
its own: TOPIC_AUTHORIZATION_FAILED without READ on it, UNKNOWN_TOPIC_OR_PARTITION, or the share coordinator's
error. The topics forgotten leave the group's record in `__consumer_offsets` (`share_group_records`).
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
    responses = tuple([await _topic(ctx, request.group_id, t.topic_name) for t in request.topics])
    forgotten = [r.topic_name for r in responses if r.error_code == ErrorCode.none]
    written = await write_group(ctx.broker, request.group_id, remove=forgotten)
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=written,
                error_message=None if written == ErrorCode.none else "the share group could not be written",
                responses=responses)


async def _topic(ctx: RequestContext, group_id: str, name: str) -> Any:
    cls = ctx.nested("DeleteShareGroupOffsetsResponseTopic")
    try:
        topic = readable_topic(ctx, name, AclOperation.READ)
        for index, image in sorted(topic.partitions.items()):
            written = await ctx.broker.share.reset(group_id, name, index, topic.topic_id, image.leader_epoch, None)
            if written != ErrorCode.none:
                raise KafkaError(written, f"the share coordinator refused to forget partition {index}")
    except KafkaError as exc:
        return make(cls, topic_name=name, topic_id=None, error_code=exc.code, error_message=exc.message)
    return make(cls, topic_name=name, topic_id=topic.topic_id, error_code=ErrorCode.none, error_message=None)


API = Api(key=92, name="DeleteShareGroupOffsets", min_version=0, max_version=0, handle=handle)
