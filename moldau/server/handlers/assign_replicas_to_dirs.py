"""AssignReplicasToDirs (key 73, KIP-858): a broker tells the controller which log directory holds each of its
replicas (controller only).

The controller records the assignment in the partition's metadata, so that when the broker later reports a
directory offline, or registers without it, the controller knows which replicas went with it and moves their
leadership away. A broker epoch other than the registration's answers STALE_BROKER_EPOCH.
"""

from __future__ import annotations

import uuid
from typing import Any

import kio.schema.assign_replicas_to_dirs.v0.response as answer

from moldau.metadata.controller import Controller
from moldau.metadata.log_dirs import Assignment
from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    return await serve(ctx.broker.controller, request, ctx.schema.response_type)


async def serve(controller: Controller, request: Any, response_type: Any) -> Any:
    assignments: list[Assignment] = [
        (str(directory.id_), topic.topic_id, p.partition_index)
        for directory in request.directories if directory.id_ is not None
        for topic in directory.topics if topic.topic_id is not None
        for p in topic.partitions]
    try:
        outcomes = await controller.assign_replicas_to_dirs(request.broker_id, request.broker_epoch, assignments)
    except KafkaError as exc:
        return make(response_type, throttle_time=NO_THROTTLE, error_code=exc.code, directories=())
    return make(response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                directories=_answer(request, outcomes))


def _answer(request: Any, outcomes: dict[tuple[uuid.UUID, int], ErrorCode]) -> tuple[Any, ...]:
    return tuple(
        make(answer.DirectoryData, id_=directory.id_, topics=tuple(
            make(answer.TopicData, topic_id=topic.topic_id, partitions=tuple(
                make(answer.PartitionData, partition_index=p.partition_index,
                     error_code=outcomes.get((topic.topic_id, p.partition_index), ErrorCode.unknown_topic_id))
                for p in topic.partitions))
            for topic in directory.topics))
        for directory in request.directories)


API = Api(key=73, name="AssignReplicasToDirs", min_version=0, max_version=0, handle=handle)
