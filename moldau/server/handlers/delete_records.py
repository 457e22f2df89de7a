"""DeleteRecords (key 21): move a partition's log start offset forward, deleting the records before it.

For each partition the client gives an offset; every record below it becomes unreadable at once and the
segments wholly below it are deleted. Offset -1 means the high watermark, that is everything consumers can
see. An offset beyond the high watermark, or any other negative one, is OFFSET_OUT_OF_RANGE; an offset below
the current log start offset changes nothing. The answer is the partition's new low watermark (its log start
offset), or -1 with an error.

As in Kafka, a topic whose cleanup policy is only `compact` refuses with POLICY_VIOLATION: compaction decides
what such a log keeps. Only the leader deletes records; on a single node nothing waits for followers, so the
request's timeout never expires.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    topic_cls = ctx.nested("DeleteRecordsTopicResult")
    topics = tuple(
        make(topic_cls, name=t.name, partitions=tuple(_partition(ctx, t.name, p) for p in t.partitions))
        for t in request.topics
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, topics=topics)


def _partition(ctx: RequestContext, topic: str, request: Any) -> Any:
    cls = ctx.nested("DeleteRecordsPartitionResult")
    index = request.partition_index
    try:
        low_watermark = _delete_before(ctx, topic, index, request.offset)
    except KafkaError as exc:
        return make(cls, partition_index=index, low_watermark=-1, error_code=exc.code)
    return make(cls, partition_index=index, low_watermark=low_watermark, error_code=ErrorCode.none)


def _delete_before(ctx: RequestContext, topic: str, index: int, offset: int) -> int:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, topic):
        raise KafkaError(ErrorCode.topic_authorization_failed, f"{ctx.principal} may not delete from {topic}")
    plog = ctx.broker.replicas.leader_partition(topic, index).log
    if plog.config.compact and "delete" not in plog.config.cleanup_policy:
        raise KafkaError(ErrorCode.policy_violation,
                         f"records of {topic}-{index} cannot be deleted: its cleanup policy is compact only")
    # The log resolves -1 to its high watermark and refuses offsets beyond it.
    return plog.delete_records_before(offset)


API = Api(key=21, name="DeleteRecords", min_version=0, max_version=2, handle=handle)
