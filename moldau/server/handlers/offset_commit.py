"""OffsetCommit (key 8): store a group's consumed positions.

A commit is acknowledged only after its records are in `__consumer_offsets`. The group checks who may commit
(generation and member for a group with members; "simple" commits with generation -1 when it has none).
Partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and are not stored; metadata longer than
`offset.metadata.max.bytes` gets OFFSET_METADATA_TOO_LARGE. `retention_time` (v2-v4) is ignored, as by Kafka
since 2.1: retention is `offsets.retention.minutes`. v10 names topics by id.

Requests are read and answers written by the direct codec of `moldau.protocol.offset_commit`; a request it does
not read (tagged fields, a malformed body) is decoded by kio, whose objects have the same attribute names.
"""

from __future__ import annotations

from typing import Any

from moldau.coordinator.group.offsets import OffsetCommit
from moldau.metadata.image import MetadataImage, TopicImage
from moldau.protocol import codec
from moldau.protocol.errors import ErrorCode
from moldau.protocol.offset_commit import (
    OffsetCommitResponse,
    OffsetCommitResponseTopic,
    parse_offset_commit_request,
)
from moldau.security.acl.model import AclOperation, ResourceType
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE_MS

TOPIC_IDS_FROM = 10


async def handle(ctx: RequestContext, request: Any) -> Any:
    image = ctx.broker.image
    commits: list[OffsetCommit] = []
    # Per topic, per partition: an error already known, or the index of its commit.
    answers: list[list[tuple[int, ErrorCode | int]]] = []
    group_allowed = ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)
    for topic in request.topics:
        found, topic_error = _topic(ctx, image, topic)
        if not group_allowed:
            found, topic_error = None, ErrorCode.group_authorization_failed
        elif found is not None and not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, found.name):
            found, topic_error = None, ErrorCode.topic_authorization_failed
        answer: list[tuple[int, ErrorCode | int]] = []
        for p in topic.partitions:
            if found is None or p.partition_index not in found.partitions:
                answer.append((p.partition_index, topic_error))
                continue
            answer.append((p.partition_index, len(commits)))
            commits.append(OffsetCommit(found.name, p.partition_index, p.committed_offset,
                                        getattr(p, "committed_leader_epoch", -1), p.committed_metadata))
        answers.append(answer)
    errors = await ctx.broker.groups.commit_offsets(
        request.group_id, request.member_id, getattr(request, "group_instance_id", None),
        request.generation_id_or_member_epoch, commits, ctx.version) if commits else []
    return OffsetCommitResponse(NO_THROTTLE_MS, [
        _topic_response(topic, answer, errors) for topic, answer in zip(request.topics, answers, strict=True)])


def _topic(ctx: RequestContext, image: MetadataImage, topic: Any) -> tuple[TopicImage | None, ErrorCode]:
    if ctx.version >= TOPIC_IDS_FROM:
        return image.topics_by_id.get(topic.topic_id), ErrorCode.unknown_topic_id
    return image.topics_by_name.get(topic.name), ErrorCode.unknown_topic_or_partition


def _topic_response(topic: Any, answer: list[tuple[int, ErrorCode | int]],
                    errors: list[ErrorCode]) -> OffsetCommitResponseTopic:
    partitions = [(index, a if isinstance(a, ErrorCode) else errors[a]) for index, a in answer]
    return OffsetCommitResponseTopic(getattr(topic, "name", None), getattr(topic, "topic_id", None), partitions)


def decode(frame: bytes | memoryview, pos: int, version: int) -> Any:
    request = parse_offset_commit_request(frame, pos, version)
    return request if request is not None else codec.decode_body(codec.api_schema(API_KEY, version), frame, pos)


API_KEY = 8
API = Api(key=API_KEY, name="OffsetCommit", min_version=2, max_version=10, handle=handle, decode=decode)
