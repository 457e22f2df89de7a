"""ListPartitionReassignments (key 46): the reassignments in progress, with their replica lists (KIP-455).

For each partition being reassigned: its replicas (the target followed by those being removed), the replicas
being added and those being removed. `topics` null lists every reassignment; otherwise only the named
partitions, unknown ones left out. Answered by the active controller, which knows every committed change.
"""

from __future__ import annotations

from typing import Any

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode, KafkaError
from moldau.server.context import RequestContext
from moldau.server.handlers.api import Api
from moldau.server.handlers.common import NO_THROTTLE


async def handle(ctx: RequestContext, request: Any) -> Any:
    forwarded = await ctx.broker.forward_to_controller(ctx, request)
    if forwarded is not None:
        return forwarded
    wanted = None if request.topics is None else {t.name: tuple(t.partition_indexes) for t in request.topics}
    try:
        ongoing = ctx.broker.controller.list_partition_reassignments(wanted)
    except KafkaError as exc:
        return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=exc.code,
                    error_message=exc.message, topics=())
    by_topic: dict[str, list[Any]] = {}
    for name, p in ongoing:
        by_topic.setdefault(name, []).append(make(
            ctx.nested("OngoingPartitionReassignment"), partition_index=p.partition, replicas=p.replicas,
            adding_replicas=p.adding_replicas, removing_replicas=p.removing_replicas))
    topics = tuple(make(ctx.nested("OngoingTopicReassignment"), name=name, partitions=tuple(parts))
                   for name, parts in by_topic.items())
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                topics=topics)


API = Api(key=46, name="ListPartitionReassignments", min_version=0, max_version=0, handle=handle)
