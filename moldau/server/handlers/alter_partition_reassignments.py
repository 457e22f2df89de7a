"""AlterPartitionReassignments (key 45): move partitions to new replicas, or cancel such moves (KIP-455).

Each partition names its target replicas, or null to cancel its reassignment. The active controller starts the
reassignments (`Controller.alter_partition_reassignments`, see `moldau.metadata.reassignment`) and answers once
they are committed; the data moves afterwards, while the partition keeps serving, and
ListPartitionReassignments shows what is still moving. Errors are per partition; NOT_CONTROLLER, when no
controller could be reached, is also the top-level error.
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
    items = [(t.name, p.partition_index, None if p.replicas is None else tuple(int(b) for b in p.replicas))
             for t in request.topics for p in t.partitions]
    try:
        errors: list[KafkaError | None] = await ctx.broker.controller.alter_partition_reassignments(items)
        top = None
    except KafkaError as exc:
        errors, top = [exc] * len(items), exc
    answers = iter(errors)
    responses = tuple(
        make(ctx.nested("ReassignableTopicResponse"), name=t.name,
             partitions=tuple(_partition(ctx, p.partition_index, next(answers)) for p in t.partitions))
        for t in request.topics
    )
    return make(ctx.schema.response_type, throttle_time=NO_THROTTLE,
                error_code=ErrorCode.none if top is None else top.code,
                error_message=None if top is None else top.message, responses=responses)


def _partition(ctx: RequestContext, index: int, error: KafkaError | None) -> Any:
    return make(ctx.nested("ReassignablePartitionResponse"), partition_index=index,
                error_code=ErrorCode.none if error is None else error.code,
                error_message=None if error is None else error.message)


API = Api(key=45, name="AlterPartitionReassignments", min_version=0, max_version=0, handle=handle)
