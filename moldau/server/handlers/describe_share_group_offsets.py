"""DescribeShareGroupOffsets (key 90, KIP-932): the share-partition start offset of each partition of a share group,
and (v1) its lag.

Each group is answered on its own: GROUP_AUTHORIZATION_FAILED without DESCRIBE on it, NOT_COORDINATOR when
another broker coordinates it, GROUP_ID_NOT_FOUND for a classic or consumer group. Topics null means every topic
the group has share-partition state of. A partition the group never consumed has start offset -1. The lag is the
records between the start offset and the partition's high watermark not yet acknowledged or archived; the high
watermark of a partition led by another broker is asked of its leader (ListOffsets), and the lag is -1 when it
cannot be. Topics need DESCRIBE (else TOPIC_AUTHORIZATION_FAILED per partition); a missing topic or partition is
UNKNOWN_TOPIC_OR_PARTITION.

v1 responses also carry Moldau's in-flight count per partition as a tagged field
(`moldau.protocol.share_offsets_response`): the records past the start offset being delivered, from the
share-partition's live state when it is led here, else from its durable state.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol import share_offsets_response
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE
from moldau.server.handlers.share_offsets_common import check_share_group, known_topics, readable_topic
from moldau.share.manager import ShareOffsets

UNKNOWN = -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    groups = tuple([await _group(ctx, g) for g in request.groups])
    response_type = (share_offsets_response.DescribeShareGroupOffsetsResponse if ctx.schema.version >= 1
                     else ctx.schema.response_type)
    return make(response_type, throttle_time=NO_THROTTLE, groups=groups)


def _nested(ctx: RequestContext, name: str) -> Any:
    """This version's response class; v1's carry the in-flight count."""
    return share_offsets_response.NESTED[name] if ctx.schema.version >= 1 else ctx.nested(name)


async def _group(ctx: RequestContext, group: Any) -> Any:
    cls = _nested(ctx, "DescribeShareGroupOffsetsResponseGroup")
    try:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id):
            raise KafkaError(ErrorCode.group_authorization_failed,
                             f"{ctx.principal} may not describe {group.group_id}")
        known = check_share_group(ctx, group.group_id)
        wanted = ([(t.topic_name, tuple(t.partitions)) for t in group.topics] if group.topics is not None
                  else [(name, None) for name in known_topics(ctx, group.group_id)])
        if known is None and group.topics is None and not wanted:
            raise KafkaError(ErrorCode.group_id_not_found, f"share group {group.group_id} does not exist")
    except KafkaError as exc:
        return make(cls, group_id=group.group_id, topics=(), error_code=exc.code, error_message=exc.message)
    topics = tuple([await _topic(ctx, group.group_id, name, parts) for name, parts in wanted])
    return make(cls, group_id=group.group_id, topics=topics, error_code=ErrorCode.none, error_message=None)


async def _topic(ctx: RequestContext, group_id: str, name: str, partitions: tuple[int, ...] | None) -> Any:
    cls = _nested(ctx, "DescribeShareGroupOffsetsResponseTopic")
    try:
        topic = readable_topic(ctx, name, AclOperation.DESCRIBE)
    except KafkaError as exc:
        failed = tuple(_partition(ctx, p, UNKNOWN, UNKNOWN, UNKNOWN, exc.code, exc.message)
                       for p in partitions or ())
        return make(cls, topic_name=name, topic_id=None, partitions=failed)
    wanted = sorted(topic.partitions) if partitions is None else partitions
    remote = await ctx.broker.share_state_links.high_watermarks((name, index) for index in wanted)
    out = []
    for index in wanted:
        image = topic.partitions.get(index)
        if image is None:
            out.append(_partition(ctx, index, UNKNOWN, UNKNOWN, UNKNOWN, ErrorCode.unknown_topic_or_partition,
                                  f"{name} has no partition {index}"))
            continue
        try:
            found = await ctx.broker.share.start_offset(group_id, name, index, topic.topic_id, image.leader_epoch)
        except KafkaError as exc:
            out.append(_partition(ctx, index, UNKNOWN, image.leader_epoch, UNKNOWN, exc.code, exc.message))
            continue
        if found is None:
            if partitions is not None:  # asked for by name: said to be unstarted; else left out
                out.append(_partition(ctx, index, UNKNOWN, image.leader_epoch, UNKNOWN, ErrorCode.none, None))
            continue
        out.append(_partition(ctx, index, found.start_offset, image.leader_epoch,
                              _lag(ctx, name, index, found, remote), ErrorCode.none, None,
                              found.delivering))
    return make(cls, topic_name=name, topic_id=topic.topic_id, partitions=tuple(out))


def _lag(ctx: RequestContext, topic: str, partition: int, found: ShareOffsets,
         remote: dict[tuple[str, int], int]) -> int:
    """Records from the start offset to the high watermark not yet done; -1 when the high watermark is unknown."""
    hosted = ctx.broker.replicas.partitions.get((topic, partition))
    if hosted is not None and hosted.leader_state is not None:
        high_watermark = hosted.log.high_watermark
    elif (topic, partition) in remote:
        high_watermark = remote[(topic, partition)]
    else:
        return UNKNOWN
    return max(high_watermark - found.start_offset - found.done, 0)


def _partition(ctx: RequestContext, index: int, start: int, leader_epoch: int, lag: int, error: ErrorCode,
               message: str | None, in_flight: int = UNKNOWN) -> Any:
    return make(_nested(ctx, "DescribeShareGroupOffsetsResponsePartition"), partition_index=index,
                start_offset=start, leader_epoch=leader_epoch, lag=lag, error_code=error, error_message=message,
                in_flight_count=in_flight)


API = Api(key=90, name="DescribeShareGroupOffsets", min_version=0, max_version=1, handle=handle)
