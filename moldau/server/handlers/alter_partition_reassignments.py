"""AlterPartitionReassignments (key 45): move partitions to new replicas, or cancel such moves (KIP-455).

Each partition names its target replicas, or null to cancel its reassignment. The active controller starts the
reassignments (`Controller.alter_partition_reassignments`, see `moldau.metadata.reassignment`) and answers once
they are committed; the data moves afterwards, while the partition keeps serving, and
ListPartitionReassignments shows what is still moving. Errors are per partition; NOT_CONTROLLER, when no
controller could be reached, is also the top-level error. From v1 a request may forbid changing a partition's
replication factor (`allow_replication_factor_change` false, KIP-860): a target with another number of
replicas than the partition has then gets INVALID_REPLICATION_FACTOR, and the other partitions go ahead.
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
    refused = _factor_changes(ctx, items) if not getattr(request, "allow_replication_factor_change", True) else {}
    kept = [item for i, item in enumerate(items) if i not in refused]
    try:
        answered = iter(await ctx.broker.controller.alter_partition_reassignments(kept) if kept else [])
        errors: list[KafkaError | None] = [refused[i] if i in refused else next(answered) for i in range(len(items))]
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
                allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
                error_code=ErrorCode.none if top is None else top.code,
                error_message=None if top is None else top.message, responses=responses)


def _factor_changes(ctx: RequestContext, items: list[tuple[str, int, tuple[int, ...] | None]]
                    ) -> dict[int, KafkaError | None]:
    """The items (by index) whose target changes the partition's replication factor, with their errors."""
    refused: dict[int, KafkaError | None] = {}
    for i, (name, index, target) in enumerate(items):
        topic = ctx.broker.image.topics_by_name.get(name)
        partition = topic.partitions.get(index) if topic is not None else None
        if target is not None and partition is not None and len(target) != len(partition.replicas):
            refused[i] = KafkaError(ErrorCode.invalid_replication_factor,
                                    f"the replication factor would change from {len(partition.replicas)} to "
                                    f"{len(target)}, and allow_replication_factor_change is false")
    return refused


def _partition(ctx: RequestContext, index: int, error: KafkaError | None) -> Any:
    return make(ctx.nested("ReassignablePartitionResponse"), partition_index=index,
                error_code=ErrorCode.none if error is None else error.code,
                error_message=None if error is None else error.message)


API = Api(key=45, name="AlterPartitionReassignments", min_version=0, max_version=1, handle=handle)
